"""Fidelity to the anchor: PSNR (numpy), SSIM (torchmetrics) and LPIPS (torchmetrics), per sample (per frame of a
clip: assess.metrics.frames); and a clip's temporal consistency, SSIM between its consecutive frames.

PSNR of identical images is infinite. An index value must be finite (JSON, statistics), so an
identical pair is recorded as 10*log10(2 * 255**2 * N) dB with detail "identical", N being the
number of 8-bit values in the image: 3.01 dB above the largest PSNR two *different* 8-bit
images of that size can have (one level off in one value), so the order of cells is kept.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from typing import TYPE_CHECKING

from assess.metrics.base import Outcome, SampleInput, SampleMetric, SetupProblem
from render.compose.metric_registry import LPIPS, PSNR, SSIM, TEMPORAL_SSIM

if TYPE_CHECKING:
    import numpy as np
    import torch

SSIM_WINDOW = 11
_BATCH = 64



def psnr_identical(n_values: int) -> float:
    """The finite value recorded for identical 8-bit images with n_values values."""
    return 10.0 * math.log10(2.0 * 255.0**2 * n_values)


def _group_by_shape(inputs: list[SampleInput]) -> dict[tuple[int, ...], list[int]]:
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for i, item in enumerate(inputs):
        groups[item.image.shape].append(i)
    return groups


def _references(inputs: list[SampleInput], chunk: list[int]) -> list[np.ndarray]:
    """The anchor images of a chunk of inputs: SampleMetric hands compute() only inputs that have one."""
    found = []
    for i in chunk:
        reference = inputs[i].reference
        if reference is None:
            raise ValueError(f"input {i} has no reference image; compute() is given only inputs that have one")
        found.append(reference)
    return found


def _stack(images: list, dtype: torch.dtype) -> torch.Tensor:
    import numpy as np
    import torch

    return torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).to(dtype)


class PSNRMetric(SampleMetric):
    """PSNR in numpy, float64 on 8-bit values (equal to torchmetrics' peak_signal_noise_ratio with
    data_range=255, which tests check); numpy keeps a PSNR-only scorer free of the torch import."""

    spec = PSNR

    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        import numpy as np

        outcomes: list[Outcome | None] = [None] * len(inputs)
        for shape, indices in _group_by_shape(inputs).items():
            for start in range(0, len(indices), _BATCH):
                chunk = indices[start : start + _BATCH]
                preds = np.stack([inputs[i].image for i in chunk]).astype(np.float64)
                target = np.stack(_references(inputs, chunk)).astype(np.float64)
                mse = ((preds - target) ** 2).reshape(len(chunk), -1).mean(axis=1)
                for j, i in enumerate(chunk):
                    if mse[j] == 0.0:
                        outcomes[i] = Outcome.of(psnr_identical(math.prod(shape)), detail="identical")
                    else:
                        outcomes[i] = Outcome.of(10.0 * math.log10(255.0**2 / float(mse[j])))
        return [o for o in outcomes if o is not None]


class SSIMMetric(SampleMetric):
    spec = SSIM

    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        import torch
        from torchmetrics.functional.image import structural_similarity_index_measure

        outcomes: list[Outcome | None] = [None] * len(inputs)
        for shape, indices in _group_by_shape(inputs).items():
            if min(shape[0], shape[1]) < SSIM_WINDOW:
                for i in indices:
                    outcomes[i] = Outcome.unavailable(
                        f"image is {shape[1]}x{shape[0]}, smaller than SSIM's {SSIM_WINDOW}x{SSIM_WINDOW} window"
                    )
                continue
            for start in range(0, len(indices), _BATCH):
                chunk = indices[start : start + _BATCH]
                preds = _stack([inputs[i].image for i in chunk], torch.float32) / 255.0
                target = _stack(_references(inputs, chunk), torch.float32) / 255.0
                values = structural_similarity_index_measure(preds, target, data_range=1.0, reduction="none")
                for j, i in enumerate(chunk):
                    outcomes[i] = Outcome.of(min(float(values[j]), 1.0))
        return [o for o in outcomes if o is not None]


_LPIPS_MODEL: dict[str, object] = {}


def torchvision_install_line(torch_version: str) -> str:
    """The pip line that adds the torchvision built for this torch (torch 2.N.p pairs with torchvision
    0.(N+15).p) from the index of its build (+cpu, +cu128, ...), without touching torch (--no-deps)."""
    release, _, build = torch_version.partition("+")
    major, minor, patch = (release.split(".") + ["0", "0"])[:3]
    line = f"pip install --no-deps torchvision=={int(major) - 2}.{int(minor) + 15}.{patch}"
    return f"{line} --index-url https://download.pytorch.org/whl/{build}" if build else line


def _lpips_problem(exc: Exception) -> str:
    import importlib.util

    import torch

    if importlib.util.find_spec("torchvision") is None:
        line = torchvision_install_line(torch.__version__)
        return SetupProblem(f"LPIPS needs torchvision, which is not installed. Add the build that matches your torch "
                            f"{torch.__version__} and keeps it: `{line}` (a plain `pip install torchvision`, or the "
                            "`quality` extra, may replace your torch with another build)", "torchvision not installed",
                            f"`{line}`")
    return f"LPIPS network not at hand offline ({type(exc).__name__}: {exc})"


def _load_lpips() -> object:
    """The LPIPS network, or the reason it cannot be had (cached per process)."""
    if "model" not in _LPIPS_MODEL:
        try:
            from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity

            _LPIPS_MODEL["model"] = LearnedPerceptualImagePatchSimilarity(net_type="alex", normalize=True).eval()
        except Exception as exc:  # import, missing torchvision, weights not downloadable offline
            _LPIPS_MODEL["model"] = _lpips_problem(exc)
    return _LPIPS_MODEL["model"]


class LPIPSMetric(SampleMetric):
    spec = LPIPS

    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        import torch

        model = _load_lpips()
        if isinstance(model, str):
            return [Outcome.unavailable(model) for _ in inputs]
        outcomes = []
        with torch.no_grad():
            for item in inputs:
                preds = _stack([item.image], torch.float32) / 255.0
                target = _stack([item.reference], torch.float32) / 255.0
                model.reset()  # type: ignore[attr-defined]
                outcomes.append(Outcome.of(float(model(preds, target))))  # type: ignore[operator]
        return outcomes


class TemporalSSIMMetric(SSIMMetric):
    """SSIM of each clip frame against the frame before it (assess.metrics.frames averages them over the clip)."""

    spec = TEMPORAL_SSIM
    first_frame = 1

    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        missing = [i for i, item in enumerate(inputs) if item.previous is None]
        if missing:
            raise ValueError(f"input {missing[0]} is no clip frame after the first; temporal_ssim scores those only")
        return super().compute([dataclasses.replace(item, reference=item.previous) for item in inputs])
