"""Prompt alignment: CLIP score, per sample.

Same definition as torchmetrics' CLIPScore, 100 * max(cos(image, text), 0), computed with
transformers directly: torchmetrics (1.9) calls `get_image_features` and expects a tensor, which
transformers 5 no longer returns. The model is a hub id or a local folder (save_pretrained).
"""

from __future__ import annotations

import os
from pathlib import Path

from assess.metrics.base import Outcome, SampleInput, SampleMetric
from assess.metrics.registry import CLIP_SCORE, sample_metric_names

DEFAULT_CLIP_MODEL = "openai/clip-vit-large-patch14"
CLIP_MODEL_ENV = "HYPERGRID_CLIP_MODEL"
_BATCH = 32

_LOADED: dict[str, object] = {}


def clip_model_name(configured: str | None = None) -> str:
    """--clip-model, else $HYPERGRID_CLIP_MODEL, else the torchmetrics default."""
    return configured or os.environ.get(CLIP_MODEL_ENV) or DEFAULT_CLIP_MODEL


HUB_PROBE_TIMEOUT_S = 1.5


def hub_reachable(timeout_s: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """One TCP connection to the hub (or to the HTTPS proxy, when one is set), within timeout_s, DNS included."""
    import socket
    import threading
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    target = urlsplit(proxy if proxy else constants.ENDPOINT)
    address = (target.hostname or "", target.port or (443 if target.scheme == "https" else 80))
    reached: list[bool] = []

    def connect() -> None:
        try:
            socket.create_connection(address, timeout=timeout_s).close()
            reached.append(True)
        except OSError:
            pass

    probe = threading.Thread(target=connect, daemon=True)  # a thread: getaddrinfo has no timeout of its own
    probe.start()
    probe.join(timeout_s)
    return bool(reached)


def _how_to_load(name: str) -> bool | str:
    """Whether from_pretrained must read the local cache alone (True) or may use the hub (False), or why
    the model cannot be had now. A local folder and HF_HUB_OFFLINE load as from_pretrained does; for a hub
    id the hub is probed once: unreachable, a cached snapshot is read without the network, and a model
    that is not cached is answered here, at once, instead of by from_pretrained's retries."""
    from huggingface_hub import constants, try_to_load_from_cache

    offline = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE") or constants.HF_HUB_OFFLINE
    a_path = name.startswith(("/", ".", "~")) or Path(name).expanduser().is_dir()
    if a_path or offline or hub_reachable():
        return False
    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return True
    except ValueError:  # not a valid hub id: from_pretrained says so
        return False
    return (f"CLIP model {name!r} is not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) and the hub "
            f"({constants.ENDPOINT}) cannot be reached. Fix: download it once where the hub is reachable "
            f"(`hf download {name}`, then copy {constants.HF_HUB_CACHE}), or pass --clip-model <local folder> "
            f"(or set {CLIP_MODEL_ENV}), or leave {CLIP_SCORE.name} out: --metrics "
            + ",".join(n for n in sample_metric_names() if n != CLIP_SCORE.name))


def load_clip(name: str) -> object:
    """(model, processor), or the reason they cannot be loaded (cached per process, so asked once per call)."""
    if name not in _LOADED:
        how = _how_to_load(name)
        _LOADED[name] = how if isinstance(how, str) else _from_pretrained(name, local_files_only=how)
    return _LOADED[name]


def _from_pretrained(name: str, local_files_only: bool) -> object:
    try:
        import transformers
        from transformers import CLIPModel, CLIPProcessor

        transformers.logging.set_verbosity_error()
        model = CLIPModel.from_pretrained(name, local_files_only=local_files_only).eval()
        processor = CLIPProcessor.from_pretrained(name, local_files_only=local_files_only)
        return (model, processor)
    except Exception as exc:  # not a CLIP checkpoint, a broken cache, a download that failed
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return (f"CLIP model {name!r} could not be loaded ({type(exc).__name__}: {first_line}); "
                f"pass --clip-model <local folder> or set {CLIP_MODEL_ENV}")


class CLIPScoreMetric(SampleMetric):
    spec = CLIP_SCORE

    def __init__(self, model: str | None = None) -> None:
        self.model_name = clip_model_name(model)

    @classmethod
    def from_options(cls, clip_model: str | None = None) -> CLIPScoreMetric:
        return cls(clip_model)

    @property
    def config(self) -> str:
        """The CLIP model by name and content (assess.metrics.model_identity): other weights, other scores."""
        from assess.metrics.model_identity import model_config

        return model_config(self.model_name)

    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        loaded = load_clip(self.model_name)
        if isinstance(loaded, str):
            return [Outcome.unavailable(loaded) for _ in inputs]
        outcomes: list[Outcome | None] = [None] * len(inputs)
        todo = []
        for i, item in enumerate(inputs):
            if not item.prompt:
                outcomes[i] = Outcome.unavailable("samples.jsonl has no prompt text for this sample")
            else:
                todo.append(i)
        for start in range(0, len(todo), _BATCH):
            chunk = todo[start : start + _BATCH]
            scores = self._scores(loaded, [inputs[i] for i in chunk])
            for i, value in zip(chunk, scores, strict=True):
                outcomes[i] = Outcome.of(value)
        return [o for o in outcomes if o is not None]

    @staticmethod
    def _scores(loaded: object, items: list[SampleInput]) -> list[float]:
        import torch
        from PIL import Image

        model, processor = loaded  # type: ignore[misc]
        batch = processor(
            text=[item.prompt for item in items],
            images=[Image.fromarray(item.image) for item in items],
            return_tensors="pt", padding=True, truncation=True,
        )
        with torch.no_grad():
            out = model(**batch)
        cosine = (out.image_embeds * out.text_embeds).sum(dim=-1)  # both unit-normalised by CLIPModel
        return [max(100.0 * float(c), 0.0) for c in cosine]
