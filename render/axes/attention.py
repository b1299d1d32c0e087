"""The attention axis: option name -> diffusers attention backend and what it needs to run.

A new backend is one entry in `BACKENDS` and one option file `render/conf/attention/<name>.yaml`.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from render.axes.base import NamedAxis, Record, Target, Where
from render.axes.errors import AxisError
from render.errors import RenderError
from render.compose.spec import Cell


class BackendUnavailable(RenderError, RuntimeError):
    """An attention backend cannot run on this machine."""


@dataclass(frozen=True)
class AttentionBackend:
    backend: str  # the name diffusers' set_attention_backend takes
    needs_cuda: bool = False  # no CPU kernel exists
    package: str | None = None  # import name of the package the kernel lives in
    modules: tuple[str, ...] = ()  # more modules diffusers imports for it (a missing one: a fallback, then a crash)
    pip: str | None = None  # what to install when the package is missing
    half_on_cuda: bool = False  # its CUDA kernel takes float16 / bfloat16 only (PyTorch's flash has a float32 CPU one)


BACKENDS: dict[str, AttentionBackend] = {
    "native": AttentionBackend("native"),
    "math": AttentionBackend("_native_math"),
    "flex": AttentionBackend("flex"),
    "sdpa-flash": AttentionBackend("_native_flash", half_on_cuda=True),  # PyTorch SDPA's flash kernel (a CPU one too)
    "flash": AttentionBackend("flash", needs_cuda=True, package="flash_attn", pip="flash-attn", half_on_cuda=True),
    # diffusers gates FA3 on the package `flash_attn_3` and calls it through the module `flash_attn_interface`
    "flash3": AttentionBackend("_flash_3", needs_cuda=True, package="flash_attn_3", modules=("flash_attn_interface",),
                               pip="FlashAttention-3 (built from source: hopper/)", half_on_cuda=True),
    "sage": AttentionBackend("sage", needs_cuda=True, package="sageattention", pip="sageattention", half_on_cuda=True),
    "xformers": AttentionBackend("xformers", needs_cuda=True, package="xformers", pip="xformers"),
    "cudnn": AttentionBackend("_native_cudnn", needs_cuda=True, half_on_cuda=True),
    "efficient": AttentionBackend("_native_efficient", needs_cuda=True),
}
HALF = ("float16", "bfloat16")


@dataclass
class AttentionConf:
    name: str = MISSING  # option name, e.g. native, flex, flash (BACKENDS maps it to a diffusers backend)


def _missing(spec: AttentionBackend) -> str | None:
    """The first module the backend needs that is not installed."""
    return next((m for m in (spec.package, *spec.modules) if m and importlib.util.find_spec(m) is None), None)


def _runs_here(spec: AttentionBackend, device_kind: str) -> bool:
    return not (spec.needs_cuda and device_kind == "cpu") and _missing(spec) is None


def check_attention_usable(name: str, device_kind: str, dtype: str | None = None) -> None:
    """Raise BackendUnavailable naming what is missing and which options would run here; AxisError for a kernel
    that does not take the cell's dtype on CUDA (diffusers leaves that check off: the cell would fail mid-sweep with
    PyTorch's "No available kernel")."""
    spec = BACKENDS.get(name)
    if spec is None:
        raise BackendUnavailable(f"attention={name!r} is not a known backend; valid: {', '.join(BACKENDS)}")
    problem = None
    if spec.needs_cuda and device_kind == "cpu":
        problem = "needs a CUDA GPU and this cell runs on the CPU"
    elif (missing := _missing(spec)) is not None:
        problem = f"needs the package {missing!r} (pip install {spec.pip})"
    if problem:
        usable = [n for n, s in BACKENDS.items() if _runs_here(s, device_kind)]
        raise BackendUnavailable(f"attention={name} {problem}; usable here: {', '.join(usable)}")
    if spec.half_on_cuda and device_kind != "cpu" and dtype is not None and dtype not in HALF:
        takes = [n for n, s in BACKENDS.items() if not s.half_on_cuda and _runs_here(s, device_kind)]
        raise AxisError(f"attention={name} runs float16 or bfloat16 on CUDA and this cell's dtype is {dtype}: set "
                        f"dtype=bfloat16, or use attention={', '.join(takes)}")


class AttentionAxis(NamedAxis):
    name = "attention"
    help = "the attention backend diffusers runs the denoiser with"
    schema = AttentionConf
    default = "native"

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        check_attention_usable(value, where.device_kind, cell.model.dtype)

    def apply(self, value: Any, target: Target) -> Record:
        """Set the backend on the denoiser, `native` included.

        diffusers' reset_attention_backend() leaves the process-wide active backend that
        set_attention_backend() changed, so a `native` cell after a `math` cell would really run math:
        the backend is always set explicitly instead.
        """
        target.denoiser.set_attention_backend(BACKENDS[value].backend)
        return {}

    def reset(self, target: Target) -> None:
        self.apply("native", target)


AXIS = AttentionAxis()
