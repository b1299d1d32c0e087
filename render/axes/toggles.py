"""On/off knobs applied per cell and undone before the next (top-level: `vae_tiling=true` ...).

- `vae_tiling`: the VAE decodes (and encodes) in overlapping tiles (`vae.enable_tiling`): less
  memory at large sizes; images smaller than a tile are decoded whole.
- `vae_slicing`: the VAE decodes a batch one image at a time (`vae.enable_slicing`).
- `fuse_qkv`: the denoiser's query/key/value projections become one matmul
  (`fuse_qkv_projections`); `unfuse_qkv_projections` restores the separate ones, whose weights
  were kept.
- `channels_last`: the convolution-heavy components (VAE, UNet) in channels-last memory layout;
  undone by converting back to the contiguous layout (the values are the same, only the layout).

Each toggle is one `Toggle` axis; a new one is a subclass here (and no YAML: it is a top-level knob).
"""

from __future__ import annotations

from typing import Any

from render.axes.base import Axis, Record, Target, Where
from render.axes.errors import AxisError
from render.compose.spec import Cell

CONV_COMPONENTS = ("vae", "unet")  # the components channels_last is applied to


class Toggle(Axis):
    """A top-level bool: `enable` when true, `disable` always before the next cell (a no-op when off)."""

    default = False

    def key(self, node: Any) -> Any:
        if not isinstance(node, bool):
            raise AxisError(f"{self.name}={node}: must be true or false")
        return node

    def anchor_key(self, anchor: Any) -> Any:
        return False

    def override(self, value: Any) -> str:
        return f"{self.name}={str(bool(value)).lower()}"

    def label(self, value: Any) -> str:
        return self.name if value else ""

    def apply(self, value: Any, target: Target) -> Record:
        if value:
            self.enable(target.pipe, target.denoiser)
        return {}

    def reset(self, target: Target) -> None:
        self.disable(target.pipe, target.denoiser)

    def enable(self, pipe: Any, denoiser: Any) -> None:
        raise NotImplementedError

    def disable(self, pipe: Any, denoiser: Any) -> None:
        raise NotImplementedError


class _VaeToggle(Toggle):
    def check(self, value: Any, cell: Cell, where: Where) -> None:
        if value and "vae" not in where.pipeline.components:
            raise AxisError(f"{self.name}=true: {where.pipeline.cls.__name__} has no VAE (it denoises pixels); use {self.name}=false")


class VaeTiling(_VaeToggle):
    name = "vae_tiling"
    help = "decode in tiles (pipelines with a VAE)"

    def enable(self, pipe: Any, denoiser: Any) -> None:
        pipe.vae.enable_tiling()

    def disable(self, pipe: Any, denoiser: Any) -> None:
        if getattr(pipe, "vae", None) is not None:
            pipe.vae.disable_tiling()


class VaeSlicing(_VaeToggle):
    name = "vae_slicing"
    help = "decode a batch one image at a time (pipelines with a VAE)"

    def enable(self, pipe: Any, denoiser: Any) -> None:
        pipe.vae.enable_slicing()

    def disable(self, pipe: Any, denoiser: Any) -> None:
        if getattr(pipe, "vae", None) is not None:
            pipe.vae.disable_slicing()


class FuseQkv(Toggle):
    name = "fuse_qkv"
    help = "fuse the denoiser's q/k/v projections into one matmul"

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        quant, offload = cell.axes["quant"]["name"], cell.axes["offload"]["name"]
        if value and quant != "none":
            raise AxisError(f"fuse_qkv=true with quant={quant}: fusing concatenates the projection weights, which quantized "
                            "weights cannot take; use one of the two")
        if value and offload in ("layerwise", "group"):
            raise AxisError(f"fuse_qkv=true with offload={offload}: the fused projections are created after the offload "
                            "hooks and would escape them; use one of the two")

    def enable(self, pipe: Any, denoiser: Any) -> None:
        denoiser.fuse_qkv_projections()

    def disable(self, pipe: Any, denoiser: Any) -> None:
        if any(getattr(m, "fused_projections", False) for m in denoiser.modules()):
            denoiser.unfuse_qkv_projections()


class ChannelsLast(Toggle):
    name = "channels_last"
    help = "channels-last memory layout for the VAE / UNet"

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        if value and not set(where.pipeline.components).intersection(CONV_COMPONENTS):
            raise AxisError(f"channels_last=true: {where.pipeline.cls.__name__} has no VAE or UNet, whose convolutions the "
                            "layout is for; it would change nothing: use channels_last=false")

    def enable(self, pipe: Any, denoiser: Any) -> None:
        import torch

        for component in _conv_components(pipe):
            component.to(memory_format=torch.channels_last)

    def disable(self, pipe: Any, denoiser: Any) -> None:
        import torch

        for component in _conv_components(pipe):
            component.to(memory_format=torch.contiguous_format)


def _conv_components(pipe: Any) -> list[Any]:
    return [c for c in (getattr(pipe, n, None) for n in CONV_COMPONENTS) if c is not None]


TOGGLES = (VaeTiling(), VaeSlicing(), FuseQkv(), ChannelsLast())
