"""Pyramid Attention Broadcast (diffusers `PyramidAttentionBroadcastConfig`): reuse attention outputs
across neighbouring steps."""

from dataclasses import dataclass, field
from typing import Any, ClassVar, List, Optional

from render.axes.caches._base import ApplyContext, CacheMethod, CacheSchema, Record, at_least, found, pair, window

HOOK = "pyramid_attention_broadcast"  # diffusers.hooks.pyramid_attention_broadcast._PYRAMID_ATTENTION_BROADCAST_HOOK
_KINDS = ("spatial", "temporal", "cross")


@dataclass
class PABConf(CacheSchema):
    """Pyramid Attention Broadcast: reuse attention outputs across neighbouring steps."""

    HOOKS: ClassVar[tuple] = (HOOK,)
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

    def problems(self) -> List[str]:
        checks = [at_least(self, f"{k}_attention_block_skip_range", 1) for k in _KINDS]
        checks += [window(self, f"{k}_attention_timestep_skip_range") for k in _KINDS]
        if all(getattr(self, f"{k}_attention_block_skip_range") is None for k in _KINDS):
            checks.append("set at least one of spatial/temporal/cross_attention_block_skip_range")
        return found(*checks)


def apply(pipe: Any, conf: PABConf, ctx: ApplyContext) -> Record:
    from diffusers.hooks import PyramidAttentionBroadcastConfig

    config = PyramidAttentionBroadcastConfig(
        spatial_attention_block_skip_range=conf.spatial_attention_block_skip_range,
        temporal_attention_block_skip_range=conf.temporal_attention_block_skip_range,
        cross_attention_block_skip_range=conf.cross_attention_block_skip_range,
        spatial_attention_timestep_skip_range=pair(conf.spatial_attention_timestep_skip_range),
        temporal_attention_timestep_skip_range=pair(conf.temporal_attention_timestep_skip_range),
        cross_attention_timestep_skip_range=pair(conf.cross_attention_timestep_skip_range),
        current_timestep_callback=lambda: pipe.current_timestep,
    )
    pipe.transformer.enable_cache(config)
    return {}


METHOD = CacheMethod(PABConf, apply)
