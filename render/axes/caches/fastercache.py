"""FasterCache (diffusers `FasterCacheConfig`): extrapolate attention outputs from the last two steps;
approximate the unconditional (CFG) branch from the conditional one."""

from dataclasses import dataclass, field
from typing import Any, ClassVar, List, Optional

from render.axes.caches._base import ApplyContext, CacheMethod, CacheConfigError, CacheSchema, Record, at_least, found, one_of, pair, window

DENOISER_HOOK = "faster_cache_denoiser"  # diffusers.hooks.faster_cache._FASTER_CACHE_DENOISER_HOOK
BLOCK_HOOK = "faster_cache_block"  # diffusers.hooks.faster_cache._FASTER_CACHE_BLOCK_HOOK
TENSOR_FORMATS = ("BCHW", "BCFHW", "BFCHW")
_WINDOWS = (
    "spatial_attention_timestep_skip_range",
    "temporal_attention_timestep_skip_range",
    "low_frequency_weight_update_timestep_range",
    "high_frequency_weight_update_timestep_range",
    "unconditional_batch_timestep_skip_range",
)


@dataclass
class FasterCacheConf(CacheSchema):
    """FasterCache: extrapolate attention outputs from the last two steps; approximate the CFG branch."""

    HOOKS: ClassVar[tuple] = (DENOISER_HOOK, BLOCK_HOOK)
    name: str = "fastercache"
    # Compute spatial attention every N steps inside its window; in between, extrapolate from the last two.
    spatial_attention_block_skip_range: int = 2
    # The same for temporal attention (None: off).
    temporal_attention_block_skip_range: Optional[int] = None
    # Skip spatial attention only while lo < timestep < hi.
    spatial_attention_timestep_skip_range: List[int] = field(default_factory=lambda: [-1, 681])
    # The same window for temporal attention.
    temporal_attention_timestep_skip_range: List[int] = field(default_factory=lambda: [-1, 681])
    # Window in which the low-frequency part of the approximated unconditional branch is scaled.
    low_frequency_weight_update_timestep_range: List[int] = field(default_factory=lambda: [99, 901])
    # Window in which the high-frequency part is scaled.
    high_frequency_weight_update_timestep_range: List[int] = field(default_factory=lambda: [-1, 301])
    # Scale of the low-frequency update inside its window (1.0 outside).
    alpha_low_frequency: float = 1.1
    # Scale of the high-frequency update inside its window (1.0 outside).
    alpha_high_frequency: float = 1.1
    # Compute the unconditional branch every N steps; approximate it in between.
    unconditional_batch_skip_range: int = 5
    # Approximate the unconditional branch only while lo < timestep < hi.
    unconditional_batch_timestep_skip_range: List[int] = field(default_factory=lambda: [-1, 641])
    # Extrapolation weight w: skipped output = last + (last - second last) * w (diffusers' default callback).
    attention_weight: float = 0.5
    # Layout of the denoiser output for the frequency split: BCHW (images) | BCFHW | BFCHW (video).
    # Used only without guidance distillation; the tiny model and FLUX.1 never reach it.
    tensor_format: str = "BCHW"
    # The model has no batched unconditional branch to approximate. None: decide from the pipeline
    # (true for Flux pipelines, which run the transformer once per guidance branch).
    is_guidance_distilled: Optional[bool] = None

    def problems(self) -> List[str]:
        return found(
            at_least(self, "spatial_attention_block_skip_range", 1),
            at_least(self, "temporal_attention_block_skip_range", 1),
            at_least(self, "unconditional_batch_skip_range", 1),
            *(window(self, name) for name in _WINDOWS),
            one_of(self, "tensor_format", TENSOR_FORMATS),
        )


def runs_branches_separately(pipe: Any) -> bool:
    """Whether the pipeline has no batched unconditional branch (FasterCache's is_guidance_distilled)."""
    declared = getattr(pipe, "runs_guidance_branches_separately", None)  # a pipeline may say so itself
    if declared is not None:
        return bool(declared)
    embeds_guidance = bool(getattr(pipe.transformer.config, "guidance_embeds", False))
    return embeds_guidance or type(pipe).__name__.startswith("Flux")


def apply(pipe: Any, conf: FasterCacheConf, ctx: ApplyContext) -> Record:
    from diffusers.hooks import FasterCacheConfig

    distilled = runs_branches_separately(pipe)
    if conf.is_guidance_distilled is False and distilled:
        raise CacheConfigError(
            f"cache fastercache: is_guidance_distilled=false cannot work with {type(pipe).__name__}: it runs "
            "its transformer once per guidance branch, so there is no batched unconditional branch to "
            "approximate; leave cache.is_guidance_distilled=null (auto) or set it to true"
        )
    if conf.is_guidance_distilled is not None:
        distilled = conf.is_guidance_distilled
    weight = conf.attention_weight
    config = FasterCacheConfig(
        spatial_attention_block_skip_range=conf.spatial_attention_block_skip_range,
        temporal_attention_block_skip_range=conf.temporal_attention_block_skip_range,
        spatial_attention_timestep_skip_range=pair(conf.spatial_attention_timestep_skip_range),
        temporal_attention_timestep_skip_range=pair(conf.temporal_attention_timestep_skip_range),
        low_frequency_weight_update_timestep_range=pair(conf.low_frequency_weight_update_timestep_range),
        high_frequency_weight_update_timestep_range=pair(conf.high_frequency_weight_update_timestep_range),
        alpha_low_frequency=conf.alpha_low_frequency,
        alpha_high_frequency=conf.alpha_high_frequency,
        unconditional_batch_skip_range=conf.unconditional_batch_skip_range,
        unconditional_batch_timestep_skip_range=pair(conf.unconditional_batch_timestep_skip_range),
        attention_weight_callback=lambda _module: weight,
        tensor_format=conf.tensor_format,
        is_guidance_distilled=distilled,
        current_timestep_callback=lambda: pipe.current_timestep,
    )
    pipe.transformer.enable_cache(config)
    return {"is_guidance_distilled": distilled}


METHOD = CacheMethod(FasterCacheConf, apply)
