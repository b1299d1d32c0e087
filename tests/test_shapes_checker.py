"""The shapes dataset, the checker that judges images against its captions, its paired statistics (fast)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import ndimage

from assess.metrics.base import SampleInput
from assess.metrics.shapes import NotAShapesCaption, ShapesFitMetric, ShapesMetric, check
from render.models.shapes.data import (
    COLOURS, POSITIONS, SHAPES, Spec, all_specs, draw, parse_caption, sample_batch, vocabulary,
)
from assess.metrics.tradeoff import paired_difference
from render.compose.splits import load_prompts

MANIFESTS = ["dev.jsonl", "holdout.jsonl", "smoke.jsonl"]


@pytest.fixture(scope="module")
def dataset() -> tuple[np.ndarray, list[str]]:
    return sample_batch(np.random.default_rng(12345), 900)


@pytest.mark.parametrize("manifest", MANIFESTS)
def test_every_manifest_prompt_is_a_caption_of_the_grammar(manifest: str) -> None:
    captions = {spec.caption for spec in all_specs()}
    for prompt in load_prompts(manifest):
        assert prompt.text in captions, prompt
        assert parse_caption(prompt.text).caption == prompt.text


def test_the_grammar_has_every_combination_and_its_words() -> None:
    specs = all_specs()
    assert len(specs) == len(set(specs)) == len(COLOURS) * len(SHAPES) * len(POSITIONS) == 90
    words = set(vocabulary())
    assert all(set(spec.caption.split()) <= words for spec in specs)


@pytest.mark.parametrize("text", ["a blue hexagon on the left", "two red circles", "a red circle", ""])
def test_other_texts_are_not_captions(text: str) -> None:
    assert parse_caption(text) is None
    with pytest.raises(NotAShapesCaption, match="expected 'a <colour> <shape> <position>'"):
        check(np.full((32, 32, 3), 255, np.uint8), text)


def test_the_dataset_is_seeded() -> None:
    first, captions = sample_batch(np.random.default_rng(7), 16)
    again, captions_again = sample_batch(np.random.default_rng(7), 16)
    other, _ = sample_batch(np.random.default_rng(8), 16)
    assert captions == captions_again and np.array_equal(first, again)
    assert not np.array_equal(first, other)
    assert first.shape == (16, 32, 32, 3) and first.dtype == np.uint8


def test_the_checker_reads_the_datasets_own_images(dataset) -> None:
    images, captions = dataset
    verdicts = [check(image, caption) for image, caption in zip(images, captions)]
    for attribute in ("colour", "shape", "position", "correct"):
        accuracy = np.mean([getattr(v, attribute) for v in verdicts])
        assert accuracy >= 0.98, (attribute, accuracy)
    assert np.mean([v.fit for v in verdicts]) > 0.85


@pytest.mark.parametrize("attribute", ["colour", "shape", "position"])
def test_the_checker_rejects_a_caption_that_asks_for_something_else(dataset, attribute: str) -> None:
    images, captions = dataset
    choices = {"colour": list(COLOURS), "shape": list(SHAPES), "position": list(POSITIONS)}[attribute]
    accepted = []
    for image, caption in zip(images[:300], captions[:300]):
        spec = parse_caption(caption)
        current = getattr(spec, attribute)
        other = choices[(choices.index(current) + 1) % len(choices)]
        wrong = Spec(**{**spec.__dict__, attribute: other})
        accepted.append(getattr(check(image, wrong.caption), attribute))
    assert np.mean(accepted) <= 0.02


def test_an_empty_image_has_no_object_and_fit_zero() -> None:
    verdict = check(np.full((32, 32, 3), 255, np.uint8), "a red circle in the centre")
    assert not (verdict.colour or verdict.shape or verdict.position or verdict.correct)
    assert verdict.fit == 0.0 and verdict.found == {"colour": None, "shape": None, "position": None}


def test_float_images_read_like_uint8() -> None:
    image = draw(Spec("blue", "triangle", "top"), np.random.default_rng(0))
    as_float = check(image.astype(np.float32) / 255, "a blue triangle at the top")
    as_uint8 = check(image, "a blue triangle at the top")
    assert as_float.found == as_uint8.found and as_float.correct
    assert as_float.fit == pytest.approx(as_uint8.fit, abs=1e-6)


def test_fit_falls_smoothly_with_blur() -> None:
    """The continuous companion degrades step by step where the verdict would flip at once."""
    image = draw(Spec("red", "square", "centre"), np.random.default_rng(3)).astype(np.float64)
    fits = []
    for sigma in np.linspace(0.0, 2.5, 11):
        blurred = np.stack([ndimage.gaussian_filter(image[..., c], sigma, mode="nearest") for c in range(3)], axis=-1)
        fits.append(check(blurred.round().astype(np.uint8), "a red square in the centre").fit)
    steps = np.diff(fits)
    assert fits[0] > 0.85 and fits[-1] < fits[0] - 0.1
    assert (steps <= 0.02).all()  # never rises by more than noise
    assert np.abs(steps).max() < 0.15  # and never jumps


def test_the_metrics_record_verdicts_and_unavailability() -> None:
    image = draw(Spec("green", "circle", "right"), np.random.default_rng(1))
    inputs = [
        SampleInput("dev-1", 0, image, "a green circle on the right"),
        SampleInput("dev-2", 0, image, "a green square on the right"),
        SampleInput("dev-3", 0, image, "a photo of a cat"),
        SampleInput("dev-4", 0, image, None),
    ]
    right, wrong, cat, missing = ShapesMetric().score(inputs)
    assert right.value == 1.0 and wrong.value == 0.0
    detail = json.loads(wrong.detail)
    assert (detail["colour"], detail["shape"], detail["position"]) == (True, False, True)
    assert detail["found"]["shape"] == "circle" and detail["asked"]["shape"] == "square"
    assert not cat.available and "not a shapes caption" in cat.unavailable_reason
    assert not missing.available and "no prompt" in missing.unavailable_reason
    fit_right, fit_wrong, fit_cat, _ = ShapesFitMetric().score(inputs)
    assert 0 < fit_wrong.value < fit_right.value <= 1 and not fit_cat.available


def test_paired_difference_brackets_the_mean_and_sees_a_shift() -> None:
    rng = np.random.default_rng(0)
    anchor = rng.random(300)
    worse = anchor - 0.05 + rng.normal(0, 0.1, 300)
    same = anchor + rng.normal(0, 0.1, 300)
    shifted, unshifted = paired_difference(anchor, worse), paired_difference(anchor, same)
    assert shifted.low < shifted.value < shifted.high < 0 and shifted.excludes_zero
    assert unshifted.low < 0 < unshifted.high and not unshifted.excludes_zero
    constant = paired_difference([1, 1, 1], [0, 0, 0])
    assert (constant.value, constant.low, constant.high) == (-1, -1, -1)
