"""Text KV cache (diffusers `TextKVCacheConfig`): compute each block's text key/value projections once per
prompt and reuse them at every step. Exact (the image does not change); it skips no block, so its
engagement shows every block computed.

diffusers 0.42 hooks it into NucleusMoEImageTransformerBlock only (NucleusMoEImagePipeline); on another
transformer it would hook nothing, so preflight refuses it there and `apply` checks that a block was hooked.
No model family of hypergrid takes it (docs/models.md).
"""

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from render.axes.caches._base import ApplyContext, CacheConfigError, CacheMethod, CacheSchema, Record
from render.axes.caches._support import leftover_hooks

TRANSFORMER_HOOK = "text_kv_cache_transformer"  # diffusers.hooks.text_kv_cache._TEXT_KV_CACHE_TRANSFORMER_HOOK
BLOCK_HOOK = "text_kv_cache_block"  # ._TEXT_KV_CACHE_BLOCK_HOOK
# The block class diffusers' apply_text_kv_cache hooks, and its module (the transformer's).
BLOCK = ("diffusers.models.transformers.transformer_nucleusmoe_image", "NucleusMoEImageTransformerBlock")


@dataclass
class TextKVConf(CacheSchema):
    """Text KV cache: each block's text key/value projections, computed once per prompt (lossless; no parameters)."""

    HOOKS: ClassVar[tuple] = (TRANSFORMER_HOOK, BLOCK_HOOK)
    name: str = "textkv"

    @classmethod
    def denoiser_problem(cls, transformer_cls: type) -> Optional[str]:
        if transformer_cls.__module__ == BLOCK[0]:
            return None
        return f"diffusers' text KV cache hooks only {BLOCK[1]} (NucleusMoEImagePipeline); it would hook nothing here"


def apply(pipe: Any, conf: TextKVConf, ctx: ApplyContext) -> Record:
    from diffusers.hooks import TextKVCacheConfig

    transformer = pipe.transformer
    transformer.enable_cache(TextKVCacheConfig())
    if not leftover_hooks(transformer, {BLOCK_HOOK}):  # diffusers found no block it knows: nothing would be cached
        transformer.disable_cache()
        raise CacheConfigError(f"cache textkv: diffusers hooked no block of {type(transformer).__name__}; use cache=none")
    return {}


METHOD = CacheMethod(TextKVConf, apply)
