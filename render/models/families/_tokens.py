"""The sequences context parallelism splits, per family, from the model folder's configs.

diffusers shards each sequence of a denoiser's `_cp_plan` equally over the ranks (`EquipartitionSharder`), so a
width-N Ulysses or ring cell needs N to divide every one of them. Each function here derives a sample's sequence
lengths the way its pipeline derives its latents (`vae_scale_factor`), so preflight refuses at once what would
fail at the first denoiser call. A split sequence whose length follows each prompt is None: diffusers does not pad
it, so a split over N ranks fails on every prompt N does not divide, and preflight refuses context parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional


DEFAULT_TEXT_TOKENS = 512  # the FLUX pipelines' max_sequence_length when the model names none


@dataclass(frozen=True)
class Shape:
    """What decides a sample's sequences: its size, its clip length, its padded text length, its model's configs."""

    height: int
    width: int
    num_frames: Optional[int]
    text_tokens: Optional[int]  # model.max_sequence_length: the padded prompt, where the pipeline pads it (None: 512)
    transformer: Mapping[str, Any]
    vae: Mapping[str, Any]


def _vae_scale(vae: Mapping[str, Any]) -> int:
    """Pixels per latent, as the pipelines compute it: FLUX-style VAEs halve per level after the first, Wan-style
    ones (Qwen-Image's, Wan's) once per entry of `temperal_downsample`."""
    if "temperal_downsample" in vae:
        return 2 ** len(vae["temperal_downsample"])
    return 2 ** (len(vae.get("block_out_channels") or [0] * 4) - 1)


def packed_image(shape: Shape) -> dict[str, Optional[int]]:
    """FLUX.1, FLUX.2: latents packed 2x2 into tokens, and the text padded to max_sequence_length; both split."""
    side = _vae_scale(shape.vae) * 2
    return {"image": (shape.height // side) * (shape.width // side), "text": shape.text_tokens or DEFAULT_TEXT_TOKENS}


def packed_image_prompt_text(shape: Shape) -> dict[str, Optional[int]]:
    """Qwen-Image: latents packed 2x2; its text is as long as the prompt (the pipeline drops the padding)."""
    return {**packed_image(shape), "text": None}


def patched_video(shape: Shape) -> dict[str, Optional[int]]:
    """Wan: the video latent (the first frame, then 2**sum(temperal_downsample) frames per latent) cut into patches
    of patch_size (time, height, width); only these tokens are split, not the text."""
    scale = _vae_scale(shape.vae)
    per_latent = 2 ** sum(bool(d) for d in shape.vae.get("temperal_downsample") or ())
    frames = ((shape.num_frames or 1) - 1) // per_latent + 1
    pt, ph, pw = shape.transformer.get("patch_size") or (1, 2, 2)
    return {"video": (frames // pt) * (shape.height // scale // ph) * (shape.width // scale // pw)}
