"""On/off knobs applied per cell and undone before the next (top-level: `vae_tiling=true` ...).

- `vae_tiling`: the VAE decodes (and encodes) in overlapping tiles (`vae.enable_tiling`): less
  memory at large sizes; images smaller than a tile are decoded whole.
- `vae_slicing`: the VAE decodes a batch one image at a time (`vae.enable_slicing`).
- `fuse_qkv`: the denoiser's query/key/value projections become one matmul
  (`fuse_qkv_projections`); `unfuse_qkv_projections` restores the separate ones, whose weights
  were kept.
- `channels_last`: the convolution-heavy components (VAE, UNet) in channels-last memory layout;
  undone by converting back to the contiguous layout (the values are the same, only the layout).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable

from render.axes.errors import AxisError

TOGGLES = ("vae_tiling", "vae_slicing", "fuse_qkv", "channels_last")
CONV_COMPONENTS = ("vae", "unet")  # the components channels_last is applied to


def apply_toggles(pipe: Any, denoiser: Any, toggles: Dict[str, bool]) -> None:
    import torch

    if toggles.get("vae_tiling"):
        pipe.vae.enable_tiling()
    if toggles.get("vae_slicing"):
        pipe.vae.enable_slicing()
    if toggles.get("fuse_qkv"):
        denoiser.fuse_qkv_projections()
    if toggles.get("channels_last"):
        for component in _conv_components(pipe):
            component.to(memory_format=torch.channels_last)


def reset_toggles(pipe: Any, denoiser: Any) -> None:
    """Every toggle off (each undo is a no-op when its toggle was off)."""
    import torch

    vae = getattr(pipe, "vae", None)
    if vae is not None:
        vae.disable_tiling()
        vae.disable_slicing()
    if any(getattr(m, "fused_projections", False) for m in denoiser.modules()):
        denoiser.unfuse_qkv_projections()
    for component in _conv_components(pipe):
        component.to(memory_format=torch.contiguous_format)


def _conv_components(pipe: Any) -> list[Any]:
    return [c for c in (getattr(pipe, n, None) for n in CONV_COMPONENTS) if c is not None]


def check_toggles(toggles: Dict[str, bool], *, components: Iterable[str] | None, pipeline: str, quant: str, offload: str) -> None:
    """ValueError naming a toggle the pipeline cannot take, or a combination that cannot run."""
    on = [t for t in TOGGLES if toggles.get(t)]
    if components is not None:
        names = set(components)
        for toggle in ("vae_tiling", "vae_slicing"):
            if toggle in on and "vae" not in names:
                raise AxisError(f"{toggle}=true: {pipeline} has no VAE (it denoises pixels); use {toggle}=false")
        if "channels_last" in on and not names.intersection(CONV_COMPONENTS):
            raise AxisError(f"channels_last=true: {pipeline} has no VAE or UNet, whose convolutions the layout is for; "
                             "it would change nothing: use channels_last=false")
    if "fuse_qkv" in on and quant != "none":
        raise AxisError(f"fuse_qkv=true with quant={quant}: fusing concatenates the projection weights, which quantized "
                         "weights cannot take; use one of the two")
    if "fuse_qkv" in on and offload in ("layerwise", "group"):
        raise AxisError(f"fuse_qkv=true with offload={offload}: the fused projections are created after the offload "
                         "hooks and would escape them; use one of the two")
