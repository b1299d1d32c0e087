"""Qwen-Image: QwenImagePipeline, an MMDiT over a Qwen2.5-VL text encoder and a Wan-style video autoencoder.

Guidance is true classifier-free guidance (`true_cfg_scale` with a negative prompt); the
`guidance_scale` argument is only for guidance-distilled checkpoints, which Qwen-Image is not.
"""

from __future__ import annotations

from typing import Any, Dict

from render.models.families import Family
from render.models.families._flow import flow_schedulers
from render.models.families._tokens import packed_image_prompt_text
from render.models.families._parts import qwen2_tokenizer, seeded
from render.models.twins import Twin

NEGATIVE_PROMPT = " "  # the model card's: CFG needs a negative prompt, and this one says nothing
_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>"]


def true_cfg(guidance: float) -> Dict[str, Any]:
    """The guidance knob is Qwen-Image's true CFG scale (1.0 or less: one pass, no guidance)."""
    return {"true_cfg_scale": guidance, "negative_prompt": NEGATIVE_PROMPT}


def build_twin() -> Any:
    """The tiny `QwenImagePipeline`: two MMDiT blocks, a two-layer Qwen2.5-VL, a two-level Qwen-Image VAE."""
    from diffusers import AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, QwenImagePipeline, QwenImageTransformer2DModel
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    tokenizer = qwen2_tokenizer(_SPECIALS, None, 1024)  # the pipeline formats its own template: no chat template
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in _SPECIALS}
    text = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
            "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"}, "rope_theta": 1e6,
            "vocab_size": len(tokenizer), "bos_token_id": None, "eos_token_id": ids["<|im_end|>"], "pad_token_id": 0}
    vision = {"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": 16}
    with seeded():
        text_encoder = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(
            text_config=text, vision_config=vision, vision_start_token_id=ids["<|vision_start|>"],
            vision_end_token_id=ids["<|vision_end|>"], image_token_id=ids["<|image_pad|>"],
        ))
        transformer = QwenImageTransformer2DModel(
            patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=2,
            joint_attention_dim=16, guidance_embeds=False, axes_dims_rope=(8, 4, 4),
        )
        vae = AutoencoderKLQwenImage(base_dim=24, z_dim=4, dim_mult=[1, 2], num_res_blocks=1, temperal_downsample=[False],
                                     latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    # Qwen-Image's scheduler config: dynamic exponential shifting.
    scheduler = FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=0.9,
        base_image_seq_len=256, max_image_seq_len=8192, shift_terminal=0.02, time_shift_type="exponential",
    )
    return QwenImagePipeline(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer)


FAMILY = Family(
    name="qwen-image",
    pipelines=("QwenImagePipeline",),
    schedulers=flow_schedulers("euler", "euler-karras", "unipc"),  # its pipeline passes custom sigmas: no dpmpp-2m, deis
    guidance=true_cfg,
    refused_caches={
        "fastercache": "its hook fails on QwenImageTransformer2DModel's outputs in diffusers 0.42 (IndexError)",
        "pab": "it reuses attention states across the cond and uncond passes, whose text lengths differ under true CFG",
    },
    twin=Twin("tiny-qwen-image", "v1", build_twin),
    split_sequences=packed_image_prompt_text,
)
