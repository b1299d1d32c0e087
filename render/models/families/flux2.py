"""FLUX.2 (dev): Flux2Pipeline, dual- and single-stream MMDiT blocks over a Mistral Small 3 text encoder.

The pipeline takes the text encoder's hidden states at layers 10, 20 and 30 (stacked), so even the
twin's text encoder has 31 layers (each 16 wide). Guidance is the distilled guidance embedding
(`guidance_scale`).
"""

from __future__ import annotations

from typing import Any

from render.models.families import Family
from render.models.families._flow import FLOW_SCHEDULERS
from render.models.families._parts import byte_vocab, seeded
from render.models.twins import Twin

_SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "[IMG]", "[IMG_BREAK]", "[IMG_END]", "[INST]", "[/INST]",
             "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"]
# Mistral Small 3's chat format for the text parts of each message (the pipeline sends a system and a user turn).
_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% set text = m.content | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') %}"
    "{% if m.role == 'system' %}[SYSTEM_PROMPT]{{ text }}[/SYSTEM_PROMPT]"
    "{% elif m.role == 'user' %}[INST]{{ text }}[/INST]{% else %}{{ text }}{{ eos_token }}{% endif %}{% endfor %}"
)
_HIDDEN_LAYERS = 31  # Flux2Pipeline reads hidden_states[10], [20] and [30]
_TEXT_WIDTH = 16


def _tokenizer() -> Any:
    """A byte-level Mistral-style tokenizer with its chat template.

    FLUX.2-dev ships a PixtralProcessor, which needs torchvision for its image half; a text-to-image
    call only uses its `apply_chat_template`, which the tokenizer itself has, so the twin ships the tokenizer.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(vocab=byte_vocab(_SPECIALS), merges=[], unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                        pad_token="<pad>", extra_special_tokens=_SPECIALS[4:], model_max_length=1024)
    tokenizer.chat_template = _CHAT_TEMPLATE
    return tokenizer


def build_twin() -> Any:
    """The tiny `Flux2Pipeline`: two dual- and two single-stream blocks, a 31-layer Mistral 3 of width 16, a KL VAE."""
    from diffusers import AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler, Flux2Pipeline, Flux2Transformer2DModel
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration

    tokenizer = _tokenizer()
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in ("<s>", "</s>", "<pad>", "[IMG]")}
    text = {"model_type": "mistral", "vocab_size": len(tokenizer), "hidden_size": _TEXT_WIDTH, "intermediate_size": 32,
            "max_position_embeddings": 1024, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
            "num_hidden_layers": _HIDDEN_LAYERS, "rms_norm_eps": 1e-5, "rope_theta": 1e9, "sliding_window": None,
            "bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<pad>"]}
    vision = {"model_type": "pixtral", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 4, "head_dim": 4,
              "intermediate_size": 32, "image_size": 32, "patch_size": 16, "num_channels": 3}
    with seeded():
        text_encoder = Mistral3ForConditionalGeneration(Mistral3Config(
            text_config=text, vision_config=vision, image_token_index=ids["[IMG]"], spatial_merge_size=1,
        ))
        transformer = Flux2Transformer2DModel(
            patch_size=1, in_channels=16, num_layers=2, num_single_layers=2, attention_head_dim=16, num_attention_heads=2,
            joint_attention_dim=3 * _TEXT_WIDTH,  # the three stacked layers
            timestep_guidance_channels=256, axes_dims_rope=(4, 4, 4, 4),
        )
        vae = AutoencoderKLFlux2(
            sample_size=32, in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16), layers_per_block=1, latent_channels=4,
            norm_num_groups=4, use_quant_conv=False, use_post_quant_conv=False,
        )
    # FLUX.2-dev's scheduler config (the pipeline computes its own shift, mu, from the image size and steps).
    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=True,
                                                base_shift=0.5, max_shift=1.15, base_image_seq_len=256, max_image_seq_len=4096)
    return Flux2Pipeline(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer)


FAMILY = Family(
    name="flux2",
    pipelines=("Flux2Pipeline",),
    schedulers=FLOW_SCHEDULERS,
    refused_caches={name: "Flux2Pipeline calls its transformer outside a cache_context, which its hooks need"
                    for name in ("fbcache", "taylorseer")},
    twin=Twin("tiny-flux2", "v1", build_twin),
)
