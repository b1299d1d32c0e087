"""Human preference: PickScore (Kirstain et al. 2023), per sample.

PickScore is a CLIP-H model fine-tuned on Pick-a-Pic's human choices; its score is the model's logit,
logit_scale * cos(image, prompt) (about 18-23 for real images; higher is preferred), computed as the
reference implementation does with transformers' CLIPModel. Its hub checkpoint has no processor of
its own: the processor is LAION's CLIP-ViT-H-14, unless the model folder holds one.
"""

from __future__ import annotations

from collections.abc import Mapping

from assess.metrics.alignment import embeddings, prompt_batches
from assess.metrics.base import Outcome, SampleInput, SampleMetric
from assess.metrics.clipmodels import MetricModel, config_of, has_processor, load_clip
from render.compose.metric_registry import PICKSCORE

PICKSCORE_MODEL = MetricModel(PICKSCORE.name, "yuvalkirstain/PickScore_v1", "HYPERGRID_PICKSCORE_MODEL")
PICKSCORE_PROCESSOR = "laion/CLIP-ViT-H-14-laion2B-s32B-b79K"


class PickScoreMetric(SampleMetric):
    spec = PICKSCORE
    metric_model = PICKSCORE_MODEL

    def __init__(self, model: str | None = None) -> None:
        self.model_name = model or PICKSCORE_MODEL.resolve()
        self.processor = None if has_processor(self.model_name) else PICKSCORE_PROCESSOR

    @classmethod
    def from_options(cls, models: Mapping[str, str] | None = None) -> PickScoreMetric:
        return cls(PICKSCORE_MODEL.resolve(models))

    @property
    def config(self) -> str:
        return config_of(self.model_name, self.processor)

    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        loaded = load_clip(self.model_name, "PickScore model", PICKSCORE_MODEL.fix, self.processor)
        if isinstance(loaded, str):
            return [Outcome.unavailable(loaded) for _ in inputs]
        outcomes, batches = prompt_batches(inputs)
        for chunk in batches:
            image, text, scale = embeddings(loaded, [inputs[i] for i in chunk])
            logits = scale * (image * text).sum(dim=-1)
            for i, value in zip(chunk, logits, strict=True):
                outcomes[i] = Outcome.of(float(value))
        return [o for o in outcomes if o is not None]
