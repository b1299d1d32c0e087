"""run.json as one typed record (issue 31 item 1): what the renderer writes is what every reader parses, nothing of
it is lost on the way, and a record that breaks the contract is refused naming what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from render.cell import build_job
from render.run.runner import run_json
from render.rundir import InvalidRunDirectory, RunRecord
from tests.conftest import compose_cfg


def written(tmp_path: Path) -> dict:
    job = build_job(compose_cfg("model=tiny", "steps=4", "cache=fbcache", "device=cpu", out_root=tmp_path))
    return json.loads(json.dumps(run_json(job, ["steps=4", "cache=fbcache"], "test", {"n_pending": 3})))


def test_what_the_renderer_writes_reads_back_whole(tmp_path: Path) -> None:
    data = written(tmp_path)
    record = RunRecord.parse(data, "run.json")
    assert record.as_dict() == data  # every key, in the writer's form
    assert record.cell_key == data["cell_key"] and record.prompts.ids == tuple(data["prompts"]["ids"])
    assert record.anchor.overrides == tuple(data["anchor"]["overrides"]) and record.estimate == {"n_pending": 3}
    assert record.writer["pid"] == data["pid"] and record.extra == {}


def test_keys_it_does_not_know_are_kept(tmp_path: Path) -> None:
    data = {**written(tmp_path), "cache_record": {"mag_ratios": [1.0]}, "from_a_newer_writer": 7}
    record = RunRecord.parse(data, "run.json")
    assert record.axis_record("cache") == {"mag_ratios": [1.0]} and record.as_dict() == data


@pytest.mark.parametrize("change, words", [
    (lambda d: d.pop("seeds"), "missing key(s) seeds"),
    (lambda d: d.update(schema=99), "contract version 99"),
    (lambda d: d["anchor"].pop("cell_key"), "[anchor]: missing key(s) cell_key"),
    (lambda d: d.update(prompts=["p0"]), "'prompts' must be an object"),
    (lambda d: d.update(seeds=0), "'seeds' and 'prompts.ids' must be lists"),
    (lambda d: d.update(seeds=["zero"]), "invalid literal for int()"),
])
@pytest.mark.slow
def test_a_record_breaking_the_contract_is_refused_naming_it(tmp_path: Path, change, words: str) -> None:
    data = written(tmp_path)
    change(data)
    with pytest.raises(InvalidRunDirectory) as error:
        RunRecord.parse(data, "/x/run.json")
    assert "/x/run.json" in str(error.value) and words in str(error.value)
