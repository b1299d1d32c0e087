"""The parallel axis: one cell spread over several GPUs (or, on the CPU, several gloo processes).

- `ulysses`: context parallelism, Ulysses all-to-all (diffusers' `ContextParallelConfig(ulysses_degree=)`):
  each rank holds a slice of the sequence; attention exchanges heads for sequence. Needs the degree to
  divide the attention heads and the sequence.
- `ring`: context parallelism, ring attention (`ring_degree`): key/value blocks passed round the ranks.
- `usp`: both (Unified Sequence Parallel): width = ulysses_degree x ring_degree.
- `tensor`: tensor parallelism (`TensorParallelConfig(tp_degree=)`): the denoiser's Linear weights sharded.

The *width* of a cell (the devices it holds) is derived from the degrees. `enable_parallelism` cannot be
undone, so the option is a load-time value (it keys the pipeline cache); the ranks that run it are started
by render.run.ranks. `none` is the default and is not part of the cell key (every key from before the axis
stays as it was). What was verified where: docs/parallel.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from render.axes.base import OptionAxis, Where
from render.axes.errors import AxisError
from render.compose.spec import Cell
from render.models.families import family
from render.models.families._tokens import Shape

PARALLEL_NAMES = ("none", "ulysses", "ring", "usp", "tensor")
CPU_NAMES = ("none", "ulysses")  # ring attention and tensor parallelism do not run under gloo on the CPU


@dataclass
class ParallelConf:
    """How one cell is spread over devices (conf/parallel/)."""

    name: str = "none"  # none | ulysses | ring | usp | tensor
    ulysses_degree: int = 1  # ulysses, usp: ranks exchanging heads for sequence
    ring_degree: int = 1  # ring, usp: ranks passing key/value blocks round
    tp_degree: int = 1  # tensor: ranks sharing each Linear's weights

    def __post_init__(self) -> None:
        if self.name not in PARALLEL_NAMES:
            raise AxisError(f"parallel.name={self.name}: valid values are {', '.join(PARALLEL_NAMES)}")
        used = {"none": (), "ulysses": ("ulysses_degree",), "ring": ("ring_degree",),
                "usp": ("ulysses_degree", "ring_degree"), "tensor": ("tp_degree",)}[self.name]
        for field_name in ("ulysses_degree", "ring_degree", "tp_degree"):
            value = getattr(self, field_name)
            if field_name in used and value < 2:
                raise AxisError(f"parallel.{field_name}={value}: parallel={self.name} needs a degree of 2 or more")
            if field_name not in used and value != 1:
                raise AxisError(f"parallel.{field_name}={value}: parallel={self.name} takes no {field_name} "
                                f"(it takes {', '.join(used) or 'nothing'})")

    @property
    def width(self) -> int:
        """Devices one cell holds."""
        return self.ulysses_degree * self.ring_degree * self.tp_degree


def width_of(value: Optional[dict[str, Any]]) -> int:
    """The width of a cell's parallel value (None, the default, is one device)."""
    return 1 if value is None else ParallelConf(**value).width


def diffusers_config(value: dict[str, Any]) -> Any:
    """diffusers' ContextParallelConfig or TensorParallelConfig for a parallel value."""
    conf = ParallelConf(**value)
    if conf.name == "tensor":
        from diffusers.models._modeling_parallel import TensorParallelConfig

        return TensorParallelConfig(tp_degree=conf.tp_degree)
    from diffusers import ContextParallelConfig

    return ContextParallelConfig(ulysses_degree=conf.ulysses_degree if conf.ulysses_degree > 1 else None,
                                 ring_degree=conf.ring_degree if conf.ring_degree > 1 else None)


def enable(denoiser: Any, value: dict[str, Any]) -> None:
    """At load, in every rank (the process group is up: render.run.ranks): shard the denoiser."""
    import torch

    if torch.accelerator.device_count() == 0:
        # diffusers picks each rank's device as rank % accelerator count, which is 0 on the CPU (a division by
        # zero); every CPU rank runs on "cpu", whatever the index, so one "device" is the truth for the mesh.
        torch.accelerator.device_count = lambda: 1
    denoiser.enable_parallelism(config=diffusers_config(value))


def machine_width(device_kind: str) -> Optional[int]:
    """GPUs this machine has for one cell; None on the CPU (any width of gloo processes)."""
    if device_kind == "cpu":
        return None
    import torch

    return torch.cuda.device_count()


def _local_config(folder: Path, component: str) -> Optional[dict[str, Any]]:
    path = folder / component / "config.json"
    return json.loads(path.read_text()) if path.is_file() else None


def check_divides(cell: Cell, folder: Path) -> None:
    """Ulysses splits the heads and the sequence; ring the sequence; tensor the heads. Read from the model's
    folder (render.run.preflight passes it; a hub model not downloaded yet is checked by diffusers at load)."""
    if cell.axes["parallel"] is None:
        return
    conf = ParallelConf(**cell.axes["parallel"])
    transformer = _local_config(folder, "transformer")
    if transformer is None:
        return
    heads = int(transformer.get("num_attention_heads", 0))
    split_heads = conf.ulysses_degree * conf.tp_degree
    if heads and heads % split_heads:
        raise AxisError(f"parallel={conf.name} splits the {heads} attention heads of {cell.model.name} over "
                        f"{split_heads} ranks, which does not divide them; valid degrees divide {heads}")
    model = cell.model
    shape = Shape(cell.height, cell.width, model.num_frames, model.max_sequence_length, transformer,
                  _local_config(folder, "vae") or {})
    split_seq = conf.ulysses_degree * conf.ring_degree
    for what, tokens in family(model.family).split_sequences(shape).items():
        if tokens is None:
            raise AxisError(f"parallel={conf.name} splits the {what} sequence of {model.name} ({model.family} family), "
                            f"whose length follows each prompt (diffusers does not pad it): a split over {split_seq} "
                            "ranks fails on every prompt it does not divide; valid here: parallel=none, or tensor "
                            "where the family takes it")
        if tokens and tokens % split_seq:
            raise AxisError(f"parallel={conf.name} splits the {tokens} {what} tokens of a {cell.height}x{cell.width} "
                            f"{model.name} sample over {split_seq} ranks, which does not divide them; "
                            f"choose a size or degree so that {split_seq} divides the sequence")


def check_parallel(conf: ParallelConf, cell: Cell, where: Where) -> None:
    if where.device_kind == "cpu" and conf.name not in CPU_NAMES:
        raise AxisError(f"parallel={conf.name} does not run on the CPU (gloo); on the CPU use one of "
                        f"{', '.join(CPU_NAMES)} (ulysses runs as width-N gloo processes), or run on CUDA GPUs")
    gpus = machine_width(where.device_kind)
    if gpus is not None and conf.width > gpus:
        raise AxisError(f"parallel={conf.name} is {conf.width} GPUs wide and this machine has {gpus}; "
                        f"valid widths here are 1 to {gpus}")
    transformer = where.pipeline.transformer
    plan = "_tp_plan" if conf.name == "tensor" else "_cp_plan"
    if not isinstance(transformer, type) or getattr(transformer, plan, None) is None:
        name = getattr(transformer, "__name__", "none")
        raise AxisError(f"parallel={conf.name} with model {cell.model.name}: its denoiser ({name}) has no "
                        f"{plan} in diffusers; use parallel=none")


class ParallelAxis(OptionAxis):
    """Applied at load (enable_parallelism shards the model for good); `none` stays out of the cell key."""

    name = "parallel"
    help = "one cell over several GPUs: ulysses, ring, usp (context parallel) or tensor, with degrees (docs/parallel.md)"
    schema = ParallelConf

    def key(self, node: Any) -> Any:
        value = super().key(node)
        return None if value["name"] == "none" else value  # None: not in the cell key

    def anchor_key(self, anchor: Any) -> Any:
        return None

    def override(self, value: Any) -> str:
        if value is None:
            return "parallel=none"
        degrees = (f"parallel.{k}={v}" for k, v in value.items() if k != "name" and v != 1)
        return " ".join([f"parallel={value['name']}", *degrees])

    def label(self, value: Any) -> str:
        return "" if value is None else f"parallel={value['name']}x{width_of(value)}"

    def load_key(self, value: Any) -> Any:
        return value

    def after_load(self, pipe: Any, denoiser: Any, value: Any, dtype: Any) -> None:
        enable(denoiser, value)

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        if value is not None:
            check_parallel(ParallelConf(**value), cell, where)


AXIS = ParallelAxis()
