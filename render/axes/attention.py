"""The attention axis: option name -> diffusers attention backend and what it needs to run.

A new backend is one entry in `BACKENDS` and one option file `render/conf/attention/<name>.yaml`.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from render.axes.base import NamedAxis, Record, Target, Where
from render.errors import RenderError
from render.compose.spec import Cell


class BackendUnavailable(RenderError, RuntimeError):
    """An attention backend cannot run on this machine."""


@dataclass(frozen=True)
class AttentionBackend:
    backend: str  # the name diffusers' set_attention_backend takes
    needs_cuda: bool = False  # no CPU kernel exists
    package: str | None = None  # import name of the package the kernel lives in
    pip: str | None = None  # what to install when the package is missing


BACKENDS: dict[str, AttentionBackend] = {
    "native": AttentionBackend("native"),
    "math": AttentionBackend("_native_math"),
    "flex": AttentionBackend("flex"),
    "sdpa-flash": AttentionBackend("_native_flash"),  # PyTorch SDPA's flash kernel (a CPU one too)
    "flash": AttentionBackend("flash", needs_cuda=True, package="flash_attn", pip="flash-attn"),
    "flash3": AttentionBackend("_flash_3", needs_cuda=True, package="flash_attn_interface", pip="FlashAttention-3 (built from source)"),
    "sage": AttentionBackend("sage", needs_cuda=True, package="sageattention", pip="sageattention"),
    "xformers": AttentionBackend("xformers", needs_cuda=True, package="xformers", pip="xformers"),
    "cudnn": AttentionBackend("_native_cudnn", needs_cuda=True),
    "efficient": AttentionBackend("_native_efficient", needs_cuda=True),
}


@dataclass
class AttentionConf:
    name: str = MISSING  # option name, e.g. native, flex, flash (BACKENDS maps it to a diffusers backend)


def _runs_here(spec: AttentionBackend, device_kind: str) -> bool:
    return not (spec.needs_cuda and device_kind == "cpu") and not (spec.package and importlib.util.find_spec(spec.package) is None)


def check_attention_usable(name: str, device_kind: str) -> None:
    """Raise BackendUnavailable naming what is missing and which options would run here."""
    spec = BACKENDS.get(name)
    if spec is None:
        raise BackendUnavailable(f"attention={name!r} is not a known backend; valid: {', '.join(BACKENDS)}")
    problem = None
    if spec.needs_cuda and device_kind == "cpu":
        problem = "needs a CUDA GPU and this cell runs on the CPU"
    elif spec.package and importlib.util.find_spec(spec.package) is None:
        problem = f"needs the package {spec.package!r} (pip install {spec.pip})"
    if problem:
        usable = [n for n, s in BACKENDS.items() if _runs_here(s, device_kind)]
        raise BackendUnavailable(f"attention={name} {problem}; usable here: {', '.join(usable)}")


class AttentionAxis(NamedAxis):
    name = "attention"
    help = "the attention backend diffusers runs the denoiser with"
    schema = AttentionConf
    default = "native"

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        check_attention_usable(value, where.device_kind)

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
