"""Prompt suites: each reader on a small file of its format, ids stable by content, the hub-dataset path
(cached, downloaded once from a local stand-in of the hub, neither: exit 2), the project suite's split
rule, and the real models' configs composing with it."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from render.cell import ConfigError, build_job
from render.laws.holdout import shipped_holdouts
from render.compose.splits import PACKAGE_PROMPTS, PromptError, load_prompts
from render.rundir import text_hash
from render.suites import READERS, read_suite
from render.suites.project import DEV_FILE, HOLDOUT_FILE, split_suite
from tests.conftest import compose_cfg, run_render

REAL_MODELS = ["flux-dev", "flux-schnell", "sd35-medium", "sdxl"]


def write_drawbench(path: Path) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Prompts", "Category"])
        writer.writerows([["A red colored car.", "Colors"], ["Three cats and two dogs sitting on the grass.", "Counting"],
                          ['A storefront with "Hello World" written on it.', "Text"],
                          ["A red colored car.", "Colors"]])  # DrawBench repeats a few prompts: kept once
    return path


def write_parti(path: Path) -> Path:
    path.write_text("Prompt\tCategory\tChallenge\tNote\n"
                    "bond\tAbstract\tBasic\t\n"
                    "a tiger wearing a tuxedo\tAnimals\tImagination\tfrom the paper\n"
                    "a map of the world made of pasta\tArtifacts\tFine-grained Detail\t\n")
    return path


def write_geneval(path: Path) -> Path:
    lines = [{"tag": "counting", "include": [{"class": "dog", "count": 3}], "prompt": "a photo of three dogs"},
             {"tag": "position", "include": [], "prompt": "a photo of a cup left of a laptop"}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def write_coco(path: Path) -> Path:
    path.write_text(json.dumps({"images": [{"id": 9}], "annotations": [
        {"image_id": 9, "id": 48, "caption": "A man riding a wave on top of a surfboard."},
        {"image_id": 9, "id": 67, "caption": "A kitchen with wooden cabinets and a white stove."}]}))
    return path


def write_text(path: Path) -> Path:
    path.write_text("a lighthouse at dusk\n\n  an owl on a fence post  \n")
    return path


@pytest.mark.parametrize("writer,name,expected", [
    (write_drawbench, "drawbench.csv", [("A red colored car.", "Colors", None),
                                        ("Three cats and two dogs sitting on the grass.", "Counting", None),
                                        ('A storefront with "Hello World" written on it.', "Text", None)]),
    (write_parti, "PartiPrompts.tsv", [("bond", "Abstract", "Basic"), ("a tiger wearing a tuxedo", "Animals", "Imagination"),
                                       ("a map of the world made of pasta", "Artifacts", "Fine-grained Detail")]),
    (write_geneval, "evaluation_metadata.jsonl", [("a photo of three dogs", "counting", None),
                                                  ("a photo of a cup left of a laptop", "position", None)]),
    (write_coco, "captions_val2014.json", [("A man riding a wave on top of a surfboard.", None, None),
                                           ("A kitchen with wooden cabinets and a white stove.", None, None)]),
    (write_text, "prompts.txt", [("a lighthouse at dusk", None, None), ("an owl on a fence post", None, None)]),
])
def test_each_reader_reads_its_format(tmp_path: Path, writer, name: str, expected: list) -> None:
    prompts = load_prompts(str(writer(tmp_path / name)))
    assert [(p.text, p.category, p.challenge) for p in prompts] == expected
    assert len({p.id for p in prompts}) == len(prompts)


def test_ids_are_derived_from_content_where_the_file_has_none(tmp_path: Path) -> None:
    first = read_suite(write_drawbench(tmp_path / "a.csv"))
    assert first[0].id == f"drawbench-{text_hash('A red colored car.')[:10]}"
    reordered = tmp_path / "b.txt"
    reordered.write_text("an owl on a fence post\na lighthouse at dusk\n")
    assert {p.text: p.id for p in read_suite(reordered)} == {p.text: p.id for p in read_suite(write_text(tmp_path / "c.txt"))}
    assert [p.id for p in read_suite(write_coco(tmp_path / "coco.json"))] == ["coco-48", "coco-67"]  # the file's own ids


def test_a_format_can_be_named_and_a_wrong_one_lists_the_valid_ones(tmp_path: Path) -> None:
    odd = tmp_path / "drawbench.export"
    write_drawbench(odd)
    assert len(load_prompts(str(odd), format="drawbench")) == 3
    with pytest.raises(PromptError, match=r"cannot tell the format from the suffix '\.export'; set prompts.format"):
        load_prompts(str(odd))
    with pytest.raises(PromptError, match=r"prompts.format='xlsx': valid formats are auto, coco, drawbench, geneval, "
                                          r"jsonlist, manifest, parti, text$"):
        load_prompts(str(odd), format="xlsx")


@pytest.mark.parametrize("content,name,match", [
    ("Text,Category\nhello,x\n", "bad.csv", "no 'Prompts' or 'Prompt' column"),
    ('{"prompt": "x"\n', "bad.jsonl", "expected a JSON object"),
    ('{"images": []}', "bad.json", "expected COCO captions JSON"),
    ('["a cat", null]', "bad.json", r"bad.json: item 2: expected a string \(the prompt\), got null"),
    ('[\n  "a cat",', "cut.json", "expected a JSON list of prompt strings"),
    ("Prompt\tCategory\n\tAnimals\n", "empty.tsv", "empty prompt text"),
    ("\n\n", "blank.txt", "holds no prompts"),
])
def test_a_malformed_file_says_where_and_what(tmp_path: Path, content: str, name: str, match: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(PromptError, match=match):
        load_prompts(str(tmp_path / name))


def test_every_reader_has_a_test_file() -> None:
    assert set(READERS) == {"manifest", "drawbench", "parti", "geneval", "coco", "text", "jsonlist"}


def test_a_json_list_of_strings_is_read_and_told_from_coco_by_its_content(tmp_path: Path) -> None:
    """The jsonlist reader (one module, render/suites/jsonlist.py) shares .json with COCO: a list is its."""
    listed = tmp_path / "prompts.json"
    listed.write_text(json.dumps(["a red cube", "two dogs on a sofa", "a red cube"]))  # a repeat is kept once
    prompts = load_prompts(str(listed))
    assert [p.text for p in prompts] == ["a red cube", "two dogs on a sofa"]
    assert prompts[0].id == f"jsonlist-{text_hash('a red cube')[:10]}"
    assert [p.id for p in read_suite(write_coco(tmp_path / "coco.json"))] == ["coco-48", "coco-67"]


# -- the hub-dataset path -------------------------------------------------------------------

DATASET, FILE = "someone/drawbench", "data/drawbench.csv"


class _Hub(BaseHTTPRequestHandler):
    """The one route hf_hub_download uses for a dataset file: /datasets/<id>/resolve/<revision>/<file>."""

    body = b""
    gets: list[str] = []

    def _headers(self) -> bool:
        if self.path != f"/datasets/{DATASET}/resolve/main/{FILE}":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False
        self.send_response(200)
        self.send_header("ETag", f'"{hashlib.sha1(self.body).hexdigest()}"')
        self.send_header("X-Repo-Commit", "a" * 40)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        return True

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's names)
        self._headers()

    def do_GET(self) -> None:  # noqa: N802
        if self._headers():
            type(self).gets.append(self.path)
            self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def _load_in_a_process(cache: Path, endpoint: str) -> list[dict]:
    """load_prompts of the dataset file in a fresh process that sees the hub at `endpoint` ($HF_ENDPOINT)."""
    code = ("import json, sys; from render.compose.splits import load_prompts; "
            f"json.dump([p.__dict__ for p in load_prompts({FILE!r}, dataset={DATASET!r})], sys.stdout)")
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HYPERGRID_CACHE": str(cache), "HF_HUB_OFFLINE": "0"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_hub_dataset_is_downloaded_once_into_the_cache(tmp_path: Path) -> None:
    _Hub.body = write_drawbench(tmp_path / "upstream.csv").read_bytes()
    _Hub.gets = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_port}"
    try:
        first = _load_in_a_process(tmp_path / "cache", endpoint)
    finally:
        server.shutdown()
        server.server_close()
    again = _load_in_a_process(tmp_path / "cache", endpoint)  # the hub is gone: the cached file is read
    assert [p["category"] for p in first] == ["Colors", "Counting", "Text"] and again == first
    assert _Hub.gets == [f"/datasets/{DATASET}/resolve/main/{FILE}"]
    assert list((tmp_path / "cache" / "datasets").glob("datasets--someone--drawbench/snapshots/*/data/drawbench.csv"))


@pytest.mark.slow
def test_a_hub_dataset_neither_cached_nor_reachable_is_refused_naming_the_download(tmp_path: Path) -> None:
    result = run_render("model=tiny", f"prompts.dataset={DATASET}", f"prompts.file={FILE}", cwd=tmp_path,
                        env_extra={"HF_HUB_OFFLINE": "1", "HYPERGRID_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 2, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    assert f"prompts.dataset={DATASET}: {FILE} is not in hypergrid's dataset cache" in message
    assert f"hf download {DATASET} {FILE} --repo-type dataset --cache-dir {tmp_path / 'cache' / 'datasets'}" in message
    assert "prompts.dataset=null prompts.file=/path/to/drawbench.csv" in message
    assert not (tmp_path / "outputs").exists()


# -- the project suite ----------------------------------------------------------------------


def suite() -> tuple[list, list]:
    return load_prompts(DEV_FILE), load_prompts(HOLDOUT_FILE)


def test_the_project_suite_has_its_categories_and_at_least_300_prompts() -> None:
    dev, holdout = suite()
    categories = Counter(p.category for p in dev + holdout)
    assert len(dev) + len(holdout) >= 300 and None not in categories
    assert {"counting", "colour", "attribute-binding", "spatial", "text", "people", "animals", "objects", "scenes",
            "styles", "long", "imaginative"} <= set(categories)
    assert min(categories.values()) >= 20


def test_the_split_is_the_content_rule_stratified_by_category() -> None:
    dev, holdout = suite()
    assert split_suite(dev + holdout) == (dev, holdout)  # the shipped files are what the rule makes of them
    assert split_suite(list(reversed(dev + holdout))) == (dev, holdout)  # order in, same split out
    assert not {text_hash(p.text) for p in dev} & {text_hash(p.text) for p in holdout}
    for category, n in Counter(p.category for p in dev + holdout).items():
        assert sum(p.category == category for p in holdout) == round(n / 3), category
    categories = len({p.category for p in dev})
    assert len({p.category for p in dev[:categories]}) == categories  # a rung of N prompts takes every category in turn


def test_the_suites_texts_are_not_the_shapes_captions() -> None:
    shapes = {text_hash(p.text) for name in ("smoke.jsonl", "dev.jsonl", "holdout.jsonl") for p in load_prompts(name)}
    dev, holdout = suite()
    assert not shapes & {text_hash(p.text) for p in dev + holdout}


def test_the_suites_holdout_is_a_shipped_holdout() -> None:
    assert {PACKAGE_PROMPTS / "holdout.jsonl", PACKAGE_PROMPTS / HOLDOUT_FILE} == set(shipped_holdouts())


@pytest.mark.parametrize("model", REAL_MODELS)
def test_real_models_render_the_project_suite_by_default(model: str) -> None:
    job = build_job(compose_cfg(f"model={model}", "device=cpu"))
    assert job.prompts_name == "suite-dev" and len(job.prompts) == len(load_prompts(DEV_FILE))
    assert all(p.category for p in job.prompts)


@pytest.mark.slow
@pytest.mark.parametrize("model", REAL_MODELS)
def test_no_shape_caption_reaches_a_real_model(model: str) -> None:
    for option in ("smoke", "dev", "holdout"):
        with pytest.raises(ConfigError, match=f"prompts={option} holds captions written for the models shapes, tiny, "
                                              f"tiny-flux2, .*, not model={model}: render the project suite"):
            build_job(compose_cfg(f"model={model}", f"prompts={option}", "device=cpu"))
    assert len(build_job(compose_cfg(f"model={model}", "prompts=dev", "prompts.models=null", "device=cpu")).prompts) == 60


def test_the_shapes_splits_stay_the_shapes_models() -> None:
    assert build_job(compose_cfg("device=cpu")).prompts_name == "smoke"
    assert build_job(compose_cfg("model=shapes", "prompts=dev", "device=cpu")).prompts[0].id == "dev-000"


@pytest.mark.slow
@pytest.mark.parametrize("route", ["the option", "its texts in a plain-text file"])
def test_the_suites_holdout_is_locked(tmp_path: Path, route: str) -> None:
    args = ["prompts=suite-holdout"]
    if route != "the option":
        (tmp_path / "mine.txt").write_text("\n".join(p.text.upper() for p in load_prompts(HOLDOUT_FILE)) + "\n")
        args = [f"prompts.file={tmp_path / 'mine.txt'}"]
    result = run_render("model=tiny", *args, "prompts.limit=1", "steps=1", "render_anchor=false", cwd=tmp_path,
                        env_extra={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2 and "a locked holdout" in result.stderr, result.stderr
    assert not (tmp_path / "outputs").exists()
