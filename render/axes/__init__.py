"""The speed axes beyond attention, cache and scheduler: compile, quantization, offload, toggles.

One module per axis (its schema, apply, undo and checks); this package wires them together:
the registry of config groups, the cell-key parameters, which choices are load-time (they key the
pipeline cache: quantization, layerwise casting) and which are applied per cell and undone before
the next (compile, model/group offload, toggles), and the preflight check.

A model's anchor takes none of them: it stays the model's reference, so fidelity to the anchor
shows each lever's quality cost. Imports no torch at import time.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from typing import Any, Dict, Optional

from render.axes.compile import CompileConf, apply_compile, check_compile, reset_compile
from render.axes.errors import AxisError
from render.axes.offload import (
    LOAD_TIME,
    OffloadConf,
    apply_layerwise,
    apply_offload,
    check_offload,
    reset_offload,
)
from render.axes.quant import (
    QuantConf,
    check_quant,
    pipeline_quantization,
    weights_bytes,
)
from render.axes.toggles import TOGGLES, apply_toggles, check_toggles, reset_toggles

# config group -> schema (one YAML per option under render/conf/<group>/, `defaults: [<group>_schema, _self_]`)
GROUPS: Dict[str, type] = {"compile": CompileConf, "quant": QuantConf, "offload": OffloadConf}
NONE = {"name": "none"}

__all__ = ["GROUPS", "TOGGLES", "axes_key_params", "conf_of", "load_options", "apply_load_time", "configure_axes",
           "apply_compile_axis", "reset_axes", "check_axes", "default_warmups", "weights_bytes", "register"]


def conf_of(group: str, node: Any) -> Any:
    """The schema instance of a group's config node (or dict): validated by the schema's __post_init__."""
    from omegaconf import DictConfig, OmegaConf

    values = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    return GROUPS[group](**values)


def _key_params(group: str, conf: Any) -> Dict[str, Any]:
    if conf.name == "none":
        return dict(NONE)
    values = dataclasses.asdict(conf)
    if isinstance(conf, OffloadConf):
        values = {k: values[k] for k in conf.key_fields()}
    return values


def axes_key_params(cfg: Any) -> Dict[str, Any]:
    """The Cell fields of these axes (every value that changes pixels or timing), from the composed config.
    Raises ValueError naming a bad value."""
    params: Dict[str, Any] = {group: _key_params(group, conf_of(group, cfg[group])) for group in GROUPS}
    for toggle in TOGGLES:
        value = cfg[toggle]
        if not isinstance(value, bool):
            raise AxisError(f"{toggle}={value}: must be true or false")
        params[toggle] = value
    return params


def load_options(cell: Any) -> str:
    """The load-time choices of a cell, as a hashable key for the pipeline cache ("" when none)."""
    load = {"quant": cell.quant} if cell.quant["name"] != "none" else {}
    if cell.offload["name"] in LOAD_TIME:
        load["offload"] = cell.offload
    return json.dumps(load, sort_keys=True) if load else ""


def _component_libraries(source: str) -> Dict[str, str]:
    """component -> library its class comes from, read from the pipeline's model_index.json."""
    from diffusers import DiffusionPipeline

    index = DiffusionPipeline.load_config(source)
    return {k: v[0] for k, v in index.items() if isinstance(v, (list, tuple)) and len(v) == 2 and v[0] is not None}


def quantization_config(load: str, source: str, dtype: Any) -> Any:
    """from_pretrained's `quantization_config` for these load options (None: no quantization)."""
    quant = json.loads(load).get("quant") if load else None
    if not quant:
        return None
    return pipeline_quantization(QuantConf(**quant), _component_libraries(source), dtype)


def apply_load_time(pipe: Any, denoiser: Any, load: str, compute_dtype: Any) -> None:
    """What is applied once, right after loading (it cannot be undone): layerwise casting."""
    offload = json.loads(load).get("offload") if load else None
    if offload:
        apply_layerwise(denoiser, OffloadConf(**offload), compute_dtype)


def reset_axes(pipe: Any, denoiser: Any, device: str) -> None:
    """Undo what a previous cell applied: compile first (it wraps the rest), then toggles, then offload."""
    reset_compile(denoiser)
    reset_toggles(pipe, denoiser)
    reset_offload(pipe, device)


def configure_axes(pipe: Any, denoiser: Any, cell: Any, device: str) -> None:
    """Apply the cell's per-cell axes except compile (which goes last, after the cache hooks)."""
    apply_toggles(pipe, denoiser, {t: getattr(cell, t) for t in TOGGLES})
    apply_offload(pipe, OffloadConf(**cell.offload), device)


def apply_compile_axis(denoiser: Any, cell: Any) -> None:
    apply_compile(denoiser, CompileConf(**cell.compile))


def default_warmups(cell: Any) -> int:
    """Calls whose latency is not a warm figure: the first; with compile a second (the first compiles,
    the second may still recompile as guards settle); with compile and a cache a third (the cache's
    skip branch can first run, and compile, after its reuse warms up)."""
    compiled = cell.compile["name"] != "none"
    return 1 + compiled + (compiled and cell.cache["name"] != "none")


def pipeline_components(pipeline: str) -> Optional[list[str]]:
    """The components a pipeline class takes (its __init__ parameters); None when it cannot be imported."""
    from render.loading import pipeline_class

    try:
        cls = pipeline_class(pipeline)
    except (ImportError, AttributeError):
        return None
    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]


def _denoiser_class(pipeline: str) -> Optional[type]:
    import typing

    from render.loading import pipeline_class

    try:
        hints = typing.get_type_hints(pipeline_class(pipeline).__init__)
    except Exception:  # noqa: BLE001 - unresolvable annotations: the check is skipped, the run would tell
        return None
    declared = hints.get("transformer") or hints.get("unet")
    return declared if isinstance(declared, type) else None


def check_axes(cell: Any, device: str) -> None:
    """Preflight: ValueError naming an axis value that cannot run here or with the rest of the cell."""
    if cell.compile == NONE and cell.quant == NONE and cell.offload == NONE and not any(getattr(cell, t) for t in TOGGLES):
        return
    from render.loading import quiet_libraries

    quiet_libraries()
    pipeline = cell.model.pipeline
    components = pipeline_components(pipeline)
    capability = None
    if device.startswith("cuda"):
        import torch

        capability = tuple(torch.cuda.get_device_capability(device))
    quant, offload = QuantConf(**cell.quant), OffloadConf(**cell.offload)
    check_quant(quant, device_kind=cell.device_kind, capability=capability, components=components)
    check_offload(offload, device_kind=cell.device_kind, quant=quant.name)
    check_toggles({t: getattr(cell, t) for t in TOGGLES}, components=components, pipeline=pipeline,
                  quant=quant.name, offload=offload.name)
    check_compile(CompileConf(**cell.compile), cache=cell.cache["name"], offload=offload.name,
                  device_kind=cell.device_kind, denoiser_cls=_denoiser_class(pipeline) if cell.compile != NONE else None)


def register(cs: Any) -> None:
    """Store each group's schema in Hydra's ConfigStore as `<group>_schema`."""
    for group, schema in GROUPS.items():
        cs.store(group=group, name=f"{group}_schema", node=schema)
