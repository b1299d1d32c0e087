"""Prompt alignment: CLIP score, per sample.

Same definition as torchmetrics' CLIPScore, 100 * max(cos(image, text), 0), computed with
transformers directly: torchmetrics (1.9) calls `get_image_features` and expects a tensor, which
transformers 5 no longer returns. The model is a hub id or a local folder (save_pretrained); each
score's config names it and its files' content identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assess.metrics.base import Outcome, SampleInput, SampleMetric
from assess.metrics.clipmodels import Loaded, MetricModel, config_of, hub_reachable, load_clip
from render.compose.metric_registry import CLIP_SCORE, scored_metric_names

DEFAULT_CLIP_MODEL = "openai/clip-vit-large-patch14"
CLIP_MODEL_ENV = "HYPERGRID_CLIP_MODEL"
CLIP = MetricModel(CLIP_SCORE.name, DEFAULT_CLIP_MODEL, CLIP_MODEL_ENV, option="--clip-model <local folder>")
_BATCH = 32

__all__ = ["CLIP", "CLIPScoreMetric", "clip_model_name", "hub_reachable", "prompt_batches"]


def clip_model_name(configured: str | None = None) -> str:
    """--clip-model, else $HYPERGRID_CLIP_MODEL, else the torchmetrics default."""
    return CLIP.resolve({CLIP.metric: configured} if configured else None)


def prompt_batches(inputs: list[SampleInput]) -> tuple[list[Outcome | None], list[list[int]]]:
    """Outcomes for the inputs without prompt text (unavailable), and batches of the indices of the rest."""
    outcomes: list[Outcome | None] = [None] * len(inputs)
    todo = []
    for i, item in enumerate(inputs):
        if not item.prompt:
            outcomes[i] = Outcome.unavailable("samples.jsonl has no prompt text for this sample")
        else:
            todo.append(i)
    return outcomes, [todo[start : start + _BATCH] for start in range(0, len(todo), _BATCH)]


def embeddings(loaded: Loaded, items: list[SampleInput]) -> tuple[Any, Any, Any]:
    """(image embeddings, text embeddings, logit scale) of a batch: CLIPModel's unit-normalised projections."""
    import torch
    from PIL import Image

    model, processor = loaded
    batch = processor(text=[item.prompt for item in items], images=[Image.fromarray(item.image) for item in items],
                      return_tensors="pt", padding=True, truncation=True)
    with torch.no_grad():
        out = model(**batch)
    return out.image_embeds, out.text_embeds, model.logit_scale.detach().exp()


class CLIPScoreMetric(SampleMetric):
    spec = CLIP_SCORE
    metric_model = CLIP

    def __init__(self, model: str | None = None) -> None:
        self.model_name = clip_model_name(model)

    @classmethod
    def from_options(cls, models: Mapping[str, str] | None = None) -> CLIPScoreMetric:
        return cls((models or {}).get(CLIP.metric))

    @property
    def config(self) -> str:
        return config_of(self.model_name)

    def _load(self) -> Loaded | str:
        others = ",".join(n for n in scored_metric_names() if n != CLIP_SCORE.name)
        return load_clip(self.model_name, "CLIP model", f"{CLIP.fix}, or leave {CLIP_SCORE.name} out: --metrics {others}")

    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        loaded = self._load()
        if isinstance(loaded, str):
            return [Outcome.unavailable(loaded) for _ in inputs]
        outcomes, batches = prompt_batches(inputs)
        for chunk in batches:
            image, text, _ = embeddings(loaded, [inputs[i] for i in chunk])
            cosine = (image * text).sum(dim=-1)
            for i, c in zip(chunk, cosine, strict=True):
                outcomes[i] = Outcome.of(max(100.0 * float(c), 0.0))
        return [o for o in outcomes if o is not None]
