"""The cache axis: one schema and one apply function per diffusers cache method, in one registry.

Each schema is a plain dataclass whose fields carry the names of the diffusers config it maps onto
(`diffusers.hooks.FirstBlockCacheConfig`, `PyramidAttentionBroadcastConfig`, `FasterCacheConfig`,
`TaylorSeerCacheConfig`, `MagCacheConfig`), in types Hydra can check: timestep ranges are
`List[int]` (tuples in diffusers), dtypes are names ("bfloat16"). Fields that are code in diffusers
(callbacks, module-name patterns) are not exposed: the apply function wires them.

A `conf` is either such a dataclass or the Hydra config node of the same shape. This module imports
no torch or diffusers at import time, so config composition stays fast.

The defaults are diffusers' own, except where a diffusers default would leave the embedded tiny
model (render/models/tiny.py, 8 steps) uncached; those fields say so in their comment.
"""

import contextlib
import dataclasses
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, List, Optional, Tuple, Union, get_args, get_origin

TAYLOR_FACTOR_DTYPES = ("float32", "float64", "float16", "bfloat16")
FASTERCACHE_TENSOR_FORMATS = ("BCHW", "BCFHW", "BFCHW")


class _CacheSchema:
    """Marker base of the cache schemas."""

    # The method hooks whole transformer blocks, so it needs diffusers' metadata for the model's
    # block classes (diffusers.hooks._helpers.TransformerBlockRegistry).
    needs_block_metadata: ClassVar[bool] = False


@dataclass
class FBCacheConf(_CacheSchema):
    """First Block Cache: run the first block, skip the rest while its output barely changed."""

    needs_block_metadata: ClassVar[bool] = True
    name: str = "fbcache"
    # Skip the remaining blocks while the first block's residual changed by less than this (relative
    # mean abs) since the last full step. diffusers' default 0.05 never skips on the tiny model, whose
    # residual changes by about 0.15-0.3 a step at 8 steps; FLUX.1 is usually run at 0.05-0.12.
    threshold: float = 0.3


@dataclass
class PABConf(_CacheSchema):
    """Pyramid Attention Broadcast: reuse attention outputs across neighbouring steps."""

    name: str = "pab"
    # Compute self-attention every N calls and reuse the result in between (None: never skip).
    spatial_attention_block_skip_range: Optional[int] = 2
    # The same for temporal attention (video transformers).
    temporal_attention_block_skip_range: Optional[int] = None
    # The same for cross-attention.
    cross_attention_block_skip_range: Optional[int] = None
    # Reuse spatial attention only while lo < timestep < hi (timesteps run from 1000 down to 0).
    spatial_attention_timestep_skip_range: List[int] = field(default_factory=lambda: [100, 800])
    # The same window for temporal attention.
    temporal_attention_timestep_skip_range: List[int] = field(default_factory=lambda: [100, 800])
    # The same window for cross-attention.
    cross_attention_timestep_skip_range: List[int] = field(default_factory=lambda: [100, 800])


@dataclass
class FasterCacheConf(_CacheSchema):
    """FasterCache: extrapolate attention outputs from the last two steps; approximate the CFG branch."""

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


@dataclass
class TaylorSeerConf(_CacheSchema):
    """TaylorSeer: predict attention outputs with a Taylor series over the last full steps."""

    name: str = "taylorseer"
    # After a full step, predict this many following steps before computing fully again.
    cache_interval: int = 5
    # Compute fully for the first N steps (they fit the Taylor factors); predict from then on.
    disable_cache_before_step: int = 3
    # Compute fully again from this step on (None: predict until the end).
    disable_cache_after_step: Optional[int] = None
    # Highest order of the Taylor expansion.
    max_order: int = 1
    # dtype the Taylor factors are stored and computed in: float32 | float64 | float16 | bfloat16.
    taylor_factors_dtype: str = "bfloat16"
    # Lite variant: cache only the output projection and skip whole blocks (least memory).
    use_lite_mode: bool = False


@dataclass
class MagCacheConf(_CacheSchema):
    """MagCache: skip steps while the accumulated residual-magnitude error stays small."""

    needs_block_metadata: ClassVar[bool] = True
    name: str = "magcache"
    # Skip a step while the accumulated |1 - magnitude ratio| error stays at or below this.
    threshold: float = 0.06
    # At most this many consecutive skipped steps.
    max_skip_steps: int = 3
    # Never skip the first fraction of the steps.
    retention_ratio: float = 0.2
    # Per-step magnitude ratios of the model (interpolated to the step count). None: calibrate them on
    # one render of the cell before its samples; the ratios used are recorded either way.
    mag_ratios: Optional[List[float]] = None


@dataclass(frozen=True)
class ApplyContext:
    """What a cache method may need beyond its config."""

    steps: Optional[int] = None  # the cell's num_inference_steps
    calibrate: Optional[Callable[[], None]] = None  # renders once with the cell's settings, output discarded


def _fields_of_every_method() -> List[Tuple[str, Any, Any]]:
    names: Dict[str, None] = {}
    for schema in (FBCacheConf, PABConf, FasterCacheConf, TaylorSeerConf, MagCacheConf):
        names.update((f.name, None) for f in dataclasses.fields(schema) if f.name != "name")
    # Every parameter of every other method, typed Any and ignored: a sweep such as
    # `cache=none,fbcache cache.threshold=0.05,0.1` sets `threshold` on the `none` node too, and
    # Hydra's struct mode rejects a key the schema lacks. cache_key_params ignores them all, so
    # those `none` cells are one cell.
    return [("name", str, field(default="none"))] + [(n, Optional[Any], field(default=None)) for n in names]


NoCacheConf = dataclasses.make_dataclass("NoCacheConf", _fields_of_every_method(), bases=(_CacheSchema,))
NoCacheConf.__module__ = __name__  # so it pickles (submitit ships configs to jobs)
NoCacheConf.__doc__ = "No cache. Accepts, and ignores, every parameter of every other method."


# ---- apply functions: (pipe, conf, context) -> JSON-able record of what was derived ----


def _apply_none(pipe: Any, conf: Any, ctx: ApplyContext) -> Dict[str, Any]:
    return {}


def apply_fbcache(pipe: Any, conf: Any, ctx: ApplyContext) -> Dict[str, Any]:
    from diffusers.hooks import FirstBlockCacheConfig

    c = _typed(conf, FBCacheConf)
    pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=c.threshold))
    return {}


def apply_pab(pipe: Any, conf: Any, ctx: ApplyContext) -> Dict[str, Any]:
    from diffusers.hooks import PyramidAttentionBroadcastConfig

    c = _typed(conf, PABConf)
    config = PyramidAttentionBroadcastConfig(
        spatial_attention_block_skip_range=c.spatial_attention_block_skip_range,
        temporal_attention_block_skip_range=c.temporal_attention_block_skip_range,
        cross_attention_block_skip_range=c.cross_attention_block_skip_range,
        spatial_attention_timestep_skip_range=tuple(c.spatial_attention_timestep_skip_range),
        temporal_attention_timestep_skip_range=tuple(c.temporal_attention_timestep_skip_range),
        cross_attention_timestep_skip_range=tuple(c.cross_attention_timestep_skip_range),
        current_timestep_callback=lambda: pipe.current_timestep,
    )
    pipe.transformer.enable_cache(config)
    return {}


def apply_fastercache(pipe: Any, conf: Any, ctx: ApplyContext) -> Dict[str, Any]:
    from diffusers.hooks import FasterCacheConfig

    c = _typed(conf, FasterCacheConf)
    distilled = runs_branches_separately(pipe)
    if c.is_guidance_distilled is False and distilled:
        raise ValueError(
            f"cache fastercache: is_guidance_distilled=false cannot work with {type(pipe).__name__}: it runs "
            "its transformer once per guidance branch, so there is no batched unconditional branch to "
            "approximate; leave cache.is_guidance_distilled=null (auto) or set it to true"
        )
    if c.is_guidance_distilled is not None:
        distilled = c.is_guidance_distilled
    weight = c.attention_weight
    config = FasterCacheConfig(
        spatial_attention_block_skip_range=c.spatial_attention_block_skip_range,
        temporal_attention_block_skip_range=c.temporal_attention_block_skip_range,
        spatial_attention_timestep_skip_range=tuple(c.spatial_attention_timestep_skip_range),
        temporal_attention_timestep_skip_range=tuple(c.temporal_attention_timestep_skip_range),
        low_frequency_weight_update_timestep_range=tuple(c.low_frequency_weight_update_timestep_range),
        high_frequency_weight_update_timestep_range=tuple(c.high_frequency_weight_update_timestep_range),
        alpha_low_frequency=c.alpha_low_frequency,
        alpha_high_frequency=c.alpha_high_frequency,
        unconditional_batch_skip_range=c.unconditional_batch_skip_range,
        unconditional_batch_timestep_skip_range=tuple(c.unconditional_batch_timestep_skip_range),
        attention_weight_callback=lambda _module: weight,
        tensor_format=c.tensor_format,
        is_guidance_distilled=distilled,
        current_timestep_callback=lambda: pipe.current_timestep,
    )
    pipe.transformer.enable_cache(config)
    return {"is_guidance_distilled": distilled}


def apply_taylorseer(pipe: Any, conf: Any, ctx: ApplyContext) -> Dict[str, Any]:
    import torch
    from diffusers.hooks import TaylorSeerCacheConfig

    c = _typed(conf, TaylorSeerConf)
    config = TaylorSeerCacheConfig(
        cache_interval=c.cache_interval,
        disable_cache_before_step=c.disable_cache_before_step,
        disable_cache_after_step=c.disable_cache_after_step,
        max_order=c.max_order,
        taylor_factors_dtype=getattr(torch, c.taylor_factors_dtype),
        use_lite_mode=c.use_lite_mode,
    )
    pipe.transformer.enable_cache(config)
    return {}


def apply_magcache(pipe: Any, conf: Any, ctx: ApplyContext) -> Dict[str, Any]:
    """Enable MagCache; without `mag_ratios`, first calibrate them with one `ctx.calibrate()` render."""
    from diffusers.hooks import MagCacheConfig

    c = _typed(conf, MagCacheConf)
    if ctx.steps is None:
        raise ValueError("cache magcache: its ratios depend on the step count; call apply_cache(pipe, conf, steps=...)")
    if c.mag_ratios is not None:
        ratios, source = list(c.mag_ratios), "given"
    elif ctx.calibrate is None:
        raise ValueError(
            "cache magcache: no cache.mag_ratios given, so they must be calibrated on one render; "
            "call apply_cache(pipe, conf, steps=..., calibrate=<function rendering once>) or set cache.mag_ratios"
        )
    else:
        ratios, source = calibrate_mag_ratios(pipe, ctx.steps, ctx.calibrate), "calibrated"
    config = MagCacheConfig(
        threshold=c.threshold,
        max_skip_steps=c.max_skip_steps,
        retention_ratio=c.retention_ratio,
        num_inference_steps=ctx.steps,
        mag_ratios=ratios,
    )
    pipe.transformer.enable_cache(config)
    # config.mag_ratios now holds the ratios interpolated to the step count: the ones in use.
    return {"mag_ratios": [float(r) for r in config.mag_ratios.tolist()], "mag_ratios_source": source}


def calibrate_mag_ratios(pipe: Any, steps: int, calibrate: Callable[[], None]) -> List[float]:
    """Run `calibrate()` (one render of `steps` steps) under MagCache calibration; return the ratios.

    diffusers computes the ratios in the tail block's hook, prints them when the last step ends and
    then clears them, so they are read from the hook as each one is computed. The print is swallowed.
    """
    from diffusers.hooks import MagCacheConfig

    transformer = pipe.transformer
    transformer.enable_cache(MagCacheConfig(calibrate=True, num_inference_steps=steps))
    try:
        recorded = _record_calibration_ratios(transformer)
        with contextlib.redirect_stdout(io.StringIO()):
            calibrate()
    finally:
        transformer.disable_cache()
    # One list per cache context ("cond", and "uncond" under true CFG): the first is the conditional one.
    runs = list(recorded.values())
    if not runs or any(len(ratios) != steps for ratios in runs):
        raise RuntimeError(
            f"cache magcache: calibration recorded {[len(r) for r in runs] or 0} magnitude ratios, expected {steps}; "
            f"calibrate() must run the pipeline exactly once with num_inference_steps={steps}"
        )
    return runs[0]


def _record_calibration_ratios(transformer: Any) -> Dict[str, List[float]]:
    from diffusers.hooks.mag_cache import _MAG_CACHE_BLOCK_HOOK

    tails = [
        hook
        for module in transformer.modules()
        if (registry := getattr(module, "_diffusers_hook", None)) is not None
        and (hook := registry.get_hook(_MAG_CACHE_BLOCK_HOOK)) is not None
        and hook.is_tail
    ]
    if len(tails) != 1 or not hasattr(tails[0], "_perform_calibration_step"):
        raise RuntimeError(
            f"cache magcache: found {len(tails)} MagCache tail hooks; this diffusers version calibrates "
            "differently, so give the ratios explicitly with cache.mag_ratios=[...]"
        )
    tail = tails[0]
    recorded: Dict[str, List[float]] = {}
    original = tail._perform_calibration_step

    def record(state: Any, residual: Any) -> None:
        original(state, residual)
        recorded.setdefault(tail.state_manager.context.name, []).append(float(state.calibration_ratios[-1]))

    tail._perform_calibration_step = record  # instance attribute: gone with the hook at disable_cache
    return recorded


def runs_branches_separately(pipe: Any) -> bool:
    """Whether the pipeline has no batched unconditional branch (FasterCache's is_guidance_distilled)."""
    declared = getattr(pipe, "runs_guidance_branches_separately", None)  # a pipeline may say so itself
    if declared is not None:
        return bool(declared)
    embeds_guidance = bool(getattr(pipe.transformer.config, "guidance_embeds", False))
    return embeds_guidance or type(pipe).__name__.startswith("Flux")


CACHES: Dict[str, Tuple[type, Callable[[Any, Any, ApplyContext], Dict[str, Any]]]] = {
    "none": (NoCacheConf, _apply_none),
    "fbcache": (FBCacheConf, apply_fbcache),
    "pab": (PABConf, apply_pab),
    "fastercache": (FasterCacheConf, apply_fastercache),
    "taylorseer": (TaylorSeerConf, apply_taylorseer),
    "magcache": (MagCacheConf, apply_magcache),
}


# ---- public API ----


def apply_cache(
    pipe: Any, conf: Any, *, steps: Optional[int] = None, calibrate: Optional[Callable[[], None]] = None
) -> Dict[str, Any]:
    """Enable the cache `conf` names on `pipe.transformer`; return a JSON-able record of what was derived.

    `steps` is the cell's num_inference_steps. `calibrate` renders once with the cell's settings
    (output discarded); only magcache without `mag_ratios` calls it, once, before enabling itself.
    The record holds e.g. magcache's ratios and fastercache's resolved is_guidance_distilled.
    Raises ValueError when a cache is already enabled: call `reset_cache(pipe)` first.
    """
    name = cache_name(conf)
    transformer = getattr(pipe, "transformer", None)
    if getattr(transformer, "is_cache_enabled", False):
        raise ValueError(
            f"cache {name}: {type(transformer).__name__} already has a cache enabled "
            f"({type(transformer._cache_config).__name__}); call reset_cache(pipe) first"
        )
    schema, apply = CACHES[name]
    if name != "none":
        _typed(conf, schema)
        _check_denoiser(name, type(pipe).__name__, None if transformer is None else type(transformer))
    return apply(pipe, conf, ApplyContext(steps=steps, calibrate=calibrate))


def reset_cache(pipe: Any) -> None:
    """Disable whatever cache is enabled on `pipe.transformer`; a no-op when there is none."""
    transformer = getattr(pipe, "transformer", None)
    if getattr(transformer, "is_cache_enabled", False):
        transformer.disable_cache()


def cache_name(conf: Any) -> str:
    """The method `conf` names; ValueError listing the valid ones when it is unknown."""
    name = getattr(conf, "name", None)
    if name not in CACHES:
        raise ValueError(f"cache={name}: unknown cache method; valid methods: {', '.join(CACHES)}")
    return name


def cache_key_params(conf: Any) -> Dict[str, Any]:
    """The canonical parameters that enter the cell key: every field, typed; {"name": "none"} for none."""
    name = cache_name(conf)
    if name == "none":
        return {"name": "none"}
    return dataclasses.asdict(_typed(conf, CACHES[name][0]))


def check_cache_supported(pipe_class_name: str, conf: Any) -> None:
    """Raise ValueError, naming the method and why, when `conf` cannot run on this pipeline class.

    Checks the values (types, ranges) and that the pipeline's denoiser is a diffusers transformer
    that takes cache hooks (a UNet pipeline such as StableDiffusionXLPipeline does not).
    """
    name = cache_name(conf)
    if name == "none":
        return
    _typed(conf, CACHES[name][0])
    declared = _declared_transformer(pipe_class_name, name)
    if declared is not _UNKNOWN:
        _check_denoiser(name, pipe_class_name, declared)


def _check_denoiser(name: str, pipe_class_name: str, transformer_cls: Optional[type]) -> None:
    """ValueError when method `name` cannot hook this pipeline's transformer class (None: it has none)."""
    from diffusers.models.cache_utils import CacheMixin

    if transformer_cls is None:
        raise ValueError(
            f"cache {name}: {pipe_class_name} has no transformer (it denoises with a UNet or similar), and "
            "diffusers' cache methods hook transformer blocks only; use cache=none for this model"
        )
    if not issubclass(transformer_cls, CacheMixin):
        raise ValueError(
            f"cache {name}: {pipe_class_name}'s {transformer_cls.__name__} takes no diffusers cache hooks; use cache=none"
        )
    if CACHES[name][0].needs_block_metadata and not _has_block_metadata(transformer_cls):
        raise ValueError(
            f"cache {name}: diffusers has no block metadata for {transformer_cls.__name__} ({pipe_class_name}), "
            "which this method needs to skip whole blocks; try cache=pab, fastercache or taylorseer, or cache=none"
        )


_UNKNOWN = object()


def _declared_transformer(pipe_class_name: str, name: str) -> Any:
    """The transformer class `pipe_class_name` declares; None without one, _UNKNOWN if not a plain class."""
    import inspect

    import diffusers

    from render.pipeline import pipeline_class  # lazy: render.pipeline imports this module

    try:
        pipeline_cls = pipeline_class(pipe_class_name)
    except (ImportError, AttributeError, ValueError):
        pipeline_cls = None
    if pipeline_cls is None:
        raise ValueError(f"cache {name}: diffusers {diffusers.__version__} has no pipeline class {pipe_class_name}")
    parameter = inspect.signature(pipeline_cls.__init__).parameters.get("transformer")
    if parameter is None:
        return None
    annotation = parameter.annotation
    if isinstance(annotation, str):
        annotation = getattr(diffusers, annotation, None)
    # A union or an unresolvable name is checked on the loaded transformer, in apply_cache.
    return annotation if isinstance(annotation, type) else _UNKNOWN


def _has_block_metadata(transformer_cls: type) -> bool:
    from diffusers.hooks._helpers import TransformerBlockRegistry

    TransformerBlockRegistry._register()
    return any(block.__module__ == transformer_cls.__module__ for block in TransformerBlockRegistry._registry)


# ---- conf -> typed, validated schema instance ----


def _typed(conf: Any, schema: type) -> Any:
    """`conf` (dataclass or config node) as a `schema` instance with canonical values; ValueError if invalid."""
    name = schema.name if isinstance(getattr(schema, "name", None), str) else schema.__name__
    values = {}
    for f in dataclasses.fields(schema):
        try:
            raw = getattr(conf, f.name)
        except AttributeError:
            raise ValueError(f"cache {name}: the config has no key {f.name!r}") from None
        values[f.name] = _coerce(raw, f.type, f"cache {name}: {f.name}")
    typed = schema(**values)
    _check_ranges(typed)
    return typed


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union:  # Optional[X]
        if value is None:
            return None
        return _coerce(value, next(a for a in args if a is not type(None)), where)
    if tp is Any:
        return value
    if origin in (list, List):
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise ValueError(f"{where}={value!r}: expected a list")
        return [_coerce(v, args[0], where) for v in value]
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp in (bool, str) and isinstance(value, tp):
        return value
    raise ValueError(f"{where}={value!r}: expected {getattr(tp, '__name__', tp)}")


def _check_ranges(c: Any) -> None:
    problems = []
    for f in dataclasses.fields(c):
        value = getattr(c, f.name)
        if f.name.endswith("_timestep_skip_range") or f.name.endswith("_timestep_range"):
            if value is not None and (len(value) != 2 or value[0] >= value[1]):
                problems.append(f"{f.name}={value}: expected [lo, hi] with lo < hi")
        elif f.name.endswith("skip_range") or f.name in ("cache_interval", "max_order", "max_skip_steps"):
            if value is not None and value < 1:
                problems.append(f"{f.name}={value}: expected an integer >= 1")
        elif f.name in ("threshold", "disable_cache_before_step", "disable_cache_after_step"):
            if value is not None and value < 0:
                problems.append(f"{f.name}={value}: expected a value >= 0")
    if isinstance(c, PABConf) and all(
        v is None for v in (c.spatial_attention_block_skip_range, c.temporal_attention_block_skip_range,
                            c.cross_attention_block_skip_range)
    ):
        problems.append("set at least one of spatial/temporal/cross_attention_block_skip_range")
    if isinstance(c, MagCacheConf):
        if not 0 <= c.retention_ratio <= 1:
            problems.append(f"retention_ratio={c.retention_ratio}: expected a fraction in [0, 1]")
        if c.mag_ratios is not None and not c.mag_ratios:
            problems.append("mag_ratios=[]: give one ratio per step, or null to calibrate")
    if isinstance(c, TaylorSeerConf) and c.taylor_factors_dtype not in TAYLOR_FACTOR_DTYPES:
        problems.append(f"taylor_factors_dtype={c.taylor_factors_dtype}: valid: {', '.join(TAYLOR_FACTOR_DTYPES)}")
    if isinstance(c, FasterCacheConf) and c.tensor_format not in FASTERCACHE_TENSOR_FORMATS:
        problems.append(f"tensor_format={c.tensor_format}: valid: {', '.join(FASTERCACHE_TENSOR_FORMATS)}")
    if problems:
        raise ValueError(f"cache {c.name}: " + "; ".join(problems))
