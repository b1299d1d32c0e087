"""Z-Image (Tongyi-MAI Z-Image-Turbo): ZImagePipeline, a single-stream DiT over a Qwen3 text encoder.

Its transformer is no diffusers CacheMixin, so it takes cache=none only (render.axes.caches says so
at preflight). Guidance is plain CFG through `guidance_scale` (the Turbo model runs at 0.0: none).
"""

from __future__ import annotations

from typing import Any

from render.models.families import Family
from render.models.families._flow import flow_schedulers
from render.models.families._parts import flow_vae, qwen2_tokenizer, seeded
from render.models.twins import Twin

TWIN_MAX_LENGTH = 512  # the tokenizer's model_max_length; the twin's YAML asks for fewer tokens
_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# The pipeline formats each prompt with apply_chat_template(add_generation_prompt=True, enable_thinking=True):
# Qwen3's template, shortened to what a text-only user turn uses.
_CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_twin() -> Any:
    """The tiny `ZImagePipeline`: Z-Image's classes (two main and one refiner block each side), Qwen3 at width 16."""
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, ZImagePipeline, ZImageTransformer2DModel
    from transformers import Qwen3Config, Qwen3Model

    tokenizer = qwen2_tokenizer(_SPECIALS, _CHAT_TEMPLATE, TWIN_MAX_LENGTH)
    with seeded():
        text_encoder = Qwen3Model(Qwen3Config(
            vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=2,  # it reads hidden_states[-2]
            num_attention_heads=2, num_key_value_heads=2, head_dim=8, max_position_embeddings=TWIN_MAX_LENGTH,
            bos_token_id=None, eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"), pad_token_id=0,
        ))
        transformer: Any = ZImageTransformer2DModel(
            all_patch_size=(2,), all_f_patch_size=(1,), in_channels=4, dim=32, n_layers=2, n_refiner_layers=1, n_heads=2,
            n_kv_heads=2, norm_eps=1e-5, qk_norm=True, cap_feat_dim=16, rope_theta=256.0, t_scale=1000.0,
            axes_dims=[8, 4, 4], axes_lens=[TWIN_MAX_LENGTH, 32, 32],
        )
        with torch.no_grad():  # initialised with torch.empty: fixed, so every build is the same
            transformer.x_pad_token.fill_(1.0)
            transformer.cap_pad_token.fill_(1.0)
        vae = flow_vae(latent_channels=4)
    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)  # Z-Image-Turbo's
    return ZImagePipeline(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer)


FAMILY = Family(
    name="z-image",
    pipelines=("ZImagePipeline",),
    # its pipeline passes custom sigmas (no dpmpp-2m, deis) as a list, which UniPC's flow shift cannot multiply
    schedulers=flow_schedulers("euler", "euler-karras"),
    twin=Twin("tiny-z-image", "v1", build_twin),
)
