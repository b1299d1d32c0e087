"""The offload axis: where the weights live between uses.

- `model`: diffusers' `enable_model_cpu_offload` (accelerate hooks): each component moves to the GPU
  when the pipeline calls it and back to the CPU after. CUDA only. Undone by `remove_all_hooks`.
- `group`: `enable_group_offload` on every component: groups of blocks (`block_level`) or single
  layers (`leaf_level`) are onloaded just before they run; on CUDA the next group is prefetched on
  a side stream. Undone by removing the group-offloading hooks and moving back to the device.
  On the CPU it moves nothing (onload and offload device are both the CPU): the option runs there
  so its hooks and their undo are exercised, but it cannot be faster.
- `layerwise`: `enable_layerwise_casting` on the denoiser: weights stored in float8 and upcast
  layer by layer to the compute dtype. Storing casts the weights in place, which cannot be undone:
  it is a load-time choice (the pipeline cache keys loads by it), like quantization.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from render.axes.base import OptionAxis, Record, Target, Where
from render.axes.errors import AxisError
from render.compose.spec import Cell

OFFLOAD_NAMES = ("none", "model", "group", "layerwise")
OFFLOAD_TYPES = ("block_level", "leaf_level")
STORAGE_DTYPES = ("float8_e4m3fn", "float8_e5m2")
LOAD_TIME = ("layerwise",)  # options applied when the pipeline is loaded (they key the pipeline cache)
# diffusers' hook names of group offloading (diffusers.hooks.group_offloading)
GROUP_OFFLOAD_HOOKS = ("group_offloading", "layer_execution_tracker", "lazy_prefetch_group_offloading")


@dataclass
class OffloadConf:
    """Weights offloading (conf/offload/)."""

    name: str = "none"  # none | model | group | layerwise
    offload_type: str = "block_level"  # group: block_level (groups of blocks) | leaf_level (single layers)
    num_blocks_per_group: int = 1  # group, block_level: blocks onloaded together
    use_stream: Optional[bool] = None  # group: prefetch on a CUDA stream; None: on CUDA yes, on the CPU no
    storage_dtype: str = "float8_e4m3fn"  # layerwise: float8_e4m3fn | float8_e5m2

    def __post_init__(self) -> None:
        for field_name, value, valid in (("name", self.name, OFFLOAD_NAMES), ("offload_type", self.offload_type, OFFLOAD_TYPES),
                                         ("storage_dtype", self.storage_dtype, STORAGE_DTYPES)):
            if value not in valid:
                raise AxisError(f"offload.{field_name}={value}: valid values are {', '.join(valid)}")
        if self.num_blocks_per_group < 1:
            raise AxisError(f"offload.num_blocks_per_group={self.num_blocks_per_group}: must be >= 1")

    def key_fields(self) -> tuple[str, ...]:
        """The fields that change what this option does (the others do not enter the cell key)."""
        return {"none": ("name",), "model": ("name",), "layerwise": ("name", "storage_dtype"),
                "group": ("name", "offload_type", "num_blocks_per_group", "use_stream")}[self.name]


def apply_layerwise(denoiser: Any, conf: OffloadConf, compute_dtype: Any) -> None:
    """At load: store the denoiser's weights in float8, upcast per layer (cannot be undone)."""
    import torch

    if conf.name == "layerwise":
        denoiser.enable_layerwise_casting(storage_dtype=getattr(torch, conf.storage_dtype), compute_dtype=compute_dtype)


def apply_offload(pipe: Any, conf: OffloadConf, device: str) -> None:
    import torch

    if conf.name == "model":
        pipe.enable_model_cpu_offload(device=device)
    elif conf.name == "group":
        cuda = device.startswith("cuda")
        use_stream = cuda if conf.use_stream is None else conf.use_stream
        pipe.enable_group_offload(onload_device=torch.device(device), offload_device=torch.device("cpu"),
                                  offload_type=conf.offload_type, use_stream=use_stream,
                                  num_blocks_per_group=conf.num_blocks_per_group if conf.offload_type == "block_level" else None)


def reset_offload(pipe: Any, device: str) -> None:
    """Remove model-offload and group-offload hooks and bring every component back to `device`."""
    import torch

    moved = bool(getattr(pipe, "_all_hooks", None))
    pipe.remove_all_hooks()  # accelerate's model offload hooks (a no-op without them)
    for component in pipe.components.values():
        if not isinstance(component, torch.nn.Module):
            continue
        for module in component.modules():
            registry = getattr(module, "_diffusers_hook", None)
            for name in GROUP_OFFLOAD_HOOKS:
                if registry is not None and registry.get_hook(name) is not None:
                    registry.remove_hook(name, recurse=False)
                    moved = True
    if moved:
        pipe.to(device)


def check_offload(conf: OffloadConf, *, device_kind: str, quant: str) -> None:
    if conf.name == "model" and device_kind == "cpu":
        raise AxisError("offload=model moves components between the CPU and a CUDA GPU and this cell runs on the CPU; "
                         "use offload=none (or offload=group, which runs on the CPU but moves nothing)")
    if conf.name == "layerwise" and quant != "none":
        raise AxisError(f"offload=layerwise with quant={quant}: layerwise casting stores the weights in float8 and "
                         "cannot take quantized weights; use one of the two")
    if conf.use_stream and device_kind == "cpu":
        raise AxisError("offload.use_stream=true needs CUDA streams and this cell runs on the CPU; use offload.use_stream=null")


class OffloadAxis(OptionAxis):
    """`layerwise` is applied at load (it casts the weights in place); `model` and `group` per cell."""

    name = "offload"
    help = "moving weights off the GPU between uses: model, group or layerwise offload (docs/axes.md)"
    schema = OffloadConf

    def key_fields(self, conf: Any) -> tuple[str, ...]:
        return conf.key_fields()

    def load_key(self, value: Any) -> Any:
        return value if value["name"] in LOAD_TIME else None

    def after_load(self, pipe: Any, denoiser: Any, value: Any, dtype: Any) -> None:
        apply_layerwise(denoiser, self.conf(value), dtype)

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        check_offload(self.conf(value), device_kind=where.device_kind, quant=cell.axes["quant"]["name"])

    def apply(self, value: Any, target: Target) -> Record:
        apply_offload(target.pipe, self.conf(value), target.device)
        return {}

    def reset(self, target: Target) -> None:
        reset_offload(target.pipe, target.device)


AXIS = OffloadAxis()
