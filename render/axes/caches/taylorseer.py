"""TaylorSeer (diffusers `TaylorSeerCacheConfig`): predict attention outputs with a Taylor series over
the last full steps."""

from dataclasses import dataclass
from typing import Any, ClassVar, List, Optional

from render.axes.caches._base import ApplyContext, CacheMethod, CacheSchema, Record, at_least, found, one_of

HOOK = "taylorseer_cache"  # diffusers.hooks.taylorseer_cache._TAYLORSEER_CACHE_HOOK
FACTOR_DTYPES = ("float32", "float64", "float16", "bfloat16")


@dataclass
class TaylorSeerConf(CacheSchema):
    """TaylorSeer: predict attention outputs with a Taylor series over the last full steps."""

    HOOKS: ClassVar[tuple] = (HOOK,)
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

    def problems(self) -> List[str]:
        return found(
            at_least(self, "cache_interval", 1),
            at_least(self, "max_order", 1),
            at_least(self, "disable_cache_before_step", 0),
            at_least(self, "disable_cache_after_step", 0),
            one_of(self, "taylor_factors_dtype", FACTOR_DTYPES),
        )


def apply(pipe: Any, conf: TaylorSeerConf, ctx: ApplyContext) -> Record:
    import torch
    from diffusers.hooks import TaylorSeerCacheConfig

    config = TaylorSeerCacheConfig(
        cache_interval=conf.cache_interval,
        disable_cache_before_step=conf.disable_cache_before_step,
        disable_cache_after_step=conf.disable_cache_after_step,
        max_order=conf.max_order,
        taylor_factors_dtype=getattr(torch, conf.taylor_factors_dtype),
        use_lite_mode=conf.use_lite_mode,
    )
    pipe.transformer.enable_cache(config)
    return {}


METHOD = CacheMethod(TaylorSeerConf, apply)
