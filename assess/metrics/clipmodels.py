"""The CLIP-architecture models the metrics use (CLIP score, PickScore, CMMD): which one a metric uses,
how it is loaded (a local folder or a hub id, never a stall on an unreachable hub), and its identity.

A model that cannot be had is a reason with its fix, never a number (STYLE.md, rule 7).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assess.metrics.base import SetupProblem
from render.run.online import hub_reachable  # noqa: F401  (the one probe: proxy-aware, DNS timeout; re-exported)

# A loaded (model, processor) pair: transformers objects, used through their untyped call APIs.
Loaded = tuple[Any, Any]
_LOADED: dict[tuple[str, str], Loaded | str] = {}


@dataclass(frozen=True)
class MetricModel:
    """Which model a metric uses: `--metric-model <metric>=<id or folder>`, else its variable, else the default."""

    metric: str
    default: str  # the hub id the field's published numbers use
    env: str  # the environment variable that sets it
    option: str = ""  # the CLI option that sets it (default: --metric-model <metric>=...)
    files: tuple[str, ...] = ("config.json",)  # what a local folder of the model holds
    model_type: str | None = "clip"  # its config.json's model_type (None: not a transformers folder)

    def resolve(self, models: Mapping[str, str] | None = None) -> str:
        return (models or {}).get(self.metric) or os.environ.get(self.env) or self.default

    def given_as(self, name: str, models: Mapping[str, str] | None = None) -> str:
        """How the user named `name`: the option or the variable, as they would type it."""
        if (models or {}).get(self.metric) == name:
            return f"{self.option.split()[0]} {name}" if self.option else f"--metric-model {self.metric}={name}"
        return f"{self.env}={name}"

    def check_folder(self, name: str, given: str) -> None:
        """A local folder named for the model exists, can be read and holds this architecture (Refused: what is
        wrong and with which option); a hub id is left to the loader. Every metric with a model is checked here."""
        from assess.errors import Refused

        if not is_local(name):
            return
        folder = Path(name).expanduser()
        kind = f"a {self.model_type!r} model" if self.model_type else f"a model for {self.metric}"
        fix = f"give the folder of {kind} ({', '.join(self.files)}) or a hub id"
        if not folder.is_dir():
            raise Refused(f"{given}: no folder {folder}; {fix}")
        if not os.access(folder, os.R_OK | os.X_OK):
            raise Refused(f"{given}: the folder {folder} cannot be read by this user; {fix}")
        missing = [f for f in self.files if not (folder / f).is_file()]
        if missing:
            raise Refused(f"{given}: the folder {folder} holds no {', '.join(missing)}, so it is not {kind}; {fix}")
        if self.model_type is not None:
            found = _model_type(folder / "config.json")
            if found != self.model_type:
                raise Refused(f"{given}: the folder {folder} holds a {found!r} model, not {kind}; {fix}")

    @property
    def fix(self) -> str:
        option = self.option or f"--metric-model {self.metric}=<local folder>"
        return f"pass {option} or set {self.env}"


def _model_type(config: Path) -> str | None:
    import json

    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def not_at_hand(reason: str) -> SetupProblem:
    """A metric's model that this machine does not have and cannot download now: the fix every such metric shares."""
    return SetupProblem(reason, "model not in the local cache, hub unreachable", "--metric-model METRIC=<local folder>")


def is_local(name: str) -> bool:
    """A folder the user named, not a hub id."""
    return name.startswith(("/", ".", "~")) or Path(name).expanduser().is_dir()


def config_of(name: str, processor: str | None = None) -> str:
    """A score's `config`: the model by its identity (assess.metrics.model_identity), and the processor's
    when it comes from elsewhere (PickScore's)."""
    from assess.metrics.model_identity import model_config

    return model_config(name) + (f" processor={model_config(processor).removeprefix('model=')}" if processor else "")


def how_to_load(name: str, what: str, fix: str, probe: str = "config.json") -> bool | str:
    """Whether from_pretrained must read the local cache alone (True) or may use the hub (False), or why
    the model cannot be had now. A local folder and HF_HUB_OFFLINE load as from_pretrained does; for a hub
    id the hub is probed once: unreachable, a cached snapshot is read without the network, and a model
    that is not cached is answered here, at once, instead of by from_pretrained's retries."""
    from huggingface_hub import constants, try_to_load_from_cache

    offline = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE") or constants.HF_HUB_OFFLINE
    if is_local(name) or offline or hub_reachable():
        return False
    try:
        if isinstance(try_to_load_from_cache(name, probe), str):  # `probe`: a file every snapshot of the model has
            return True
    except ValueError:  # not a valid hub id: from_pretrained says so
        return False
    return not_at_hand(f"{what} {name!r} is not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) and the hub "
            f"({constants.ENDPOINT}) cannot be reached. Fix: download it once where the hub is reachable "
            f"(`hf download {name}`, then copy {constants.HF_HUB_CACHE}), or {fix}")


def load_clip(name: str, what: str, fix: str, processor: str | None = None) -> Loaded | str:
    """(CLIPModel, CLIPProcessor), or the reason they cannot be had (cached per process). `processor`: where
    the processor is, when the model's folder has none (PickScore's is LAION's CLIP-H processor)."""
    key = (name, processor or name)
    if key not in _LOADED:
        how = how_to_load(name, what, fix)
        if isinstance(how, str):
            _LOADED[key] = how
        else:
            other = how_to_load(processor, f"{what} processor", fix) if processor and processor != name else how
            _LOADED[key] = other if isinstance(other, str) else _from_pretrained(name, processor or name, what, fix,
                                                                                  how, other)
    return _LOADED[key]


def _from_pretrained(name: str, processor_name: str, what: str, fix: str, local_model: bool,
                     local_processor: bool) -> Loaded | str:
    try:
        import transformers
        from transformers import CLIPModel, CLIPProcessor

        transformers.logging.set_verbosity_error()
        model = CLIPModel.from_pretrained(name, local_files_only=local_model).eval()
        processor = CLIPProcessor.from_pretrained(processor_name, local_files_only=local_processor)
        return (model, processor)
    except Exception as exc:  # not a CLIP checkpoint, a broken cache, a download that failed
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        reason = f"{what} {name!r} could not be loaded ({type(exc).__name__}: {first_line}); {fix}"
        # OSError: the hub's "couldn't connect", "not in the cached files"; a folder of the user's is their error
        return not_at_hand(reason) if isinstance(exc, OSError) and not is_local(name) else reason


def has_processor(name: str) -> bool:
    """A local folder that holds its own processor (a model saved with save_pretrained, processor included)."""
    folder = Path(name).expanduser()
    return (folder / "preprocessor_config.json").is_file() or (folder / "processor_config.json").is_file()
