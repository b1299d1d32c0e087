"""SeaCache (diffusers `SeaCacheConfig`): reuse the block stack's residual while a spectral-evolution-aware
indicator of the latents barely changed between steps.

Two things decide where it engages, both read from diffusers' classes rather than declared per family:
the pipeline must tell the hooks where its loop is (`cache_context(name, step_index=, sigma=,
num_inference_steps=)`: in diffusers 0.42 WanPipeline and Cosmos3OmniPipeline do), and diffusers must have a
raw-vision adapter for the transformer (Wan text-to-video, Cosmos 3). Without either, diffusers' hooks run
every block and only log a warning ("fail-open"), so preflight refuses the pairing and `apply` checks the
loaded transformer.
"""

from dataclasses import dataclass
from typing import Any, ClassVar, List, Optional

from render.axes.caches._base import ApplyContext, CacheConfigError, CacheMethod, CacheSchema, Record, at_least, found

ROOT_HOOK = "sea_cache_root"  # diffusers.hooks.sea_cache._SEA_CACHE_ROOT_HOOK
LEADER_BLOCK_HOOK = "sea_cache_leader_block"  # ._SEA_CACHE_LEADER_BLOCK_HOOK
BLOCK_HOOK = "sea_cache_block"  # ._SEA_CACHE_BLOCK_HOOK
POST_NORM_HOOK = "sea_cache_post_norm"  # ._SEA_CACHE_POST_NORM_HOOK (Cosmos 3 only)
LOOP_FIELDS = frozenset({"step_index", "sigma", "num_inference_steps"})  # the CacheContext fields its gate reads


@dataclass
class SeaCacheConf(CacheSchema):
    """SeaCache: reuse the block stack's residual while the spectral indicator of the latents barely changed."""

    needs_block_metadata: ClassVar[bool] = True
    HOOKS: ClassVar[tuple] = (ROOT_HOOK, LEADER_BLOCK_HOOK, BLOCK_HOOK, POST_NORM_HOOK)
    name: str = "seacache"
    # Reuse while the accumulated relative-L1 change of the indicator stays below this (diffusers' default).
    threshold: float = 0.25
    # 0: reuse the last residual; 1: extrapolate linearly from the last two full steps.
    residual_order: int = 1
    # The first this many steps always run in full.
    retention_steps: int = 1
    # The last this many steps always run in full.
    cache_end_steps: int = 1
    # At most this many reused steps in a row (0: no limit).
    max_consecutive_cached: int = 2
    # Exponent of the clean-signal power prior of the indicator's spectral filter (3.0 for video).
    power_exp: float = 3.0

    def problems(self) -> List[str]:
        checks = [at_least(self, "threshold", 0), at_least(self, "retention_steps", 0), at_least(self, "cache_end_steps", 0),
                  at_least(self, "max_consecutive_cached", 0)]
        if self.residual_order not in (0, 1):
            checks.append(f"residual_order={self.residual_order}: expected 0 or 1")
        if self.power_exp <= 0:
            checks.append(f"power_exp={self.power_exp}: expected a value > 0")
        return found(*checks)

    @classmethod
    def pipeline_problem(cls, pipeline_cls: type) -> Optional[str]:
        from render.compose.introspect import cache_context_fields

        fields = cache_context_fields(pipeline_cls)
        if fields is None or LOOP_FIELDS <= fields:  # a pipeline whose source cannot be read is checked by its engagement
            return None
        return (f"does not pass {', '.join(sorted(LOOP_FIELDS - fields))} to its transformer's cache_context, which "
                "SeaCache's gate reads (diffusers 0.42: WanPipeline, Cosmos3OmniPipeline)")


def apply(pipe: Any, conf: SeaCacheConf, ctx: ApplyContext) -> Record:
    from diffusers.hooks import SeaCacheConfig

    transformer = pipe.transformer
    transformer.enable_cache(SeaCacheConfig(
        threshold=conf.threshold, residual_order=conf.residual_order, retention_steps=conf.retention_steps,
        cache_end_steps=conf.cache_end_steps, max_consecutive_cached=conf.max_consecutive_cached, power_exp=conf.power_exp,
    ))
    root = transformer._diffusers_hook.get_hook(ROOT_HOOK)
    if root is None or root.raw_vision_callback is None:  # diffusers picked no adapter: every call would run in full
        transformer.disable_cache()
        raise CacheConfigError(f"cache seacache: diffusers has no raw-vision adapter for this {type(transformer).__name__} "
                               "(it has one for Wan text-to-video and Cosmos 3), so SeaCache would never skip; use another cache")
    return {}


METHOD = CacheMethod(SeaCacheConf, apply, unbatchable="it skips a step by the whole batch's spectral change, so a sample's steps would depend on the prompts that share its call")
