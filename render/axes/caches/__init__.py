"""The cache axis: one module per diffusers cache method, collected into the `CACHES` registry.

A method module (e.g. `fbcache.py`) holds its schema (a `CacheSchema` dataclass whose fields carry
the names of the diffusers config it maps onto, defaults included, validated in `__post_init__`),
its `apply(pipe, conf, context) -> record`, the names of the diffusers hooks it registers, and
`METHOD = CacheMethod(schema, apply)`. Every public module of this package that exports `METHOD` is a method
(render.compose.registry; the module's name is the method's): adding one
means adding its module and its option file `render/conf/cache/<name>.yaml`
(`defaults: [/schema/cache/<name>@_here_, _self_]`; the defaults live in the dataclass only).

Undoing a method is shared: diffusers' `disable_cache` removes whichever is enabled, and
`reset_cache` then checks that none of the methods' hooks is left behind.

A `conf` is a schema instance, the Hydra config node of the same shape, or a cell's key value (a
dict). This package imports no torch or diffusers at import time, so config composition stays fast.
"""

import copy
import dataclasses
import json
from contextlib import contextmanager
from dataclasses import field
from typing import Any, Callable, Dict, Iterator, Optional

from render.axes.base import SCHEMA_GROUP, Axis, Record, Target, Where
from render.axes.caches._base import ApplyContext, CacheConfigError, CacheMethod, CacheSchema
from render.axes.caches._engagement import Engagement, counting
from render.axes.caches._support import check_denoiser, check_pipeline_drives, leftover_hooks
from render.compose.registry import Registry
from render.compose.spec import Cell

__all__ = ["AXIS", "CACHES", "CacheConfigError", "Engagement", "NoCacheConf", "apply_cache", "cache_key_params",
           "calibration_renders",
           "cache_name", "check_cache_supported", "count_engagement", "reset_cache", "typed"]


def _methods() -> Registry[CacheMethod]:
    """Every method module of this package (render.compose.registry). Found at import, not on first use: `NoCacheConf`
    takes every method's fields, and Hydra's config store needs it when the axes are set up."""
    methods: Registry[CacheMethod] = Registry("cache method", "cache", lambda m: m.schema.name, package=__name__,
                                              attribute="METHOD", error=CacheConfigError)
    for name in methods:
        if methods.origin(name) != f"{__name__}.{name}":
            raise ImportError(f"{methods.origin(name)}: its schema's name is {name!r}; it must be the module's name "
                              "(the option name)")
    return methods


CACHES = _methods()  # every method by name, "none" included (added below, once NoCacheConf is made)


def _fields_of_every_method() -> list:
    names: Dict[str, None] = {}
    for method in CACHES.values():
        names.update((f.name, None) for f in dataclasses.fields(method.schema) if f.name != "name")
    # Every parameter of every other method, typed Any and ignored: a sweep such as
    # `cache=none,fbcache cache.threshold=0.05,0.1` sets `threshold` on the `none` node too, and
    # Hydra's struct mode rejects a key the schema lacks. cache_key_params ignores them all, so
    # those `none` cells are one cell.
    return [("name", str, field(default="none"))] + [(n, Optional[Any], field(default=None)) for n in names]


def _no_cache_conf() -> type[CacheSchema]:
    schema = dataclasses.make_dataclass("NoCacheConf", _fields_of_every_method(), bases=(CacheSchema,))
    assert issubclass(schema, CacheSchema)  # make_dataclass is typed as returning a bare type
    schema.__module__ = __name__  # so it pickles (submitit ships configs to jobs)
    schema.__doc__ = "No cache. Accepts, and ignores, every parameter of every other method."
    return schema


NoCacheConf = _no_cache_conf()


def _apply_none(pipe: Any, conf: Any, ctx: ApplyContext) -> Record:
    return {}


CACHES.add(CacheMethod(NoCacheConf, _apply_none), where=__name__)


def options() -> list[str]:
    """The cache options as lists show them: none, then the methods by name."""
    return ["none", *(name for name in CACHES.names() if name != "none")]


def cache_name(conf: Any) -> str:
    """The method `conf` names; CacheConfigError listing the valid ones when it is unknown."""
    name = conf.get("name") if isinstance(conf, dict) else getattr(conf, "name", None)
    CACHES[str(name)]  # CacheConfigError naming the valid ones when there is no such method
    return str(name)


def unbatchable(conf: Any) -> str | None:
    """Why the cache `conf` names cannot run a batch (render.axes.caches._base.CacheMethod.unbatchable), or None."""
    return CACHES[cache_name(conf)].unbatchable


def calibration_renders(conf: Any) -> int:
    """Renders the cache `conf` names makes with the cell's settings before its samples (MagCache without ratios: 1)."""
    return typed(conf).calibration_renders()


def typed(conf: Any) -> CacheSchema:
    """`conf` as a validated instance of its method's schema."""
    schema = CACHES[cache_name(conf)].schema
    return schema(**conf) if isinstance(conf, dict) else schema.from_conf(conf)


def apply_cache(
    pipe: Any, conf: Any, *, steps: Optional[int] = None, calibrate: Optional[Callable[[], None]] = None
) -> Record:
    """Enable the cache `conf` names on `pipe.transformer`; return a JSON-able record of what was derived.

    `steps` is the cell's num_inference_steps. `calibrate` renders once with the cell's settings
    (output discarded); only magcache without `mag_ratios` calls it, once, before enabling itself.
    The record holds e.g. magcache's ratios and fastercache's resolved is_guidance_distilled.
    Raises CacheConfigError when a cache is already enabled: call `reset_cache(pipe)` first.
    """
    name = cache_name(conf)
    transformer = getattr(pipe, "transformer", None)
    if transformer is not None and getattr(transformer, "is_cache_enabled", False):
        raise CacheConfigError(
            f"cache {name}: {type(transformer).__name__} already has a cache enabled "
            f"({type(transformer._cache_config).__name__}); call reset_cache(pipe) first"
        )
    method = CACHES[name]
    values = typed(conf)
    if name != "none":
        check_pipeline_drives(method.schema, type(pipe))
        check_denoiser(method.schema, type(pipe).__name__, None if transformer is None else type(transformer))
    return method.apply(pipe, values, ApplyContext(steps=steps, calibrate=calibrate))


def _all_hooks() -> set[str]:
    """The names of every method's diffusers hooks."""
    return {hook for m in CACHES.values() for hook in m.schema.HOOKS}


def reset_cache(pipe: Any) -> None:
    """Disable whatever cache is enabled on `pipe.transformer`; a no-op when there is none."""
    transformer = getattr(pipe, "transformer", None)
    if transformer is None or not getattr(transformer, "is_cache_enabled", False):
        return
    transformer.disable_cache()
    left = leftover_hooks(transformer, _all_hooks())
    if left:
        raise RuntimeError(f"reset_cache: diffusers' disable_cache left the hooks {', '.join(left)} registered; "
                           "this diffusers version undoes caches differently, so cells would leak into each other")


@contextmanager
def count_engagement(pipe: Any) -> Iterator[Callable[[], Optional[Engagement]]]:
    """Count what the enabled cache computed and reused during the block (render.axes.caches._engagement);
    yields a function that returns the counts once the block ran, None when no cache is enabled."""
    transformer = getattr(pipe, "transformer", None)
    if transformer is None or not getattr(transformer, "is_cache_enabled", False):
        yield lambda: None
        return
    with counting(transformer, pipe.scheduler, _all_hooks()) as tally:
        yield lambda: None if tally is None else tally.result()


# Typed parameters by the values they were typed from: a schema validates through OmegaConf (~5 ms), and a
# sweep's preflight asks for the same few caches once per cell (each cell's own and its anchor's).
_PARAMS: Dict[str, Dict[str, Any]] = {}


def _values_key(conf: Any) -> Optional[str]:
    """What `typed` reads from `conf`, as a key; None when it cannot read it all (then `typed` says why)."""
    schema = CACHES[cache_name(conf)].schema
    try:
        values = dict(conf) if isinstance(conf, dict) else {f.name: getattr(conf, f.name) for f in dataclasses.fields(schema)}
        return json.dumps([schema.__qualname__, values], sort_keys=True, default=repr)
    except Exception:  # noqa: BLE001 - a key it lacks, a value that does not resolve: typed() raises the real error
        return None


def cache_key_params(conf: Any) -> Dict[str, Any]:
    """The canonical parameters that enter the cell key: every field, typed; {"name": "none"} for none."""
    if cache_name(conf) == "none":
        return {"name": "none"}
    key = _values_key(conf)
    if key is None:
        return dataclasses.asdict(typed(conf))
    if key not in _PARAMS:
        _PARAMS[key] = dataclasses.asdict(typed(conf))  # a bad value raises here, each time: errors are not kept
    return copy.deepcopy(_PARAMS[key])


def check_cache_supported(pipeline: str, conf: Any) -> None:
    """Raise CacheConfigError, naming the method and why, when `conf` cannot run on this pipeline class
    (a diffusers class name or a dotted path).

    The values are checked when the cell key is made; this checks that the pipeline's denoiser is a
    diffusers transformer that takes cache hooks (a UNet pipeline such as StableDiffusionXLPipeline does not).
    """
    from render.compose.introspect import pipeline_info

    name = cache_name(conf)
    if name != "none":
        _check_pipeline(name, pipeline_info(pipeline))


def _check_family_takes(name: str, family_name: str) -> None:
    """CacheConfigError when the model family's module refuses cache `name` (one diffusers can hook, but its
    pipeline cannot run: Family.refused_caches says why)."""
    from render.models.families import family

    refused = family(family_name).refused_caches
    if name in refused:
        raise CacheConfigError(f"cache {name}: the {family_name} model family does not take it ({refused[name]})")


def check_family_takes(name: str, pipeline: str, family_name: str) -> None:
    """CacheConfigError, saying why and naming the caches it does take, when a cell of this pipeline class and
    family cannot run cache `name`: its family refuses it, or diffusers' classes cannot run it (_check_pipeline)."""
    from render.compose.introspect import pipeline_info

    if name == "none":
        return
    try:
        _check_family_takes(name, family_name)
        _check_pipeline(name, pipeline_info(pipeline))
    except CacheConfigError as error:
        raise CacheConfigError(f"{error}; valid: {', '.join(caches_taken(pipeline, family_name))}") from None


def caches_taken(pipeline: str, family_name: str) -> list[str]:
    """The cache options a cell of this pipeline class and family passes preflight with (docs/models.md's table)."""
    from render.compose.introspect import pipeline_info

    taken = []
    for name in options():
        try:
            if name != "none":
                _check_family_takes(name, family_name)
                _check_pipeline(name, pipeline_info(pipeline))
        except CacheConfigError:
            continue
        taken.append(name)
    return taken


def _check_pipeline(name: str, info: Any) -> None:
    from render.compose.introspect import UNKNOWN

    check_pipeline_drives(CACHES[name].schema, info.cls)
    if info.transformer is not UNKNOWN:  # a union or an unresolvable name is checked on the loaded one, in apply_cache
        check_denoiser(CACHES[name].schema, info.cls.__name__, info.transformer)


class CacheAxis(Axis):
    name = "cache"
    help = "the cache method that skips denoiser work between steps (its keys: cache.<key>=..., render/axes/caches/<name>.py)"
    default = "none"
    schema = CacheSchema

    def schemas(self) -> Dict[str, type]:
        return {f"{SCHEMA_GROUP}/cache/{name}": method.schema for name, method in CACHES.items()}

    def schema_of(self, node: Any) -> Optional[type]:
        name = node.get("name") if hasattr(node, "get") else None
        method = CACHES.get(name) if isinstance(name, str) else None
        return method.schema if method is not None else None

    def key(self, node: Any) -> Any:
        from render.rundir import check_name

        check_name(cache_name(node), "cache")
        return cache_key_params(node)

    def anchor_key(self, anchor: Any) -> Any:
        from render.rundir import check_name

        name = check_name(anchor.cache, "model.anchor.cache")
        if name not in CACHES:
            raise CacheConfigError(f"model.anchor.cache={name}: valid values are {', '.join(options())}")
        return cache_key_params({"name": name})  # the method's defaults

    def override(self, value: Any) -> str:
        return f"cache={value['name']}"  # the anchor's cache takes its defaults: the option name is enough

    def label(self, value: Any) -> str:
        params = ",".join(f"{k}={v}" for k, v in value.items() if k != "name")
        return f"{value['name']}({params})" if params else value["name"]

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        if value["name"] != "none":
            check_family_takes(value["name"], where.pipeline.name, cell.model.family)

    def apply(self, value: Any, target: Target) -> Record:
        return apply_cache(target.pipe, value, steps=target.steps, calibrate=target.calibrate) or {}

    def reset(self, target: Target) -> None:
        reset_cache(target.pipe)


AXIS = CacheAxis()
