"""Issue 63, item 5: a text metric on real weights. PP-OCRv4 (rapidocr-onnxruntime's wheel) reads PIL-rendered text:
each case of the table below with its expected read and score; the lossless floor (an image against itself and
against its JPEG re-encode) measured; and `assess score` scores text prompts only, without "unavailable" for the
others. Fast: about 0.15 s a read of these small images on one CPU core."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from assess.index.database import Index
from assess.metrics import build_sample_metrics
from assess.metrics.base import SampleInput
from assess.metrics.ocr import OCRMetric, OCRPromptMetric, normalized, quoted_text, read_text, similarity
from assess.scoring.ingest import score
from tests.assess.conftest import RunFactory, make_cell, shift

pytest.importorskip("rapidocr_onnxruntime", reason="the `ocr` extra (in `test`): pip install 'hypergrid[ocr]'")


def drawn(lines: list[str], fg: tuple[int, int, int] = (15, 15, 15), bg: tuple[int, int, int] = (235, 232, 220),
          size: int = 36, blur: float = 0.0, width: int | None = None) -> np.ndarray:
    """Text drawn by PIL (its bundled scalable font), each line below the last, on a canvas that fits it."""
    font = ImageFont.load_default(size=size)
    boxes = [font.getbbox(line) for line in lines] or [(0, 0, 0, 0)]
    width = width or max(96, *(b[2] + 32 for b in boxes))
    image = Image.new("RGB", (width, max(64, 24 + len(lines) * (size + 14))), bg)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((16, 12 + i * (size + 14)), line, fill=fg, font=font)
    return np.asarray(image.filter(ImageFilter.GaussianBlur(blur)) if blur else image)


def jpeg(image: np.ndarray, quality: int = 75) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=quality)
    return np.asarray(Image.open(buffer).convert("RGB"))


# case: (lines drawn, drawing options, the prompt, what PP-OCRv4 reads, ocr_prompt's score)
CASES = {
    "a sign": (["OPEN"], {}, 'a neon sign that says "OPEN"', "OPEN", 1.0),
    "white on red": (["STOP"], {"fg": (250, 250, 250), "bg": (200, 20, 30)}, 'a road sign reading "STOP"', "STOP", 1.0),
    "mixed case, digits": (["Cafe 24h"], {}, 'a storefront with "Cafe 24h" above the door', "Cafe 24h", 1.0),
    "two lines, reading order": (["HELLO", "WORLD"], {}, 'a t-shirt that says "HELLO WORLD"', "HELLO WORLD", 1.0),
    # the recogniser drops the space: texts are compared on letters and digits only
    "curly quotes, punctuation": (["SALE 50%"], {}, "a poster: “SALE 50%”", "SALE50%", 1.0),
    "misspelt": (["OPNE"], {}, 'a neon sign that says "OPEN"', "OPNE", 0.5),  # two substitutions in four letters
    "no text": ([], {}, 'a blank sign that says "OPEN"', "", 0.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_pp_ocr_reads_pil_rendered_text_and_scores_it_against_the_prompt(case: str) -> None:
    lines, options, prompt, expected_read, expected_score = CASES[case]
    image = drawn(lines, **options)
    assert read_text(image) == expected_read
    (outcome,) = OCRPromptMetric().score([SampleInput("p", 0, image, prompt)])
    assert outcome.value == pytest.approx(expected_score)
    assert json.loads(outcome.detail or "{}") == {"read": expected_read, "prompt_text": quoted_text(prompt)}


def test_the_lossless_floor_is_one_itself_and_its_jpeg_re_encode() -> None:
    """What `ocr` gives when nothing changed the text: the anchor against itself, and against its JPEG (q=75)."""
    metric = OCRMetric()
    for lines, options, *_ in CASES.values():
        image = drawn(lines, **options)
        same, encoded = metric.score([SampleInput("p", 0, image, "x", reference=image),
                                      SampleInput("p", 0, jpeg(image), "x", reference=image)])
        assert (same.value, encoded.value) == (1.0, 1.0), lines


def test_the_anchor_comparison_falls_with_the_text_that_changed() -> None:
    anchor = drawn(["RESERVE 1998"], width=320)
    outcomes = OCRMetric().score([SampleInput("p", 0, drawn(["RESERVE 1989"], width=320), "x", reference=anchor),
                                  SampleInput("p", 0, drawn(["DREAM"], width=320), "x", reference=anchor),
                                  SampleInput("p", 0, drawn(["RESERVE 1998"], blur=6.0, width=320), "x", reference=anchor)])
    swapped, other, illegible = (o.value for o in outcomes)
    assert swapped == pytest.approx(1 - 2 / 11)  # two digits swapped: 2 edits in 11 letters and digits
    assert other is not None and other < 0.3
    assert illegible is not None and illegible < 0.5, "a blur that wipes the text out is not at parity"


def test_quoted_text_is_what_the_prompt_asks_to_be_written() -> None:
    assert quoted_text('a bottle of wine with a label that says "RESERVE 1998"') == "RESERVE 1998"
    assert quoted_text("New York Skyline with 'Google Research Pizza Cafe' written with fireworks on the sky.") == \
        "Google Research Pizza Cafe"  # DrawBench's Text category quotes with single quotes too
    assert quoted_text("a dog's bone and a cat's toy") is None, "apostrophes are no quotes"
    assert quoted_text('two signs, "IN" and "OUT"') == "IN OUT"
    assert quoted_text("a red circle") is None and quoted_text(None) is None
    assert normalized(" Hello,  World! ") == "helloworld" and similarity("", "") == 1.0


TEXT_PROMPTS = {"t-0": 'a sign that says "OPEN"', "t-1": "a red circle"}


def test_assess_score_reads_text_prompts_only_and_says_nothing_of_the_others(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", prompts=TEXT_PROMPTS)
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(3), prompts=TEXT_PROMPTS)
    summary = score([sweep], db, metrics=["ocr", "ocr_prompt"])
    assert not [line for line in summary.lines() if "ocr" in line], summary.lines()
    with Index.open(db) as index:
        rows = index.query("SELECT cell_key, prompt_id, metric, value, detail, config FROM scores ORDER BY metric")
    assert {r["prompt_id"] for r in rows} == {"t-0"}, "the prompt that quotes no text is not scored"
    by_metric = {(r["metric"], r["value"]) for r in rows}
    # the fixtures' images are gradients: no text read, so the cell reads what its anchor reads (nothing) and not "OPEN"
    assert by_metric == {("ocr", 1.0), ("ocr_prompt", 0.0)}
    assert all(r["config"].startswith("rapidocr-onnxruntime=") for r in rows)


def test_without_the_extra_the_ocr_metrics_say_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rapidocr_onnxruntime" else real(name, *a))
    (metric,) = build_sample_metrics(["ocr_prompt"])
    (outcome,) = metric.score([SampleInput("p", 0, drawn(["OPEN"]), 'a sign that says "OPEN"')])
    assert outcome.value is None and "pip install 'hypergrid[ocr]'" in (outcome.unavailable_reason or "")


def test_a_drawbench_sweep_of_the_tiny_model_is_read_on_its_text_prompts(tiny_cache: Path, tmp_path: Path) -> None:
    """The tiny model (random weights) on DrawBench's format: its Text prompt is read in every sample of the cell and
    of its anchor; its other prompts are not scored by the OCR metrics, and nothing says they are unavailable."""
    import csv

    from render import rundir
    from render.cell import build_job
    from render.run import runner
    from render.run.loader import PipelineCache
    from tests.conftest import compose_cfg

    sheet = tmp_path / "drawbench.csv"
    with sheet.open("w", newline="") as handle:
        csv.writer(handle).writerows([["Prompts", "Category"], ["A red colored car.", "Colors"],
                                      ['A storefront with "Hello World" written on it.', "Text"]])
    out = tmp_path / "out"
    overrides = ["steps=2"]
    job = build_job(compose_cfg("model=tiny", "device=cpu", f"prompts.file={sheet}", *overrides, out_root=out))
    results = runner.run_job(job, out / "runs" / "steps=2", store=rundir.SampleStore(out), pipelines=PipelineCache(),
                             overrides=overrides)
    assert [r.status for r in results] == ["done", "done"]  # its anchor, then the cell
    db = tmp_path / "index.db"
    summary = score([r.run_dir for r in results], db, metrics=["ocr", "ocr_prompt"])
    assert not [line for line in summary.lines() if "ocr" in line], summary.lines()
    with Index.open(db) as index:
        rows = index.query("SELECT s.cell_key, p.prompt, s.metric, s.value, s.detail FROM scores s JOIN samples p "
                           "USING (cell_key, prompt_sha, seed)")
    assert {r["prompt"] for r in rows} == {'A storefront with "Hello World" written on it.'}
    assert {r["metric"] for r in rows} == {"ocr", "ocr_prompt"} and all(r["value"] is not None for r in rows)
    assert {json.loads(r["detail"])["prompt_text"] for r in rows if r["metric"] == "ocr_prompt"} == {"Hello World"}
