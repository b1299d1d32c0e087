"""Whether a pipeline's denoiser can take a cache method's hooks (diffusers' CacheMixin, block metadata)."""

from typing import Any, Optional

from render.axes.caches._base import CacheConfigError, CacheSchema


def check_denoiser(schema: "type[CacheSchema]", pipe_class_name: str, transformer_cls: Optional[type]) -> None:
    """CacheConfigError when method `schema` cannot hook this pipeline's transformer class (None: it has none)."""
    from diffusers.models.cache_utils import CacheMixin

    name = schema.name
    if transformer_cls is None:
        raise CacheConfigError(
            f"cache {name}: {pipe_class_name} has no transformer (it denoises with a UNet or similar), and "
            "diffusers' cache methods hook transformer blocks only; use cache=none for this model"
        )
    if not issubclass(transformer_cls, CacheMixin):
        raise CacheConfigError(
            f"cache {name}: {pipe_class_name}'s {transformer_cls.__name__} takes no diffusers cache hooks; use cache=none"
        )
    problem = schema.denoiser_problem(transformer_cls)
    if problem is not None:
        raise CacheConfigError(f"cache {name}: {pipe_class_name}'s {transformer_cls.__name__}: {problem}")
    if schema.needs_block_metadata and not _has_block_metadata(transformer_cls):
        raise CacheConfigError(
            f"cache {name}: diffusers has no block metadata for {transformer_cls.__name__} ({pipe_class_name}), "
            "which this method needs to skip whole blocks; try cache=pab, fastercache or taylorseer, or cache=none"
        )


def check_pipeline_drives(schema: "type[CacheSchema]", pipe_cls: type) -> None:
    """CacheConfigError when the pipeline class cannot drive method `schema` (CacheSchema.pipeline_problem)."""
    problem = schema.pipeline_problem(pipe_cls)
    if problem is not None:
        raise CacheConfigError(f"cache {schema.name}: {pipe_cls.__name__} {problem}")


def _has_block_metadata(transformer_cls: type) -> bool:
    from diffusers.hooks._helpers import TransformerBlockRegistry

    TransformerBlockRegistry._register()
    return any(block.__module__ == transformer_cls.__module__ for block in TransformerBlockRegistry._registry)


def leftover_hooks(transformer: Any, names: set[str]) -> list[str]:
    """Names of the given diffusers hooks still registered on any module of `transformer`."""
    left: set[str] = set()
    for module in transformer.modules():
        registry = getattr(module, "_diffusers_hook", None)
        if registry is not None:
            left.update(n for n in names if registry.get_hook(n) is not None)
    return sorted(left)
