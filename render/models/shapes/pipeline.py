"""The shapes text-to-image pipeline: a pixel-space `FluxTransformer2DModel` with word embeddings.

The image itself (RGB in [-1, 1]) is the latent: it is cut into `patch` x `patch` patches, each
patch one token of `3 * patch**2` values, like Flux packs its 2x2 latent patches. The transformer
is diffusers' own `FluxTransformer2DModel`, so every diffusers cache hook (first-block cache, PAB,
FasterCache, TaylorSeer, MagCache) and attention backend applies to it. It predicts the
rectified-flow velocity (noise - image); `scheduler.step` integrates it from pure noise (sigma 1)
to the image (sigma 0).

Guidance is true classifier-free guidance: with `guidance_scale > 1` the transformer runs once on
the caption (cache context "cond") and once on the empty caption ("uncond") per step, and the
prediction is uncond + scale * (cond - uncond). The model was trained with caption dropout for it.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
# The defining modules, not `diffusers`' lazy top level: type checkers resolve that to the
# placeholder classes diffusers declares for a missing torch.
from diffusers.models.transformers.transformer_flux import FluxTransformer2DModel
from diffusers.pipelines.pipeline_utils import DiffusionPipeline
from diffusers.schedulers.scheduling_flow_match_euler_discrete import FlowMatchEulerDiscreteScheduler
from diffusers.utils import BaseOutput
from diffusers.utils.torch_utils import randn_tensor

from render.models.shapes.data import IMAGE_SIZE, vocabulary
from render.models.shapes.text_encoder import ShapesTextEncoder


@dataclass
class ShapesPipelineOutput(BaseOutput):
    images: Any  # np.ndarray (B x H x W x 3, floats in [0, 1]), a list of PIL images, or a B x 3 x H x W tensor


@dataclass(frozen=True)
class ShapesArch:
    """The sizes of an untrained shapes pipeline."""

    patch: int = 4  # pixels per patch side: 32x32 images become (32 / patch)**2 tokens
    num_layers: int = 2  # dual-stream (text | image) Flux blocks
    num_single_layers: int = 4  # single-stream Flux blocks
    num_heads: int = 5
    head_dim: int = 32  # width = num_heads * head_dim
    text_dim: int = 64  # word embedding size
    max_length: int = 8  # caption tokens (the grammar's captions have 6 words)
    shift: float = 1.0  # the flow-match scheduler's sigma shift


def build_shapes_pipeline(arch: ShapesArch, seed: int = 0) -> ShapesPipeline:
    """An untrained pipeline with weights drawn from `seed` (the global torch RNG is left as it was)."""
    axis = (3 * arch.head_dim // 8) // 2 * 2  # rope dims of the row and the column axes (even)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        transformer = FluxTransformer2DModel(
            patch_size=1,  # the pipeline packs the pixels into patches itself
            in_channels=3 * arch.patch**2,
            num_layers=arch.num_layers,
            num_single_layers=arch.num_single_layers,
            attention_head_dim=arch.head_dim,
            num_attention_heads=arch.num_heads,
            joint_attention_dim=arch.text_dim,
            pooled_projection_dim=arch.text_dim,
            guidance_embeds=False,
            # rope axes (text position, row, column); the text axis is unused: txt_ids are zero
            axes_dims_rope=(arch.head_dim - 2 * axis, axis, axis),
        )
        text_encoder = ShapesTextEncoder(vocabulary=vocabulary(), dim=arch.text_dim, max_length=arch.max_length)
    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=arch.shift, use_dynamic_shifting=False)
    return ShapesPipeline(transformer=transformer, scheduler=scheduler, text_encoder=text_encoder)


def patchify(images: torch.Tensor, patch: int) -> torch.Tensor:
    """B x 3 x H x W -> B x (H/patch * W/patch) x (3 * patch**2), in Flux's packing order."""
    b, c, h, w = images.shape
    x = images.view(b, c, h // patch, patch, w // patch, patch).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // patch) * (w // patch), c * patch * patch)


def unpatchify(tokens: torch.Tensor, patch: int, height: int, width: int) -> torch.Tensor:
    """The inverse of `patchify`."""
    b = tokens.shape[0]
    x = tokens.view(b, height // patch, width // patch, 3, patch, patch).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, 3, height, width)


def image_ids(height: int, width: int, patch: int, device: torch.device | str) -> torch.Tensor:
    """Rope positions of the image tokens: (0, row, column) per patch, like Flux's latent image ids."""
    rows, cols = torch.meshgrid(torch.arange(height // patch), torch.arange(width // patch), indexing="ij")
    ids = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1).reshape(-1, 3)
    return ids.to(device=device, dtype=torch.float32)


def patch_size(transformer: FluxTransformer2DModel) -> int:
    return math.isqrt(transformer.config["in_channels"] // 3)


class ShapesPipeline(DiffusionPipeline):
    """Captions such as "a blue square on the left" -> 32x32 images (other sizes: multiples of the patch)."""

    model_cpu_offload_seq = "text_encoder->transformer"  # type: ignore[assignment]  # diffusers declares it as a bare None
    # Runs the transformer once per guidance branch (no batched unconditional half), like Flux pipelines.
    runs_guidance_branches_separately = True

    def __init__(
        self,
        transformer: FluxTransformer2DModel,
        scheduler: FlowMatchEulerDiscreteScheduler,
        text_encoder: ShapesTextEncoder,
    ) -> None:
        super().__init__()
        self.register_modules(transformer=transformer, scheduler=scheduler, text_encoder=text_encoder)
        self._current_timestep: torch.Tensor | None = None

    @property
    def current_timestep(self) -> torch.Tensor | None:
        """The timestep (0-1000 scale) being denoised, for cache callbacks; None outside a call."""
        return self._current_timestep

    @property
    def patch(self) -> int:
        return patch_size(self.transformer)

    def encode_prompt(self, prompts: list[str], max_sequence_length: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(token embeddings B x L x dim, pooled B x dim) in the transformer's dtype."""
        hidden, pooled = self.text_encoder(self.text_encoder.tokenize(prompts, max_sequence_length))
        return hidden.to(self.transformer.dtype), pooled.to(self.transformer.dtype)

    def denoise(self, x: torch.Tensor, timestep: torch.Tensor, hidden: torch.Tensor, pooled: torch.Tensor,
                img_ids: torch.Tensor) -> torch.Tensor:
        """The transformer's velocity prediction for tokens `x` at `timestep` (sigma, 0-1)."""
        txt_ids = torch.zeros(hidden.shape[1], 3, device=x.device, dtype=img_ids.dtype)
        return self.transformer(hidden_states=x, timestep=timestep, pooled_projections=pooled,
                                encoder_hidden_states=hidden, txt_ids=txt_ids, img_ids=img_ids, return_dict=False)[0]

    def set_timesteps(self, num_inference_steps: int, device: torch.device | str, image_seq_len: int) -> torch.Tensor:
        """Give the scheduler its timesteps, the way each flow-matching scheduler takes them.

        Schedulers that accept custom sigmas get Flux's linear ones (1 -> 1/steps); those built with
        `use_flow_sigmas` (DPM-Solver++, UniPC, DEIS) compute their own from the step count; `mu`
        is passed only to a scheduler with dynamic shifting.
        """
        scheduler = self.scheduler
        kwargs: dict[str, Any] = {}
        if scheduler.config.get("use_dynamic_shifting", False):
            kwargs["mu"] = _dynamic_shift_mu(image_seq_len, scheduler.config)
        accepts_sigmas = "sigmas" in inspect.signature(scheduler.set_timesteps).parameters
        if accepts_sigmas and not scheduler.config.get("use_flow_sigmas", False):
            sigmas = np.linspace(1.0, 1.0 / num_inference_steps, num_inference_steps)
            scheduler.set_timesteps(sigmas=sigmas, device=device, **kwargs)
        else:
            scheduler.set_timesteps(num_inference_steps=num_inference_steps, device=device, **kwargs)
        return scheduler.timesteps

    @torch.no_grad()
    def __call__(
        self,
        prompt: str | list[str],
        num_inference_steps: int = 28,
        guidance_scale: float = 2.0,
        height: int | None = None,
        width: int | None = None,
        generator: torch.Generator | list[torch.Generator] | None = None,
        negative_prompt: str | list[str] | None = None,
        latents: torch.Tensor | None = None,
        output_type: str = "pil",
        return_dict: bool = True,
        max_sequence_length: int | None = None,
    ) -> ShapesPipelineOutput | tuple:
        """Render one image per prompt.

        `negative_prompt` (default: the empty caption) is the unconditional branch of guidance;
        `max_sequence_length` cuts captions to that many words (default: the encoder's max_length);
        `latents` (B x 3 x H x W) replace the initial noise; `output_type` is "np", "pil" or "pt".
        """
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        height, width = height or IMAGE_SIZE, width or IMAGE_SIZE
        patch = self.patch
        if height % patch or width % patch:
            raise ValueError(f"height={height}, width={width}: both must be multiples of the patch size {patch}")
        if output_type not in ("np", "pil", "pt"):
            raise ValueError(f"output_type={output_type!r}: valid: np, pil, pt")
        device, dtype, batch = self._execution_device, self.transformer.dtype, len(prompts)
        guided = guidance_scale > 1.0
        hidden, pooled = self.encode_prompt(prompts, max_sequence_length)
        if guided:
            negatives = [negative_prompt or ""] * batch if not isinstance(negative_prompt, list) else negative_prompt
            neg_hidden, neg_pooled = self.encode_prompt(negatives, max_sequence_length)
        if latents is None:
            latents = randn_tensor((batch, 3, height, width), generator=generator, device=device, dtype=dtype)
        x = patchify(latents.to(device=device, dtype=dtype), patch)
        img_ids = image_ids(height, width, patch, device)
        timesteps = self.set_timesteps(num_inference_steps, device, x.shape[1])
        self.scheduler.set_begin_index(0)

        with self.progress_bar(total=len(timesteps)) as progress:
            for t in timesteps:
                self._current_timestep = t
                sigma = (t / self.scheduler.config.num_train_timesteps).expand(batch).to(dtype)
                with self.transformer.cache_context("cond"):
                    velocity = self.denoise(x, sigma, hidden, pooled, img_ids)
                if guided:
                    with self.transformer.cache_context("uncond"):
                        unconditional = self.denoise(x, sigma, neg_hidden, neg_pooled, img_ids)
                    velocity = unconditional + guidance_scale * (velocity - unconditional)
                x = self.scheduler.step(velocity, t, x, return_dict=False)[0].to(dtype)
                progress.update()
        self._current_timestep = None

        pixels = (unpatchify(x.float(), patch, height, width) / 2 + 0.5).clamp(0, 1)
        self.maybe_free_model_hooks()
        images: torch.Tensor | np.ndarray | list[Any] = pixels
        if output_type == "np":
            images = pixels.permute(0, 2, 3, 1).cpu().numpy()
        elif output_type == "pil":
            images = self.numpy_to_pil(pixels.permute(0, 2, 3, 1).cpu().numpy())
        if not return_dict:
            return (images,)
        return ShapesPipelineOutput(images=images)


def _dynamic_shift_mu(image_seq_len: int, config: Any) -> float:
    """Flux's resolution-dependent shift (diffusers' calculate_shift)."""
    base_len, max_len = config.get("base_image_seq_len", 256), config.get("max_image_seq_len", 4096)
    base_shift, max_shift = config.get("base_shift", 0.5), config.get("max_shift", 1.15)
    slope = (max_shift - base_shift) / (max_len - base_len)
    return image_seq_len * slope + base_shift - slope * base_len
