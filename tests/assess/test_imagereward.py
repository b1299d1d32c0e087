"""ImageReward's real code path offline: a random-weight model of its architecture (BLIP ViT + BERT with
cross-attention + the MLP head) written in the official checkpoint's layout (ImageReward.pt with BLIP's
key names, med_config.json), loaded by the metric and scored; values meaningless, path real."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from assess.metrics.base import SampleInput
from assess.metrics.imagereward import MEAN, STD, ImageRewardMetric, build, pixels
from tests.assess.conftest import anchor_image, noise

VISION = {"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 2, "num_attention_heads": 4,
          "image_size": 32, "patch_size": 8}
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "red", "circle", "blue", "square", "owl", "on", "the", "left"]


def official_key(key: str) -> str:
    """This model's key under the name BLIP's own modules (and so ImageReward.pt) give it."""
    if key.startswith("head."):
        return f"mlp.layers.{key.split('.')[1]}.{key.split('.')[2]}"
    if key.startswith("text."):
        return "blip.text_encoder." + key[len("text."):]
    vit = key[len("vision."):]
    for ours, theirs in [("embeddings.class_embedding", "cls_token"), ("embeddings.position_embedding", "pos_embed"),
                         ("embeddings.patch_embedding.", "patch_embed.proj."), ("post_layernorm.", "norm."),
                         ("encoder.layers.", "blocks."), ("layer_norm1", "norm1"), ("layer_norm2", "norm2"),
                         ("self_attn.projection", "attn.proj"), ("self_attn.qkv", "attn.qkv")]:
        vit = vit.replace(ours, theirs)
    return "blip.visual_encoder." + vit


@pytest.fixture(scope="module")
def tiny_imagereward(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    folder = tmp_path_factory.mktemp("imagereward")
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    med = {"vocab_size": len(WORDS) + 2, "hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1,
           "num_attention_heads": 4, "max_position_embeddings": 40, "encoder_width": VISION["hidden_size"],
           "layer_norm_eps": 1e-12, "hidden_act": "gelu", "pad_token_id": 0, "add_cross_attention": True}
    (folder / "med_config.json").write_text(json.dumps(med))
    (folder / "vision_config.json").write_text(json.dumps(VISION))
    torch.manual_seed(0)
    model = build(med, VISION)
    state = {official_key(k): v for k, v in model.state_dict().items() if not k.endswith("position_ids")}
    state["blip.text_encoder.embeddings.position_ids"] = torch.arange(40)[None]  # BLIP keeps it; the score does not
    torch.save(state, folder / "ImageReward.pt")
    return folder


def test_imagereward_scores_with_the_official_layout(tiny_imagereward: Path) -> None:
    import torch

    items = [SampleInput(f"p{i}", 0, noise(15 * i)(anchor_image(f"p{i}", 0), f"p{i}", 0), text)
             for i, text in enumerate(["a red circle", "a blue square on the left", "an owl"])]
    metric = ImageRewardMetric(str(tiny_imagereward))
    outs = metric.score(items)
    assert all(o.available for o in outs) and len({round(o.value, 6) for o in outs}) == 3
    from render.rundir import folder_digest

    assert folder_digest(tiny_imagereward) in metric.config  # the model by its content
    # The same numbers from the checkpoint read back by hand into the modules.
    from transformers import BertTokenizer

    model = build(json.loads((tiny_imagereward / "med_config.json").read_text()), VISION)
    theirs = torch.load(tiny_imagereward / "ImageReward.pt", weights_only=True)
    model.load_state_dict({k: theirs[official_key(k)] for k in model.state_dict() if not k.endswith("position_ids")},
                          strict=False)
    tokenizer = BertTokenizer(str(tiny_imagereward / "vocab.txt"))
    tokenizer.add_special_tokens({"bos_token": "[DEC]", "additional_special_tokens": ["[ENC]"]})
    for item, out in zip(items, outs, strict=True):
        tokens = tokenizer([item.prompt], padding="max_length", truncation=True, max_length=35, return_tensors="pt")
        with torch.no_grad():
            image = model.vision(pixel_values=pixels([item.image], 32)).last_hidden_state
            text = model.text(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask, encoder_hidden_states=image,
                              encoder_attention_mask=torch.ones(image.shape[:-1], dtype=torch.long)).last_hidden_state
            expected = (float(model.head(text[:, 0])) - MEAN) / STD
        assert out.value == pytest.approx(expected, abs=1e-5)


def test_a_checkpoint_that_does_not_fit_is_unavailable(tiny_imagereward: Path, tmp_path: Path) -> None:
    import shutil

    import torch

    broken = tmp_path / "broken"
    shutil.copytree(tiny_imagereward, broken)
    state = torch.load(broken / "ImageReward.pt", weights_only=True)
    del state["mlp.layers.7.weight"]
    torch.save(state, broken / "ImageReward.pt")
    [out] = ImageRewardMetric(str(broken)).score([SampleInput("p", 0, anchor_image("p", 0), "a red circle")])
    assert out.value is None and "the checkpoint lacks 1 of the model's weights, e.g. head.7.weight" in out.unavailable_reason
    assert out.unavailable_reason.endswith("pass --metric-model imagereward=<local folder> or set HYPERGRID_IMAGEREWARD_MODEL")
    [none] = ImageRewardMetric(str(tmp_path / "absent")).score([SampleInput("p", 0, anchor_image("p", 0), "x")])
    assert none.value is None and re.search(r"could not be loaded \((FileNotFoundError|OSError)", none.unavailable_reason)
