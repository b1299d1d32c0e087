"""The embedded tiny default model: a random-weight Flux text-to-image pipeline built offline.

It has the real `FluxPipeline` structure (two dual-stream and two single-stream transformer blocks,
CLIP and T5 text encoders with their tokenizers, a KL autoencoder, the flow-match Euler scheduler)
at toy sizes, so every code path of a sweep runs on a laptop CPU in well under a second per sample.
Its images are noise-like (the weights are random), but they are deterministic and they change
when any axis of a cell changes, which is all a test or a smoke sweep needs.

It is the flux family's tiny twin (render.models.families.flux): built once into `tiny_model_dir()`
and always loaded back with `FluxPipeline.from_pretrained(folder)`, the same path a hub model takes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from render.models.twins import Twin, default_cache_root

__all__ = ["TINY_CALL_KWARGS", "TINY_VERSION", "TWIN", "build_tiny_pipeline", "default_cache_root", "ensure_tiny", "tiny_model_dir"]

TINY_VERSION = "v1"  # bump when the architecture or the weights change

TINY_SEED = 20261130  # torch seed the weights are drawn from
TINY_GATE_GAIN = 8.0  # scale of the transformer blocks' AdaLN gates over their random initialisation

# Keyword arguments the tiny pipeline is meant to be called with (plus prompt, steps, generator).
# height/width must be multiples of 4 (vae_scale_factor 2, times 2 for Flux's 2x2 latent packing).
# The tokenizers work per character, so max_sequence_length is about the prompt characters T5 sees;
# longer prompts are truncated (with a diffusers warning).
TINY_CALL_KWARGS: dict[str, Any] = {
    "height": 32,
    "width": 32,
    "max_sequence_length": 64,
    "guidance_scale": 3.5,
}

TINY_T5_MAX_LENGTH = 512  # T5 tokenizer's model_max_length (FLUX.1-dev's)
TINY_CLIP_MAX_LENGTH = 77  # CLIP tokenizer's model_max_length (the real CLIP's); the pipeline pads to it

_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"-()/&+"  # CLIP lowercases its input
_CHARS_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # T5 does not

# The flux family's twin (`model=tiny`); the builder is looked up at call time, so a test may replace it.
TWIN = Twin("tiny", TINY_VERSION, lambda: build_tiny_pipeline())


def tiny_model_dir(cache_root: Path | None = None) -> Path:
    """The tiny model's folder: `<cache root>/models/tiny-<version>` (render.models.twins)."""
    return TWIN.folder(cache_root)


def ensure_tiny(cache_root: Path | None = None) -> Path:
    """Build the tiny pipeline once and `save_pretrained` it; return its folder (render.models.twins.ensure_built)."""
    return TWIN.ensure(cache_root)


def build_tiny_pipeline():
    """Build the tiny `FluxPipeline` in memory, with weights drawn from `TINY_SEED`.

    The global torch RNG is left as it was.
    """
    import torch
    from diffusers import FluxPipeline

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY_SEED)
        # Built in a fixed order from one seed, so the weights are identical on every build.
        text_encoder = _clip_text_encoder()
        text_encoder_2 = _t5_encoder()
        transformer = _transformer()
        vae = _vae()
    return FluxPipeline(
        scheduler=_scheduler(),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=_clip_tokenizer(),
        text_encoder_2=text_encoder_2,
        tokenizer_2=_t5_tokenizer(),
        transformer=transformer,
    )


def _clip_tokenizer():
    from transformers import CLIPTokenizer

    # A character-level byte-level BPE vocabulary with no merges: every word becomes its letters,
    # the last one with CLIP's "</w>" end-of-word suffix; anything else is <|endoftext|> (unk).
    specials = ["<|startoftext|>", "<|endoftext|>"]
    pieces = specials + list(_CHARS) + [c + "</w>" for c in _CHARS]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=TINY_CLIP_MAX_LENGTH)


def _t5_tokenizer():
    from transformers import T5Tokenizer

    # A Unigram vocabulary: T5's three specials, the word-start marker, then each character
    # alone and word-initial ("▁a"), all equally likely.
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    chars = _CHARS + _CHARS_UPPER
    pieces += [(c, -3.0) for c in chars] + [("▁" + c, -3.0) for c in chars]
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=TINY_T5_MAX_LENGTH)


def _clip_text_encoder():
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(
        vocab_size=2 + 2 * len(_CHARS),
        hidden_size=32,
        intermediate_size=37,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=TINY_CLIP_MAX_LENGTH,
        projection_dim=32,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
    )
    return CLIPTextModel(config).eval()


def _t5_encoder():
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=4 + 2 * len(_CHARS + _CHARS_UPPER),
        d_model=32,
        d_kv=8,
        d_ff=37,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    return T5EncoderModel(config).eval()


def _transformer():
    from diffusers import FluxTransformer2DModel

    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=16,  # 4 latent channels x 2x2 packing
        num_layers=2,  # dual-stream blocks: the head of first-block cache and friends
        num_single_layers=2,  # single-stream blocks: the tail
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,  # T5 d_model
        pooled_projection_dim=32,  # CLIP hidden size
        guidance_embeds=True,  # like FLUX.1-dev, so the guidance axis changes pixels
        axes_dims_rope=(4, 4, 8),  # sums to attention_head_dim
    )
    _amplify_gates(transformer, TINY_GATE_GAIN)
    return transformer.eval()


def _amplify_gates(transformer, gain: float) -> None:
    """Scale the AdaLN gates of every block by `gain`, so the blocks' residuals weigh like a trained model's.

    At default initialisation each block adds only ~5% to the residual stream, so skipping or
    approximating blocks (every cache method) barely moves the pixels. The gates are the
    modulation chunks that multiply a block's attention and MLP outputs: chunks 2 and 5 of a
    dual-stream block's six, chunk 2 of a single-stream block's three.
    """
    import torch

    dim = transformer.inner_dim
    modulations: list[tuple[Any, tuple[int, ...]]] = [(block.norm1.linear, (2, 5)) for block in transformer.transformer_blocks]
    modulations += [(block.norm1_context.linear, (2, 5)) for block in transformer.transformer_blocks]
    modulations += [(block.norm.linear, (2,)) for block in transformer.single_transformer_blocks]
    with torch.no_grad():
        for linear, chunks in modulations:
            for chunk in chunks:
                linear.weight[chunk * dim : (chunk + 1) * dim].mul_(gain)
                linear.bias[chunk * dim : (chunk + 1) * dim].mul_(gain)


def _vae():
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(8, 16),  # two levels: vae_scale_factor 2
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=4,
        sample_size=32,
        scaling_factor=0.3611,  # FLUX.1's values
        shift_factor=0.1159,
        use_quant_conv=False,
        use_post_quant_conv=False,
    ).eval()


def _scheduler():
    from diffusers import FlowMatchEulerDiscreteScheduler

    # FLUX.1-dev's scheduler config.
    return FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=1000,
        shift=3.0,
        use_dynamic_shifting=True,
        base_shift=0.5,
        max_shift=1.15,
        base_image_seq_len=256,
        max_image_seq_len=4096,
    )
