"""Human preference: ImageReward (Xu et al. 2023), per sample, on transformers' BLIP modules.

ImageReward is BLIP (a ViT-L/16 image tower at 224 px, a BERT text encoder that cross-attends to the
image) with an MLP head on the text encoder's first token, trained on human rankings; its score is
(head - 0.16717) / 1.03334, so 0 is an average image and higher is preferred. The reference package
(`image-reward`) needs libraries this project's transformers no longer has, so the same computation is
built here from transformers' `BlipVisionModel` and `BlipTextModel`, and the official checkpoint
(`ImageReward.pt` and `med_config.json`, the hub's THUDM/ImageReward) is loaded by renaming its keys
(BLIP's timm-style ViT names -> transformers'; the text encoder's names are the same). Every key the
modules need must be found in the checkpoint, else the metric is unavailable with the reason: a
checkpoint that does not fit never gives a number. The tokenizer is bert-base-uncased with BLIP's two
added tokens, unless the model folder holds a vocab.txt. `vision_config.json` in the folder, when
present, sets the image tower's shape (the checkpoint's own is ViT-L/16 at 224 px).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from assess.metrics.base import Outcome, SampleInput, SampleMetric
from assess.metrics.clipmodels import Loaded, MetricModel, config_of, how_to_load, is_local, not_at_hand
from render.compose.metric_registry import IMAGEREWARD

IMAGEREWARD_MODEL = MetricModel(IMAGEREWARD.name, "THUDM/ImageReward", "HYPERGRID_IMAGEREWARD_MODEL",
                                files=("ImageReward.pt", "med_config.json"), model_type=None)
CHECKPOINT, MED_CONFIG, VISION_CONFIG = "ImageReward.pt", "med_config.json", "vision_config.json"
TOKENIZER = "bert-base-uncased"
MEAN, STD = 0.16717362830052426, 1.0333394966054072  # the reference implementation's normalisation
MAX_TOKENS = 35
CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
VIT_L = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
         "image_size": 224, "patch_size": 16, "layer_norm_eps": 1e-6}
_VISION_RENAMES = [(r"^cls_token$", "embeddings.class_embedding"), (r"^pos_embed$", "embeddings.position_embedding"),
                   (r"^patch_embed\.proj\.", "embeddings.patch_embedding."), (r"^blocks\.", "encoder.layers."),
                   (r"\.norm1\.", ".layer_norm1."), (r"\.norm2\.", ".layer_norm2."), (r"\.attn\.proj\.", ".self_attn.projection."),
                   (r"\.attn\.qkv\.", ".self_attn.qkv."), (r"^norm\.", "post_layernorm.")]
_HEAD = {"mlp.layers.0": "0", "mlp.layers.2": "2", "mlp.layers.4": "4", "mlp.layers.6": "6", "mlp.layers.7": "7"}
_LOADED: dict[str, Loaded | str] = {}


def rename(key: str) -> str | None:
    """An official checkpoint key -> this module's key (None: a part the score does not use)."""
    if key.startswith("blip.visual_encoder."):
        out = key[len("blip.visual_encoder."):]
        for pattern, replacement in _VISION_RENAMES:
            out = re.sub(pattern, replacement, out)
        return f"vision.{out}"
    if key.startswith("blip.text_encoder."):
        return f"text.{key[len('blip.text_encoder.'):]}"
    layer, _, param = key.rpartition(".")
    return f"head.{_HEAD[layer]}.{param}" if layer in _HEAD else None


def build(med: Mapping[str, Any], vision: Mapping[str, Any] | None = None) -> Any:
    """ImageReward's modules for a med_config (the text encoder's BERT config) and the image tower's shape."""
    import torch
    from transformers import BlipTextConfig, BlipVisionConfig
    from transformers.models.blip.modeling_blip import BlipVisionModel
    from transformers.models.blip.modeling_blip_text import BlipTextModel

    vision_config = BlipVisionConfig(**{**VIT_L, **(vision or {})})
    text_config = BlipTextConfig(
        vocab_size=med["vocab_size"], hidden_size=med["hidden_size"], intermediate_size=med["intermediate_size"],
        num_hidden_layers=med["num_hidden_layers"], num_attention_heads=med["num_attention_heads"],
        max_position_embeddings=med["max_position_embeddings"], encoder_hidden_size=med["encoder_width"],
        layer_norm_eps=med.get("layer_norm_eps", 1e-12), hidden_act=med.get("hidden_act", "gelu"),
        pad_token_id=med.get("pad_token_id", 0), is_decoder=True)  # is_decoder: the layers get their cross-attention
    hidden = med["hidden_size"]
    model = torch.nn.Module()
    model.vision = BlipVisionModel(vision_config)
    model.text = BlipTextModel(text_config, add_pooling_layer=False)
    model.head = torch.nn.Sequential(torch.nn.Linear(hidden, 1024), torch.nn.Dropout(0.2), torch.nn.Linear(1024, 128),
                                     torch.nn.Dropout(0.2), torch.nn.Linear(128, 64), torch.nn.Dropout(0.1),
                                     torch.nn.Linear(64, 16), torch.nn.Linear(16, 1))
    return model.eval()


def load_weights(model: Any, state: Mapping[str, Any]) -> None:
    """The official checkpoint into the modules; a key they need that it lacks raises (KeyError)."""
    mine = model.state_dict()
    renamed = {new: value for key, value in state.items() if (new := rename(key)) is not None and new in mine}
    missing = sorted(set(mine) - set(renamed) - {k for k in mine if k.endswith("position_ids")})
    if missing:
        raise KeyError(f"the checkpoint lacks {len(missing)} of the model's weights, e.g. {', '.join(missing[:3])}")
    model.load_state_dict(renamed, strict=False)


def tokenizer_for(folder: Path | None, local_only: bool) -> Any:
    """bert-base-uncased (or the folder's vocab.txt) with BLIP's [DEC] and [ENC] tokens."""
    from transformers import BertTokenizer

    source = str(folder) if folder is not None and (folder / "vocab.txt").is_file() else TOKENIZER
    tokenizer = BertTokenizer.from_pretrained(source, local_files_only=local_only)
    tokenizer.add_special_tokens({"bos_token": "[DEC]"})
    tokenizer.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
    return tokenizer


def _files(name: str, local_only: bool) -> tuple[Path, Path, Path | None]:
    """(checkpoint, med_config, the folder when local) of a local folder or a hub id."""
    folder = Path(name).expanduser()
    if folder.is_dir():
        return folder / CHECKPOINT, folder / MED_CONFIG, folder
    if name.startswith(("/", ".", "~")):
        raise FileNotFoundError(f"no folder {folder}")
    from huggingface_hub import hf_hub_download

    return (Path(hf_hub_download(name, CHECKPOINT, local_files_only=local_only)),
            Path(hf_hub_download(name, MED_CONFIG, local_files_only=local_only)), None)


def load(name: str) -> Loaded | str:
    """(model, tokenizer), or why they cannot be had (cached per process)."""
    if name not in _LOADED:
        how = how_to_load(name, "ImageReward model", IMAGEREWARD_MODEL.fix, probe=MED_CONFIG)
        _LOADED[name] = how if isinstance(how, str) else _load(name, how)
    return _LOADED[name]


def _load(name: str, local_only: bool) -> Loaded | str:
    try:
        import torch

        checkpoint, med_config, folder = _files(name, local_only)
        vision = json.loads((folder / VISION_CONFIG).read_text()) if folder and (folder / VISION_CONFIG).is_file() else None
        model = build(json.loads(med_config.read_text()), vision)
        load_weights(model, torch.load(checkpoint, map_location="cpu", weights_only=True))
        return (model, tokenizer_for(folder, local_only))
    except Exception as exc:  # missing files, a checkpoint that does not fit, a tokenizer that is not at hand
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        reason = f"ImageReward model {name!r} could not be loaded ({type(exc).__name__}: {first}); {IMAGEREWARD_MODEL.fix}"
        return not_at_hand(reason) if isinstance(exc, OSError) and not is_local(name) else reason


def pixels(images: list[Any], size: int) -> Any:
    """The reference preprocessing: bicubic resize of the short side, centre crop, CLIP's mean and std."""
    import numpy as np
    import torch
    from PIL import Image

    out = []
    for array in images:
        image = Image.fromarray(array).convert("RGB")
        scale = size / min(image.size)
        image = image.resize((max(size, round(image.width * scale)), max(size, round(image.height * scale))),
                             Image.Resampling.BICUBIC)
        left, top = (image.width - size) // 2, (image.height - size) // 2
        data = np.asarray(image.crop((left, top, left + size, top + size)), dtype=np.float32) / 255.0
        out.append((data - np.array(CLIP_MEAN, dtype=np.float32)) / np.array(CLIP_STD, dtype=np.float32))
    return torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2)


def rewards(loaded: Loaded, prompts: list[str], images: list[Any]) -> list[float]:
    import torch

    model, tokenizer = loaded
    tokens = tokenizer(prompts, padding="max_length", truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
    with torch.no_grad():
        image_embeds = model.vision(pixel_values=pixels(images, model.vision.config.image_size)).last_hidden_state
        image_mask = torch.ones(image_embeds.shape[:-1], dtype=torch.long)
        text = model.text(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask,
                          encoder_hidden_states=image_embeds, encoder_attention_mask=image_mask).last_hidden_state
        head = model.head(text[:, 0, :].float()).squeeze(-1)
    return [float(v) for v in (head - MEAN) / STD]


class ImageRewardMetric(SampleMetric):
    spec = IMAGEREWARD
    metric_model = IMAGEREWARD_MODEL

    def __init__(self, model: str | None = None) -> None:
        self.model_name = model or IMAGEREWARD_MODEL.resolve()

    @classmethod
    def from_options(cls, models: Mapping[str, str] | None = None) -> ImageRewardMetric:
        return cls(IMAGEREWARD_MODEL.resolve(models))

    @property
    def config(self) -> str:
        return config_of(self.model_name)

    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        from assess.metrics.alignment import prompt_batches

        loaded = load(self.model_name)
        if isinstance(loaded, str):
            return [Outcome.unavailable(loaded) for _ in inputs]
        outcomes, batches = prompt_batches(inputs)
        for chunk in batches:
            values = rewards(loaded, [inputs[i].prompt or "" for i in chunk], [inputs[i].image for i in chunk])
            for i, value in zip(chunk, values, strict=True):
                outcomes[i] = Outcome.of(value)
        return [o for o in outcomes if o is not None]
