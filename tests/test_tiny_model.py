"""The embedded tiny model: built offline, deterministically, atomically; loads via from_pretrained."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from render.models import tiny
from render.models.tiny import TINY_CALL_KWARGS, TINY_VERSION, build_tiny_pipeline, ensure_tiny, tiny_model_dir

COMPONENTS = ("transformer", "vae", "text_encoder", "text_encoder_2")


@pytest.fixture(scope="module")
def pipe(tiny_cache: Path):
    from diffusers import FluxPipeline

    pipe = FluxPipeline.from_pretrained(tiny_model_dir(tiny_cache))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def render(pipe, prompt: str = "a red circle", seed: int = 0) -> np.ndarray:
    generator = torch.Generator("cpu").manual_seed(seed)
    return pipe(prompt, num_inference_steps=8, generator=generator, output_type="np", **TINY_CALL_KWARGS).images


def state(pipe, component: str) -> dict[str, torch.Tensor]:
    return getattr(pipe, component).state_dict()


def assert_same_weights(a, b) -> None:
    for component in COMPONENTS:
        sa, sb = state(a, component), state(b, component)
        assert sa.keys() == sb.keys(), component
        for name in sa:
            assert torch.equal(sa[name], sb[name]), f"{component}.{name}"


def test_model_dir_follows_argument_then_env_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert tiny_model_dir(tmp_path) == tmp_path / "models" / f"tiny-{TINY_VERSION}"
    monkeypatch.setenv("HYPERGRID_CACHE", str(tmp_path / "env"))
    assert tiny_model_dir() == tmp_path / "env" / "models" / f"tiny-{TINY_VERSION}"
    monkeypatch.delenv("HYPERGRID_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert tiny_model_dir() == tmp_path / "home" / ".cache" / "hypergrid" / "models" / f"tiny-{TINY_VERSION}"


def test_build_is_deterministic_and_leaves_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    first = build_tiny_pipeline()
    assert torch.equal(torch.rand(1), expected_next)
    assert_same_weights(first, build_tiny_pipeline())


def test_loads_back_with_the_built_weights(pipe) -> None:
    assert type(pipe).__name__ == "FluxPipeline"
    assert len(pipe.transformer.transformer_blocks) == 2 and len(pipe.transformer.single_transformer_blocks) == 2
    assert not any(getattr(pipe, c).training for c in COMPONENTS)
    assert_same_weights(pipe, build_tiny_pipeline())


def test_tokenizers_tell_prompts_apart(pipe) -> None:
    for tokenizer in (pipe.tokenizer, pipe.tokenizer_2):
        red = tokenizer("A red circle", add_special_tokens=False).input_ids
        assert red != tokenizer("A blue square", add_special_tokens=False).input_ids
        assert tokenizer.unk_token_id not in red


def test_render_is_deterministic_sane_and_depends_on_prompt_and_seed(pipe) -> None:
    image = render(pipe)
    assert image.shape == (1, TINY_CALL_KWARGS["height"], TINY_CALL_KWARGS["width"], 3)
    assert np.isfinite(image).all() and image.min() >= 0.0 and image.max() <= 1.0
    assert image.std() > 0.05, "a constant image"
    assert ((image == 0) | (image == 1)).mean() < 0.2, "a saturated image"
    assert np.array_equal(image, render(pipe))
    assert np.abs(image - render(pipe, seed=1)).mean() > 0.05
    assert np.abs(image - render(pipe, prompt="a blue square")).mean() > 0.005


def test_ensure_tiny_builds_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = ensure_tiny(tmp_path)
    assert (folder / "model_index.json").is_file()
    monkeypatch.setattr(tiny, "build_tiny_pipeline", lambda: pytest.fail("rebuilt an existing model"))
    assert ensure_tiny(tmp_path) == folder
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]


def test_killed_build_leaves_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_build = tiny.build_tiny_pipeline

    def build_then_die():
        pipe = real_build()
        monkeypatch.setattr(pipe.vae, "save_pretrained", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
        return pipe

    monkeypatch.setattr(tiny, "build_tiny_pipeline", build_then_die)
    with pytest.raises(KeyboardInterrupt):
        ensure_tiny(tmp_path)
    assert list((tmp_path / "models").iterdir()) == []


def test_loser_of_a_build_race_uses_the_winners_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_build = tiny.build_tiny_pipeline
    calls = []

    def build_while_another_finishes():
        calls.append(1)
        if len(calls) == 1:
            ensure_tiny(tmp_path)  # the rival builder wins the rename while we are still building
        return real_build()

    monkeypatch.setattr(tiny, "build_tiny_pipeline", build_while_another_finishes)
    folder = ensure_tiny(tmp_path)
    assert len(calls) == 2
    assert (folder / "model_index.json").is_file()
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]


def test_a_foreign_folder_in_the_way_is_reported(tmp_path: Path) -> None:
    (tiny_model_dir(tmp_path) / "junk").mkdir(parents=True)
    with pytest.raises(RuntimeError, match="delete it"):
        ensure_tiny(tmp_path)
    assert sorted(p.name for p in tiny_model_dir(tmp_path).parent.iterdir()) == [f"tiny-{TINY_VERSION}"]
