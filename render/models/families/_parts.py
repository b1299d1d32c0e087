"""Pieces the tiny twins share: a byte-level tokenizer with no merges, built offline, and the twins' seed.

Every byte is one token, so any prompt tokenizes without an unknown token and the vocabulary stays
at ~260 entries (the text encoders' embedding tables stay tiny). Special tokens are whole tokens.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

TWIN_SEED = 20261202  # torch seed every new twin's weights are drawn from (render/models/tiny.py keeps its own)


def byte_vocab(specials: list[str]) -> dict[str, int]:
    """The specials first (their ids are stable), then the 256 byte-level characters."""
    from tokenizers.pre_tokenizers import ByteLevel

    return {token: i for i, token in enumerate([*specials, *sorted(ByteLevel.alphabet())])}


def qwen2_tokenizer(specials: list[str], chat_template: str | None, max_length: int) -> Any:
    """A `Qwen2Tokenizer` (what Qwen-Image and Z-Image ship) over bytes; specials[0] is its end-of-text token."""
    from transformers import Qwen2Tokenizer

    tokenizer = Qwen2Tokenizer(vocab=byte_vocab(specials), merges=[], unk_token=specials[0], eos_token=specials[0],
                               pad_token=specials[0], extra_special_tokens=specials[1:], model_max_length=max_length)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    return tokenizer


@contextmanager
def seeded(seed: int = TWIN_SEED) -> Iterator[None]:
    """Draw weights from `seed` in a fixed order, leaving the global torch RNG as it was."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def flow_vae(latent_channels: int = 4) -> Any:
    """A two-level KL autoencoder (vae_scale_factor 2) like FLUX.1's and Z-Image's, at toy widths."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3, out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"), up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(8, 16), layers_per_block=1, latent_channels=latent_channels, norm_num_groups=4, sample_size=32,
        scaling_factor=0.3611, shift_factor=0.1159, use_quant_conv=False, use_post_quant_conv=False,
    )
