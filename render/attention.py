"""The attention axis: option name -> diffusers attention backend and what it needs to run."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from render.errors import RenderError


class BackendUnavailable(RenderError, RuntimeError):
    """An attention backend cannot run on this machine."""


@dataclass(frozen=True)
class AttentionBackend:
    backend: str  # the name diffusers' set_attention_backend takes
    needs_cuda: bool = False  # no CPU kernel exists
    package: str | None = None  # import name of the package the kernel lives in
    pip: str | None = None  # what to install when the package is missing


ATTENTION: dict[str, AttentionBackend] = {
    "native": AttentionBackend("native"),
    "math": AttentionBackend("_native_math"),
    "flex": AttentionBackend("flex"),
    "flash": AttentionBackend("flash", needs_cuda=True, package="flash_attn", pip="flash-attn"),
    "flash3": AttentionBackend("_flash_3", needs_cuda=True, package="flash_attn_interface", pip="FlashAttention-3 (built from source)"),
    "sage": AttentionBackend("sage", needs_cuda=True, package="sageattention", pip="sageattention"),
    "xformers": AttentionBackend("xformers", needs_cuda=True, package="xformers", pip="xformers"),
    "cudnn": AttentionBackend("_native_cudnn", needs_cuda=True),
    "efficient": AttentionBackend("_native_efficient", needs_cuda=True),
}


def check_attention_usable(name: str, device_kind: str) -> None:
    """Raise BackendUnavailable naming what is missing and which options would run here."""
    spec = ATTENTION.get(name)
    if spec is None:
        raise BackendUnavailable(f"attention={name!r} is not a known backend; valid: {', '.join(ATTENTION)}")
    problem = None
    if spec.needs_cuda and device_kind == "cpu":
        problem = "needs a CUDA GPU and this cell runs on the CPU"
    elif spec.package and importlib.util.find_spec(spec.package) is None:
        problem = f"needs the package {spec.package!r} (pip install {spec.pip})"
    if problem:
        usable = [n for n, s in ATTENTION.items() if not s.needs_cuda or device_kind != "cpu"]
        usable = [n for n in usable if not ATTENTION[n].package or importlib.util.find_spec(ATTENTION[n].package)]
        raise BackendUnavailable(f"attention={name} {problem}; usable here: {', '.join(usable)}")


def apply_attention(transformer: Any, name: str) -> None:
    """Set the backend on the denoiser, `native` included.

    diffusers' reset_attention_backend() leaves the process-wide active backend that
    set_attention_backend() changed, so a `native` cell after a `math` cell would really run math:
    the backend is always set explicitly instead.
    """
    transformer.set_attention_backend(ATTENTION[name].backend)


def reset_attention(transformer: Any) -> None:
    apply_attention(transformer, "native")
