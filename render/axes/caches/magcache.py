"""MagCache (diffusers `MagCacheConfig`): skip steps while the accumulated residual-magnitude error stays
small. Without given ratios it calibrates them on one render of the cell; the ratios in use are
returned by `apply` and recorded in the run's run.json (`cache_record`)."""

import contextlib
import io
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, List, Optional

from render.axes.caches._base import ApplyContext, CacheMethod, CacheConfigError, CacheSchema, Record, at_least, found

LEADER_BLOCK_HOOK = "mag_cache_leader_block_hook"  # diffusers.hooks.mag_cache._MAG_CACHE_LEADER_BLOCK_HOOK
BLOCK_HOOK = "mag_cache_block_hook"  # diffusers.hooks.mag_cache._MAG_CACHE_BLOCK_HOOK


@dataclass
class MagCacheConf(CacheSchema):
    """MagCache: skip steps while the accumulated residual-magnitude error stays small."""

    needs_block_metadata: ClassVar[bool] = True
    HOOKS: ClassVar[tuple] = (LEADER_BLOCK_HOOK, BLOCK_HOOK)
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

    def problems(self) -> List[str]:
        checks = [at_least(self, "threshold", 0), at_least(self, "max_skip_steps", 1)]
        if not 0 <= self.retention_ratio <= 1:
            checks.append(f"retention_ratio={self.retention_ratio}: expected a fraction in [0, 1]")
        if self.mag_ratios is not None and not self.mag_ratios:
            checks.append("mag_ratios=[]: give one ratio per step, or null to calibrate")
        return found(*checks)

    def calibration_renders(self) -> int:
        return 1 if self.mag_ratios is None else 0  # its ratios calibrated on one render of the cell


def apply(pipe: Any, conf: MagCacheConf, ctx: ApplyContext) -> Record:
    """Enable MagCache; without `mag_ratios`, first calibrate them with one `ctx.calibrate()` render."""
    import torch
    from diffusers.hooks import MagCacheConfig

    if ctx.steps is None:
        raise CacheConfigError("cache magcache: its ratios depend on the step count; call apply_cache(pipe, conf, steps=...)")
    if conf.mag_ratios is not None:
        ratios, source = list(conf.mag_ratios), "given"
    elif ctx.calibrate is None:
        raise CacheConfigError(
            "cache magcache: no cache.mag_ratios given, so they must be calibrated on one render; "
            "call apply_cache(pipe, conf, steps=..., calibrate=<function rendering once>) or set cache.mag_ratios"
        )
    else:
        ratios, source = calibrate_mag_ratios(pipe, ctx.steps, ctx.calibrate), "calibrated"
    config = MagCacheConfig(
        threshold=conf.threshold,
        max_skip_steps=conf.max_skip_steps,
        retention_ratio=conf.retention_ratio,
        num_inference_steps=ctx.steps,
        mag_ratios=ratios,
    )
    pipe.transformer.enable_cache(config)
    # config.mag_ratios now holds the ratios interpolated to the step count (a tensor): the ones in use.
    in_use = config.mag_ratios
    if in_use is None:
        raise RuntimeError("cache magcache: diffusers' MagCacheConfig dropped the ratios it was given")
    values = in_use.tolist() if isinstance(in_use, torch.Tensor) else in_use
    return {"mag_ratios": [float(r) for r in values], "mag_ratios_source": source}


METHOD = CacheMethod(MagCacheConf, apply)


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
    tails = [
        hook
        for module in transformer.modules()
        if (registry := getattr(module, "_diffusers_hook", None)) is not None
        and (hook := registry.get_hook(BLOCK_HOOK)) is not None
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
