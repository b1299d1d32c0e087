"""The compile axis: torch.compile on the denoiser, applied per cell and undone before the next.

`regional` compiles each repeated transformer block (diffusers' `compile_repeated_blocks`: the
blocks share one compiled graph, so compiling costs a few blocks, not the whole model); `full`
compiles the whole denoiser (`ModelMixin.compile`, i.e. `torch.nn.Module.compile`).

Undo: `nn.Module.compile` only sets `_compiled_call_impl`, so clearing it on every module brings
back the eager forward; `torch._dynamo.reset()` then drops the compiled code and guards, so the
next cell compiles afresh (its compile time is its own). Compiled artefacts (inductor's FX graph
and kernel caches) live under the project's cache folder, `<HYPERGRID_CACHE>/torch-compile/`, so
a later process (a SLURM job, a rerun) reuses them instead of compiling from nothing.

fullgraph: diffusers' cache hooks decide at run time whether to skip blocks (a data-dependent
branch dynamo cannot trace), and offload hooks move weights between devices: both break graphs.
`compile.fullgraph=true` with a cache or an offload is refused by preflight rather than silently
turned off, so a cell always runs the way its key says.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional

from render.axes.base import OptionAxis, Record, Target, Where
from render.axes.errors import AxisError
from render.compose.spec import Cell

COMPILE_NAMES = ("none", "regional", "full")
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune")
COMPILE_BACKENDS = ("inductor", "aot_eager", "eager")
ARTEFACTS_SUBDIR = "torch-compile"


@dataclass
class CompileConf:
    """torch.compile of the denoiser (conf/compile/)."""

    name: str = "none"  # none | regional (compile_repeated_blocks) | full (the whole denoiser)
    mode: str = "default"  # torch.compile mode: default | max-autotune-no-cudagraphs | reduce-overhead | max-autotune
    fullgraph: bool = False  # one graph or an error (refused with a cache or an offload: their hooks break graphs)
    dynamic: Optional[bool] = None  # dynamic shapes: None lets dynamo decide (static first, dynamic on a recompile)
    backend: str = "inductor"  # inductor (kernels) | aot_eager | eager (dynamo only: cheap, for tests)

    def __post_init__(self) -> None:
        for field_name, value, valid in (("name", self.name, COMPILE_NAMES), ("mode", self.mode, COMPILE_MODES),
                                         ("backend", self.backend, COMPILE_BACKENDS)):
            if value not in valid:
                raise AxisError(f"compile.{field_name}={value}: valid values are {', '.join(valid)}")
        if self.backend != "inductor" and self.mode != "default":
            raise AxisError(f"compile.mode={self.mode} needs compile.backend=inductor (backend {self.backend} takes no mode)")


def artefact_dir() -> str:
    """Where inductor keeps compiled artefacts: the project's cache folder unless the user chose one."""
    from render.models.tiny import default_cache_root

    return str(default_cache_root() / ARTEFACTS_SUBDIR)


def use_artefact_cache() -> None:
    """Point inductor's and triton's caches into the project's cache folder (a user's own setting wins).

    Inductor writes its default folder into TORCHINDUCTOR_CACHE_DIR the first time anything asks for
    it (importing torchao does), so a value equal to that default is inductor's, not the user's."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current is None or os.path.abspath(current) == os.path.abspath(default_cache_dir()):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = artefact_dir()
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "triton"))


def compile_kwargs(conf: CompileConf) -> Dict[str, Any]:
    kwargs: Dict[str, Any] = {"fullgraph": conf.fullgraph, "dynamic": conf.dynamic, "backend": conf.backend}
    if conf.backend == "inductor":
        kwargs["mode"] = conf.mode
    return kwargs


def apply_compile(denoiser: Any, conf: CompileConf) -> None:
    """Compile the denoiser as `conf` says; compilation itself happens on the first call."""
    if conf.name == "none":
        return
    use_artefact_cache()
    if conf.name == "regional":
        denoiser.compile_repeated_blocks(**compile_kwargs(conf))
    else:
        denoiser.compile(**compile_kwargs(conf))


def reset_compile(denoiser: Any) -> None:
    """Back to eager: drop every module's compiled call and dynamo's compiled code (no-op when eager)."""
    compiled = [m for m in denoiser.modules() if getattr(m, "_compiled_call_impl", None) is not None]
    if not compiled:
        return
    import torch

    for module in compiled:
        module._compiled_call_impl = None
    torch._dynamo.reset()


def check_compile(conf: CompileConf, *, cache: str, offload: str, device_kind: str, denoiser_cls: Optional[type]) -> None:
    """ValueError naming why this compile setting cannot run with the rest of the cell."""
    if conf.name == "none":
        return
    if conf.fullgraph and (cache != "none" or offload != "none"):
        other = f"cache={cache}" if cache != "none" else f"offload={offload}"
        raise AxisError(f"compile.fullgraph=true with {other}: its hooks break the graph (fullgraph would fail at the "
                         "first call); use compile.fullgraph=false, or cache=none and offload=none")
    if conf.mode == "reduce-overhead" and device_kind == "cpu":
        raise AxisError("compile.mode=reduce-overhead captures CUDA graphs and this cell runs on the CPU; "
                         "use compile.mode=default or max-autotune-no-cudagraphs")
    if conf.name == "regional" and denoiser_cls is not None and not getattr(denoiser_cls, "_repeated_blocks", None):
        raise AxisError(f"compile=regional: {denoiser_cls.__name__} declares no repeated blocks (_repeated_blocks); use compile=full")


class CompileAxis(OptionAxis):
    name = "compile"
    help = "torch.compile of the denoiser: none, regional (its repeated blocks) or full (docs/axes.md)"
    schema = CompileConf

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        conf = self.conf(value)
        check_compile(conf, cache=cell.axes["cache"]["name"], offload=cell.axes["offload"]["name"], device_kind=where.device_kind,
                      denoiser_cls=where.pipeline.denoiser if conf.name != "none" else None)

    def apply(self, value: Any, target: Target) -> Record:
        apply_compile(target.denoiser, self.conf(value))
        return {}

    def reset(self, target: Target) -> None:
        reset_compile(target.denoiser)


AXIS = CompileAxis()

@dataclass
class _CompileWall:
    """Wall seconds spent compiling in this process, and when the compilation under way started."""

    total: float = 0.0
    started: Optional[float] = None


_compile_wall = _CompileWall()


def _on_compile_start(_args: Any) -> None:
    _compile_wall.started = time.perf_counter()


def _on_compile_end(_args: Any) -> None:
    if _compile_wall.started is not None:
        _compile_wall.total += time.perf_counter() - _compile_wall.started
        _compile_wall.started = None


def _watch_compiles() -> None:
    """Time every dynamo compilation (tracing + backend) with dynamo's compile callbacks; `torch._dynamo.reset`
    clears callbacks, so they are put back whenever a measurement starts."""
    from torch._dynamo.callback import callback_handler

    if _on_compile_start not in callback_handler.start_callbacks:
        callback_handler.register_start_callback(_on_compile_start)
        callback_handler.register_end_callback(_on_compile_end)


@dataclass
class CompileCounters:
    """Wall seconds spent compiling so far in this process, dynamo's compiled-frame count, and inductor's
    FX-graph cache hits and misses (a hit loads a graph compiled before, by this process or another, from
    the artefact cache on disk: a compile with only hits is a compile with a warm artefact cache)."""

    seconds: float
    frames: int
    cache_hits: int = 0
    cache_misses: int = 0

    @classmethod
    def now(cls) -> "CompileCounters":
        from torch._dynamo import utils

        _watch_compiles()
        inductor = utils.counters["inductor"]
        return cls(_compile_wall.total, int(utils.counters["frames"]["total"]), int(inductor["fxgraph_cache_hit"]),
                   int(inductor["fxgraph_cache_miss"]))

    def since(self, before: "CompileCounters") -> "CompileCounters":
        return CompileCounters(self.seconds - before.seconds, _grown(self.frames, before.frames),
                               _grown(self.cache_hits, before.cache_hits), _grown(self.cache_misses, before.cache_misses))


def _grown(now: int, before: int) -> int:
    """How much a dynamo counter grew; dynamo's reset clears its counters: a drop means it started again from zero."""
    return now - before if now >= before else now

