"""docs/run-directory.md describes the contract module, and the module is what the docs say."""

from __future__ import annotations

import json
import re
from pathlib import Path

from render import rundir

DOC = (Path(__file__).parents[2] / "docs" / "run-directory.md").read_text()


def json_blocks_after(heading: str) -> list[dict]:
    section = DOC.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    return [json.loads(re.sub(r"//[^\n]*", "", b)) for b in blocks]


def test_every_file_name_of_the_contract_is_documented() -> None:
    for name in (rundir.RUN_JSON, rundir.SAMPLES, rundir.DONE, rundir.FAILED, rundir.IMAGES, rundir.LOG,
                 rundir.SWEEP_JSON, rundir.JOBS_JSON, rundir.STATE_DIR, "runs.jsonl", "claims"):
        assert name in DOC, name
    assert f"version {rundir.CONTRACT_VERSION}" in DOC


def test_the_documented_sample_record_is_the_contracts() -> None:
    (example,) = json_blocks_after("`samples.jsonl`")
    assert tuple(example) == rundir.SAMPLE_FIELDS


def test_the_documented_run_json_has_every_required_field() -> None:
    (example,) = json_blocks_after("`run.json`")
    assert set(rundir.records.RUN_FIELDS) <= set(example)
    assert example["schema"] == rundir.CONTRACT_VERSION


def test_the_documented_failure_categories_are_the_contracts() -> None:
    section = DOC.split("## `FAILED.json`", 1)[1]
    assert re.findall(r"`([a-z-]+)`", section.split("`category` is one of", 1)[1].split(".", 1)[0]) == list(rundir.FAILURE_CATEGORIES)
