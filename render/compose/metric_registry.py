"""The metric registry: every metric is declared here once, and everything lists metrics from here.

A declaration says what a metric is (name, version, direction, whether it compares with the
anchor's sample), how it is computed (`compute`: "module:Class" of a sample metric, imported only
when it is scored; speed metrics are computed per cell by assess.metrics.speed), whether it can be
the quality axis of a report or of a climb, and how the report shows it (label, display, column).

The index (the `metrics` table, the cell_summary columns, the `cells` and `leaderboard` views),
`assess score --metrics`, `assess report --quality-metric`, the report's leaderboard columns and
the experiment schema's `quality.metric` all read this module. A new metric is one `MetricSpec`
below plus its compute class. This module imports nothing heavy: the CLI's help text reads it.

It lives in render, beside the laws, because the renderer refuses an experiment's `quality.metric` before the
first launch freezes it into the rule (render/laws/rule.py check_search), with the words assess uses: render
never imports assess. The compute classes stay in assess/metrics/.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from render.compose.registry import Registry

Direction = Literal["higher", "lower"]
Level = Literal["sample", "cell"]
Display = Literal["number", "bytes"]


@dataclass(frozen=True)
class MetricSpec:
    name: str
    version: int  # bump when the numbers change: re-scoring replaces the old version's scores
    family: str  # the module under assess/metrics/ that computes it
    level: Level  # "sample": one value per (cell, prompt, seed); "cell": one per (cell, split)
    direction: Direction  # which way is better
    needs_reference: bool  # compares against the anchor's sample with the same prompt and seed
    unit: str
    description: str
    label: str = ""  # the report's column title (default: the name)
    compute: str | None = None  # "module:Class" of a sample metric (SampleMetric) or of a set metric (SetMetric: a
    # cell-level metric of the cell's images against the anchor's over the split); None: computed per cell (speed)
    quality_rank: int | None = None  # preference as the report's default quality axis (1 first); None: not quality
    identity: float | None = None  # a reference metric's value for the anchor against itself (what parity is around)
    leaderboard: bool = False  # a column of the report's leaderboard
    display: Display = "number"
    clips_only: bool = False  # scored on clip samples only (an image has no consecutive frames)
    default_band: float | None = None  # a report's parity band when nothing better is known (docs/quality.md)
    pipelines: tuple[str, ...] = ()  # the only model pipelines it applies to (model.pipeline); empty: every model.
    # A cell of another model is not scored by it at all: no value, and no "unavailable" either (applies_to)
    text_prompts_only: bool = False  # scored on samples whose prompt quotes text only (assess.metrics.ocr.quoted_text);
    # another prompt is not a text prompt: no value, no "unavailable"

    @property
    def title(self) -> str:
        return self.label or self.name

    def applies_to(self, cell: Mapping[str, Any]) -> bool:
        """Whether it scores this cell's samples (a resolved cell, as run.json records it): a metric made for one
        model (the shapes checker) does not apply to another, and is neither computed nor reported unavailable."""
        if not self.pipelines:
            return True
        model = cell.get("model")
        return isinstance(model, Mapping) and model.get("pipeline") in self.pipelines

    @property
    def is_set(self) -> bool:
        """A set-level metric: one value per (cell, split) from all its images paired with the anchor's."""
        return self.level == "cell" and self.compute is not None

    @property
    def is_quality(self) -> bool:
        """Can be the quality axis of a report's Pareto plot."""
        return self.quality_rank is not None

    @property
    def climbable(self) -> bool:
        """Can be a climb's quality metric: parity is a band around the anchor's own value, so a reference
        metric needs a fixed value for the anchor against itself (PSNR of identical images has none)."""
        return self.is_quality and (not self.needs_reference or self.identity is not None)


def _sample(name: str, family: str, direction: Direction, needs_reference: bool, compute: str, label: str,
            quality_rank: int, description: str, unit: str = "", identity: float | None = None,
            default_band: float | None = None, pipelines: tuple[str, ...] = (),
            text_prompts_only: bool = False) -> MetricSpec:
    return MetricSpec(name=name, version=1, family=family, level="sample", direction=direction,
                      needs_reference=needs_reference, unit=unit, description=description, label=label,
                      compute=f"assess.metrics.{family}:{compute}", quality_rank=quality_rank, identity=identity,
                      leaderboard=True, default_band=default_band, pipelines=pipelines,
                      text_prompts_only=text_prompts_only)


def _speed(name: str, direction: Direction, unit: str, label: str, description: str, leaderboard: bool = False,
           display: Display = "number") -> MetricSpec:
    return MetricSpec(name=name, version=1, family="speed", level="cell", direction=direction, needs_reference=False,
                      unit=unit, description=description, label=label, leaderboard=leaderboard, display=display)


PSNR = _sample("psnr", "fidelity", "higher", True, "PSNRMetric", "PSNR (dB)", 2, unit="dB",
               description="PSNR vs the anchor's sample (8-bit RGB); identical images: the size's ceiling + 3.01 dB")
SSIM = _sample("ssim", "fidelity", "higher", True, "SSIMMetric", "SSIM", 1, identity=1.0, default_band=0.05, 
               description="SSIM vs the anchor's sample (torchmetrics, Gaussian 11x11 window, RGB in [0, 1])")
LPIPS = _sample("lpips", "fidelity", "lower", True, "LPIPSMetric", "LPIPS", 3, identity=0.0, default_band=0.05, 
                description="LPIPS (AlexNet) vs the anchor's sample; unavailable when its weights are not at hand")
CLIP_SCORE = _sample("clip_score", "alignment", "higher", False, "CLIPScoreMetric", "CLIP score", 4, default_band=0.5, 
                     description="CLIP score, 100 * max(cos(image, prompt), 0); the CLIP model is in scores.config")
PICKSCORE = _sample("pickscore", "preference", "higher", False, "PickScoreMetric", "PickScore", 7, default_band=0.2, 
                    description="PickScore (CLIP-H tuned on human choices): logit_scale * cos(image, prompt); its "
                                "model and the model's content identity are in scores.config")
IMAGEREWARD = _sample("imagereward", "imagereward", "higher", False, "ImageRewardMetric", "ImageReward", 8, default_band=0.1, 
                      description="ImageReward (BLIP + MLP tuned on human rankings): 0 = an average image; its model "
                                  "and the model's content identity are in scores.config")
SHAPES_PIPELINE = "render.models.shapes.ShapesPipeline"  # the shapes checker reads only the shapes model's images
SHAPES = _sample("shapes", "shapes", "higher", False, "ShapesMetric", "shapes correct", 5, default_band=0.05,
                 pipelines=(SHAPES_PIPELINE,),
                 description="the shapes model's captions only: 1 when the caption's colour, shape and position are "
                             "all in the image, else 0; per-attribute verdicts in the detail")
SHAPES_FIT = _sample("shapes_fit", "shapes", "higher", False, "ShapesFitMetric", "shapes fit", 6, default_band=0.01,
                     pipelines=(SHAPES_PIPELINE,),
                     description="the shapes model's captions only: soft IoU of the image's shape with the asked shape fitted to "
                                 "its bounding box (0-1)")
OCR = _sample("ocr", "ocr", "higher", True, "OCRMetric", "OCR vs anchor", 9, identity=1.0, default_band=0.1,
              text_prompts_only=True,
              description="text prompts only: the text PP-OCRv4 (rapidocr-onnxruntime, the `ocr` extra) reads in the "
                          "image vs what it reads in the anchor's, 1 - normalised edit distance (letters and digits, "
                          "case folded); the reads in the detail")
OCR_PROMPT = _sample("ocr_prompt", "ocr", "higher", False, "OCRPromptMetric", "OCR vs prompt", 10, default_band=0.1,
                     text_prompts_only=True,
                     description="text prompts only: the text PP-OCRv4 reads in the image vs the text the prompt "
                                 "quotes, 1 - normalised edit distance (letters and digits, case folded)")
TEMPORAL_SSIM = MetricSpec(
    name="temporal_ssim", version=1, family="fidelity", level="sample", direction="higher", needs_reference=False,
    unit="", label="temporal SSIM", compute="assess.metrics.fidelity:TemporalSSIMMetric", clips_only=True,
    description="clips only: mean SSIM between consecutive frames (frame i vs i-1) of the clip; the leaderboard's "
                "temporal_ssim_delta is the cell's minus its anchor's (below 0: more flicker than the anchor)")

CMMD = MetricSpec(name="cmmd", version=1, family="distribution", level="cell", direction="lower", needs_reference=True,
                  unit="", label="CMMD", compute="assess.metrics.distribution:CMMDMetric", leaderboard=True,
                  description="CMMD (Jayasumana et al. 2024): MMD of CLIP image embeddings, the cell's images vs the "
                              "anchor's over the split (same prompts and seeds); n = the pairs (cell_scores.n)")

LATENCY_MEDIAN = _speed("latency_median_s", "lower", "s", "median latency (s)", "median warm latency of one image",
                        leaderboard=True)
LATENCY_P90 = _speed("latency_p90_s", "lower", "s", "p90 latency (s)",
                     "90th percentile of warm latency (linear interpolation)")
S_PER_STEP = _speed("s_per_step", "lower", "s", "s/step", "median warm seconds per denoising step")
IMAGES_PER_S = _speed("images_per_s", "higher", "1/s", "images/s",
                      "warm images per second: warm samples / their summed latency", leaderboard=True)
PEAK_MEM = _speed("peak_mem_bytes", "lower", "B", "peak memory",
                  "largest peak memory of a sample (detail: the mem_kind)", leaderboard=True, display="bytes")
LOAD_S = _speed("load_s", "lower", "s", "load (s)", "longest model load among the processes that rendered the cell")
GPU_S = _speed("gpu_s", "lower", "s", "GPU-s spent",
               "device seconds spent: rendered samples' latency + load; reused samples cost 0", leaderboard=True)

SAMPLE_SPECS = (PSNR, SSIM, LPIPS, CLIP_SCORE, SHAPES, SHAPES_FIT, PICKSCORE, IMAGEREWARD, OCR, OCR_PROMPT, TEMPORAL_SSIM)
SET_SPECS = (CMMD,)
LATENCY_REF = _speed("latency_ref_x", "lower", "x ref", "latency (x ref)",
                     "median warm latency in units of the reference workload timed in the same job (render/run/measure.py): "
                     "comparable across jobs, nodes and hours")
SPEED_NOISE = _speed("speed_noise", "lower", "", "speed noise",
                     "the larger of the warm calls' spread (IQR / median) and the reference's drift over the cell's "
                     "runs; above 0.15 the cell is flagged noisy (detail: why)", leaderboard=True)
SPEED_SPECS = (LATENCY_MEDIAN, LATENCY_P90, S_PER_STEP, IMAGES_PER_S, PEAK_MEM, LOAD_S, GPU_S, LATENCY_REF, SPEED_NOISE)
# Every metric by name (render.compose.registry: a name declared twice is refused; an unknown one lists the valid ones)
SPECS: Registry[MetricSpec] = Registry("metric", "metric", lambda s: s.name)
for _spec in (*SAMPLE_SPECS, *SET_SPECS, *SPEED_SPECS):
    SPECS.add(_spec, where=__name__)


def sample_metric_names() -> list[str]:
    """The sample metrics: one value per (cell, prompt, seed)."""
    return [s.name for s in SAMPLE_SPECS]


def scored_metric_names() -> list[str]:
    """What `assess score --metrics` accepts (and scores by default): sample metrics, then set metrics."""
    return [s.name for s in (*SAMPLE_SPECS, *SET_SPECS)]


def quality_metric_names() -> list[str]:
    """What `assess report --quality-metric` accepts, in the order the report picks a default."""
    return [s.name for s in sorted((s for s in SPECS.values() if s.is_quality), key=lambda s: s.quality_rank or 0)]


def climb_metric_names() -> list[str]:
    """What an experiment's `quality.metric` accepts."""
    return [name for name in quality_metric_names() if SPECS[name].climbable]


def leaderboard_specs() -> list[MetricSpec]:
    """The leaderboard's metric columns, in order (sample metrics, then speed)."""
    return [s for s in SPECS.values() if s.leaderboard]


def delta_metric_names() -> list[str]:
    """Sample metrics without a reference: the index's leaderboard view shows their difference to the anchor."""
    return [s.name for s in SAMPLE_SPECS if not s.needs_reference]
