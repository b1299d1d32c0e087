"""Set-level fidelity: CMMD (Jayasumana et al. 2024, "Rethinking FID"), a cell's images against the anchor's.

CMMD is the squared maximum mean discrepancy between two sets of CLIP image embeddings (unit-normalised)
with a Gaussian kernel of bandwidth 10, times 1000, as the reference implementation computes it
(google-research/cmmd, the biased estimator). Unlike FID it assumes no normal distribution of the
embeddings; like FID its value depends on the sample size, so every value carries its n. The default
embedding model is the paper's CLIP ViT-L/14 at 336 px.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from assess.metrics.base import Outcome, SetMetric
from assess.metrics.clipmodels import Loaded, MetricModel, config_of, load_clip
from render.compose.metric_registry import CMMD

if TYPE_CHECKING:
    import numpy as np

CMMD_MODEL = MetricModel(CMMD.name, "openai/clip-vit-large-patch14-336", "HYPERGRID_CMMD_MODEL")
SIGMA = 10.0
SCALE = 1000.0
_BATCH = 32


def mmd(x: np.ndarray, y: np.ndarray, sigma: float = SIGMA, scale: float = SCALE) -> float:
    """scale * MMD^2 with the kernel exp(-||a - b||^2 / (2 sigma^2)) (biased estimator, diagonals included)."""
    import numpy as np

    gamma = 1.0 / (2.0 * sigma**2)

    def kernel_mean(a: np.ndarray, b: np.ndarray) -> float:
        sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
        return float(np.exp(-gamma * sq).mean())

    x, y = x.astype(np.float64), y.astype(np.float64)
    return scale * (kernel_mean(x, x) + kernel_mean(y, y) - 2.0 * kernel_mean(x, y))


class CMMDMetric(SetMetric):
    spec = CMMD
    metric_model = CMMD_MODEL

    def __init__(self, model: str | None = None) -> None:
        self.model_name = model or CMMD_MODEL.resolve()

    @classmethod
    def from_options(cls, models: Mapping[str, str] | None = None) -> CMMDMetric:
        return cls(CMMD_MODEL.resolve(models))

    @property
    def config(self) -> str:
        return config_of(self.model_name)

    def embed(self, loaded: Loaded, images: list[np.ndarray]) -> np.ndarray:
        """Unit-normalised CLIP image embeddings (the vision tower's pooled output, projected)."""
        import numpy as np
        import torch
        from PIL import Image

        model, processor = loaded
        chunks = []
        for start in range(0, len(images), _BATCH):
            pixels = processor.image_processor(images=[Image.fromarray(i) for i in images[start : start + _BATCH]],
                                               return_tensors="pt")["pixel_values"]
            with torch.no_grad():
                pooled = model.vision_model(pixel_values=pixels).pooler_output
                embeds = model.visual_projection(pooled)
            chunks.append(torch.nn.functional.normalize(embeds, dim=-1).numpy())
        return np.concatenate(chunks)

    def compute(self, images: list[np.ndarray], references: list[np.ndarray]) -> Outcome:
        loaded = load_clip(self.model_name, "CMMD's CLIP model", CMMD_MODEL.fix)
        if isinstance(loaded, str):
            return Outcome.unavailable(loaded)
        value = mmd(self.embed(loaded, images), self.embed(loaded, references))
        return Outcome.of(max(value, 0.0), detail=f"n={len(images)}")
