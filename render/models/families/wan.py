"""Wan 2.1 text-to-video: WanPipeline, a 3D DiT over a UMT5 text encoder and a causal video autoencoder.

Its samples are clips (`frames`): `model.num_frames` (k*4+1: the VAE keeps frame 1 and compresses the rest 4x in
time) at `model.fps`, written as one animated PNG (render.run.apng) and scored frame by frame (assess.metrics.frames).
"""

from __future__ import annotations

from typing import Any

from render.models.families import Family
from render.models.families._flow import FLOW_SCHEDULERS
from render.models.families._tokens import patched_video
from render.models.families._parts import byte_vocab, seeded
from render.models.twins import Twin

_SPECIALS = ["<pad>", "</s>", "<unk>"]  # T5's, with T5's ids


def _tokenizer() -> Any:
    """A byte-level tokenizer in place of UMT5's SentencePiece one (the pipeline pads it to max_sequence_length)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(vocab=byte_vocab(_SPECIALS), merges=[], unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=512)


def build_twin() -> Any:
    """The tiny `WanPipeline`: two 3D DiT blocks, a two-layer UMT5, a four-level Wan VAE of base width 3."""
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanPipeline, WanTransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    tokenizer = _tokenizer()
    with seeded():
        text_encoder = UMT5EncoderModel(UMT5Config(
            vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=32, num_layers=2, num_heads=4,
            relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
        ))
        transformer = WanTransformer3DModel(
            patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
            text_dim=32, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
            rope_max_seq_len=32,
        )
        vae = AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                               temperal_downsample=[False, True, True])
    # Wan 2.1 T2V's scheduler config: UniPC over flow sigmas.
    scheduler = UniPCMultistepScheduler(num_train_timesteps=1000, prediction_type="flow_prediction", use_flow_sigmas=True,
                                        flow_shift=3.0)
    return WanPipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=scheduler, transformer=transformer)


FAMILY = Family(
    name="wan",
    pipelines=("WanPipeline",),
    schedulers=FLOW_SCHEDULERS,
    clips=True,
    frame_step=4,
    refused_caches={
        "fastercache": "its hook fails on WanTransformer3DModel's outputs in diffusers 0.42 (IndexError)",
        "taylorseer": "its default module patterns match no module of WanTransformer3DModel: it would hook nothing",
    },
    twin=Twin("tiny-wan", "v1", build_twin),
    split_sequences=patched_video,
)
