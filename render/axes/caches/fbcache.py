"""First Block Cache (diffusers `FirstBlockCacheConfig`): run the first block, skip the rest while its
output barely changed."""

from dataclasses import dataclass
from typing import Any, ClassVar, List

from render.axes.caches._base import ApplyContext, CacheMethod, CacheSchema, Record, at_least, found

LEADER_BLOCK_HOOK = "fbc_leader_block_hook"  # diffusers.hooks.first_block_cache._FBC_LEADER_BLOCK_HOOK
BLOCK_HOOK = "fbc_block_hook"  # diffusers.hooks.first_block_cache._FBC_BLOCK_HOOK


@dataclass
class FBCacheConf(CacheSchema):
    """First Block Cache: run the first block, skip the rest while its output barely changed."""

    needs_block_metadata: ClassVar[bool] = True
    HOOKS: ClassVar[tuple] = (LEADER_BLOCK_HOOK, BLOCK_HOOK)
    name: str = "fbcache"
    # Skip the remaining blocks while the first block's residual changed by less than this (relative
    # mean abs) since the last full step. diffusers' default 0.05 never skips on the tiny model, whose
    # residual changes by about 0.15-0.3 a step at 8 steps; FLUX.1 is usually run at 0.05-0.12.
    threshold: float = 0.3

    def problems(self) -> List[str]:
        return found(at_least(self, "threshold", 0))


def apply(pipe: Any, conf: FBCacheConf, ctx: ApplyContext) -> Record:
    from diffusers.hooks import FirstBlockCacheConfig

    pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=conf.threshold))
    return {}


METHOD = CacheMethod(FBCacheConf, apply, unbatchable="it skips a step when the first block's residual changed little over the whole batch, so a sample's steps would depend on the prompts that share its call")
