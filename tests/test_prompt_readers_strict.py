"""Issue 29: the prompt readers are strict (wrong field counts, missing columns, prompts that are not strings are
errors naming file, line and what was expected) and ids derived from text never collide."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from render.compose.splits import PromptError, load_prompts
from render.suites import read_suite
from render.suites._base import content_id
from tests.conftest import run_render


@pytest.mark.parametrize("content,name,match", [
    ("Prompt\tCategory\tChallenge\na\tdog\tAnimals\tBasic\n", "PartiPrompts.tsv",
     r"PartiPrompts.tsv:2: 4 field\(s\), the header has 3"),
    ("Prompt\tCategory\tChallenge\nbond\tAbstract\n", "PartiPrompts.tsv", r"PartiPrompts.tsv:2: 2 field\(s\)"),
    ('Prompts,Category\n"a, red car",Colors\na, red car,Colors\n', "drawbench.csv",
     r"drawbench.csv:3: 3 field\(s\), the header has 2"),
    ("Category,Note\nx,y\n", "drawbench.csv", "no 'Prompts' or 'Prompt' column"),
    ('{"tag": "counting", "prompt": null}\n', "evaluation_metadata.jsonl",
     r"evaluation_metadata.jsonl:1: 'prompt' must be a string \(the prompt\), got null"),
    ('{"tag": "counting", "prompt": "x"}\n{"tag": "counting", "prompt": 42}\n', "evaluation_metadata.jsonl",
     r":2: 'prompt' must be a string \(the prompt\), got int 42"),
    ('{"tag": "counting", "prompt": ["a", "dog"]}\n', "evaluation_metadata.jsonl", r":1: 'prompt' must be a string"),
    ('{"tag": 7, "prompt": "a dog"}\n', "evaluation_metadata.jsonl", r":1: 'tag' must be a string or null"),
    (json.dumps({"annotations": [{"id": 1, "caption": "ok"}, {"id": 2, "caption": None}]}), "captions.json",
     r"captions.json: annotation 2 \(id 2\): 'caption' must be a string \(the prompt\), got null"),
    (json.dumps({"annotations": [{"id": 1, "caption": ["a", "dog"]}]}), "captions.json", "'caption' must be a string"),
    ('{"id": "a", "text": null}\n', "m.jsonl", r"m.jsonl:1: 'text' must be a string \(the prompt\), got null"),
    ('{"id": null, "text": "a dog"}\n', "m.jsonl", r"m.jsonl:1: 'id' must be a string or an integer"),
    ('{"id": "a", "text": "a dog", "category": ["x"]}\n', "m.jsonl", r"m.jsonl:1: 'category' must be a string or null"),
    ('["a dog"]\n', "m.jsonl", r"m.jsonl:1: expected a JSON object, got list"),
])
def test_a_record_that_cannot_be_read_as_a_prompt_is_refused_naming_where(tmp_path: Path, content: str, name: str,
                                                                          match: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(PromptError, match=match):
        load_prompts(str(tmp_path / name))


def test_a_bad_suite_file_is_an_exit_2_before_anything_is_written(tmp_path: Path) -> None:
    bad = tmp_path / "PartiPrompts.tsv"
    bad.write_text("Prompt\tCategory\tChallenge\na\tdog\tAnimals\tBasic\n")
    result = run_render("model=tiny", f"prompts.file={bad}", f"out_root={tmp_path / 'out'}", "device=cpu",
                        cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"{bad}:2: 4 field(s), the header has 3" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("run.json"))


@pytest.mark.slow
def test_text_derived_ids_never_collide_over_a_million_lines(tmp_path: Path) -> None:
    # lines 102031 and 1453025 share the first 10 hex digits of their text hash (found by a birthday search)
    lines = [f"prompt number {i} of a long list" for i in [*range(999_999), 1_453_025]]
    path = tmp_path / "million.txt"
    path.write_text("\n".join(lines) + "\n")
    logging.getLogger("render").setLevel(logging.ERROR)
    start = time.perf_counter()
    prompts = read_suite(path)
    elapsed = time.perf_counter() - start
    assert len(prompts) == len(lines) and len({p.id for p in prompts}) == len(lines)
    print(f"1,000,000 lines read with unique ids in {elapsed:.1f} s")


def test_two_texts_whose_short_ids_agree_get_distinct_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import render.suites._base as base

    monkeypatch.setattr(base, "content_id", lambda prefix, text: f"{prefix}-same")  # a forced short-id collision
    path = tmp_path / "two.txt"
    path.write_text("a red cube\na blue sphere\n")
    first, second = read_suite(path)
    assert first.id == "text-same" and second.id != first.id and second.id.startswith("text-")
    assert content_id("text", "a red cube") != content_id("text", "a blue sphere")


def test_a_long_prompt_is_not_printed_whole(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    long = "a very long prompt " * 200
    path = tmp_path / "p.txt"
    path.write_text(f"{long}\n{long.upper()}\n")
    with caplog.at_level(logging.WARNING, logger="render"):
        read_suite(path)
    [message] = [r.getMessage() for r in caplog.records if "kept once" in r.getMessage()]
    assert len(message) < 400 and f"({len(long.strip())} characters)" in message
