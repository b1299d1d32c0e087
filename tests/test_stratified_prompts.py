"""Issue 30, item 3: `prompts.limit=N` over a file sorted by category takes the categories round-robin (a stable
order: the categories as they first appear), so a rung of N prompts covers N categories; `prompts.order=file`
keeps the file's order; the shipped suite, round-robin already, keeps its order."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from render.cell import build_job
from render.compose.splits import PromptError, load_prompts
from render.suites.project import DEV_FILE
from tests.conftest import compose_cfg

CATEGORIES = ["Colors", "Conflicting", "Counting", "DALL-E", "Descriptions", "Gary Marcus et al."]


def drawbench(path: Path, per_category: int = 4) -> Path:
    """A DrawBench CSV as published (columns Prompts, Category), sorted by category as the original is."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Prompts", "Category"])
        writer.writerows([f"{category} prompt number {i}", category] for category in CATEGORIES
                         for i in range(per_category))
    return path


def test_a_limit_over_a_sorted_file_takes_every_category_in_turn(tmp_path: Path) -> None:
    file = str(drawbench(tmp_path / "drawbench.csv"))
    first = load_prompts(file, limit=len(CATEGORIES))
    assert [p.category for p in first] == CATEGORIES  # one of each, in the order they first appear
    second = load_prompts(file, limit=2 * len(CATEGORIES))
    assert second[:len(CATEGORIES)] == first and [p.category for p in second[len(CATEGORIES):]] == CATEGORIES
    every = load_prompts(file)
    assert sorted(p.id for p in every) == sorted(p.id for p in load_prompts(file, order="file"))  # the same prompts
    assert [p.text for p in every if p.category == "Counting"] == [f"Counting prompt number {i}" for i in range(4)]


def test_order_file_keeps_the_files_order(tmp_path: Path) -> None:
    file = str(drawbench(tmp_path / "drawbench.csv"))
    assert {p.category for p in load_prompts(file, limit=4, order="file")} == {"Colors"}


def test_the_shipped_suite_keeps_its_order() -> None:
    assert load_prompts(DEV_FILE) == load_prompts(DEV_FILE, order="file")


def test_a_render_of_the_first_n_prompts_covers_n_categories(tmp_path: Path) -> None:
    file = drawbench(tmp_path / "drawbench.csv")
    job = build_job(compose_cfg("model=tiny", f"prompts.file={file}", "prompts.limit=6", out_root=tmp_path))
    assert len({p.category for p in job.prompts}) == 6
    kept = build_job(compose_cfg("model=tiny", f"prompts.file={file}", "prompts.limit=6", "prompts.order=file",
                                 out_root=tmp_path))
    assert len({p.category for p in kept.prompts}) == 2


def test_a_bad_order_names_the_valid_ones(tmp_path: Path) -> None:
    """A composed order is an Enum (refused at composition); a prompts option read raw (the holdout lock's) is
    checked by the reader."""
    file = drawbench(tmp_path / "drawbench.csv")
    with pytest.raises(ConfigCompositionException) as error:
        compose_cfg("model=tiny", f"prompts.file={file}", "prompts.order=random", out_root=tmp_path)
    assert "Invalid value 'random', expected one of [stratified, file]" in str(error.value.__cause__)
    with pytest.raises(PromptError, match="prompts.order='random': valid orders are stratified, file"):
        load_prompts(str(file), order="random")
