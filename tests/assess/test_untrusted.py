"""Issue 29: a run folder is untrusted input, an output folder is never wiped, secrets are never recorded."""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.index.database import Index
from assess.metrics.preference import PICKSCORE_PROCESSOR
from assess.report.outdir import MARKER, ForeignFolder
from assess.report.write import write_report
from assess.scoring.ingest import score
from render import rundir
from tests.assess.conftest import RunFactory, make_cell, shift

HOSTILE = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>"
SECRET = "s3cr3t-pw"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _rewrite_samples(run: Path, change) -> None:
    lines = [json.loads(line) for line in (run / rundir.SAMPLES).read_text().splitlines() if line.strip()]
    (run / rundir.SAMPLES).write_text("".join(json.dumps(change(obj)) + "\n" for obj in lines))


def _private_png(path: Path) -> bytes:
    import io

    import numpy as np
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.full((32, 32, 3), 7, dtype=np.uint8)).save(buffer, format="PNG")
    path.write_bytes(buffer.getvalue() + b"PRIVATE-BYTES")
    return path.read_bytes()


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


# -- 2: paths read from a run folder stay inside it ---------------------------------------------------------------


@pytest.mark.parametrize("route", ["dotdot", "absolute", "symlink"])
def test_an_image_path_out_of_the_run_folder_never_reaches_the_report(outputs: RunFactory, db: Path, tmp_path: Path,
                                                                       route: str) -> None:
    private = tmp_path / "private.png"
    secret = _private_png(private)
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    run = outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(3))
    if route == "symlink":  # its record carries the private file's hash: the content check cannot tell
        victim = sorted((run / "images").iterdir())[0]
        victim.unlink()
        victim.symlink_to(private)
        _rewrite_samples(run, lambda o: {**o, "sha256": rundir.digest(secret), "bytes": len(secret)}
                         if o["image"] == f"images/{victim.name}" else o)
    else:
        target = str(private) if route == "absolute" else os.path.relpath(private, run)
        _rewrite_samples(run, lambda o: {**o, "image": target, "sha256": rundir.digest(secret), "bytes": len(secret)})
    score([sweep], db, metrics=["psnr"])
    report = write_report([sweep], db).parent
    for file in _files(report):
        assert b"PRIVATE-BYTES" not in file.read_bytes(), file
    with Index.open(db, create=False) as index:
        scored = index.query("SELECT count(*) AS n FROM scores WHERE cell_key = ? AND value IS NOT NULL",
                             (rundir.load_run(run).cell_key,))[0]["n"]
    assert scored == (7 if route == "symlink" else 0)  # the refused samples are not scored from the private file


def test_a_crafted_prompt_id_or_cell_key_writes_nothing_outside_the_report(outputs: RunFactory, db: Path,
                                                                          tmp_path: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    run = outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(3))
    crafted = "../../../../../escaped-{}".format
    _rewrite_samples(run, lambda o: {**o, "prompt_id": crafted(o["prompt_id"])})
    data = json.loads((run / rundir.RUN_JSON).read_text())
    data["prompts"]["ids"] = [crafted(i) for i in data["prompts"]["ids"]]
    data["prompts"]["sha"] = {crafted(i): sha for i, sha in data["prompts"].get("sha", {}).items()}
    rundir.atomic_write_json(run / rundir.RUN_JSON, data)
    before = {p for p in tmp_path.rglob("*")}
    score([sweep], db, metrics=["psnr"])
    report = write_report([sweep], db).parent
    new = {p for p in tmp_path.rglob("*")} - before
    outside = [p for p in new if report not in p.parents and p != report and p.name != db.name
               and not p.name.startswith(db.name)]
    assert not outside
    assert not [p for p in tmp_path.rglob("escaped-*") if report not in p.parents]


def test_an_anchor_dir_out_of_the_output_root_is_not_followed(outputs: RunFactory, tmp_path: Path) -> None:
    sweep = outputs.sweep()
    run = outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"])
    data = json.loads((run / rundir.RUN_JSON).read_text())
    for folder in ("../../elsewhere", str(tmp_path / "elsewhere")):
        data["anchor"]["dir"] = folder
        rundir.atomic_write_json(run / rundir.RUN_JSON, data)
        assert rundir.load_run(run).anchor_dir is None
    data["anchor"]["dir"] = "anchors/tiny/x"
    rundir.atomic_write_json(run / rundir.RUN_JSON, data)
    assert rundir.load_run(run).anchor_dir == (outputs.root / "anchors/tiny/x").resolve()


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts = 0
        self.handlers: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.scripts += tag == "script"
        self.handlers += [f"{tag} {k}" for k, _ in attrs if k.startswith("on")]
        self.hrefs += [v or "" for k, v in attrs if k in ("href", "src")]


def test_every_recorded_string_is_escaped_in_the_report(outputs: RunFactory, db: Path, tmp_path: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    prompts = {"smoke-000": HOSTILE, "smoke-001": "fine"}
    hostile = ["steps=8", f"tag={HOSTILE}", f"+note={HOSTILE}"]
    outputs.run(sweep, "1_x", make_cell(steps=8), overrides=hostile, perturb=shift(3), prompts=prompts,
                categories={"smoke-000": HOSTILE})
    failed = outputs.run(sweep, "javascript:alert(3)", make_cell(steps=4), overrides=["steps=4", f"tag={HOSTILE}"],
                         terminal="failed", n_done=1, prompts=prompts)
    record = json.loads((failed / rundir.FAILED).read_text())
    rundir.atomic_write_json(failed / rundir.FAILED, {**record, "message": HOSTILE, "traceback": HOSTILE})
    data = json.loads((failed / rundir.RUN_JSON).read_text())
    rundir.atomic_write_json(failed / rundir.RUN_JSON, {**data, "describe": HOSTILE})
    score([sweep], db, metrics=["psnr"])
    for out in (None, sweep.parent / "r"):
        html = write_report([sweep], db, out=out).read_text()
        tags = _Tags()
        tags.feed(html)
        assert tags.scripts == 2 and not tags.handlers  # the page's own two (error banner, verdict box); no handler
        assert not [h for h in tags.hrefs if ":" in h.split("/")[0]]  # no link read as a scheme (javascript:)
        assert "alert(1)</script>" not in html and "&lt;script&gt;" in html


# -- 1: an output folder is never wiped ---------------------------------------------------------------------------


@pytest.fixture
def scored(outputs: RunFactory, db: Path) -> Path:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(3))
    score([sweep], db, metrics=["psnr"])
    return sweep


def test_report_refuses_a_folder_that_holds_other_files(scored: Path, db: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "keep.md").write_text("mine")
    result = invoke("report", str(scored), "--db", str(db), "--out", str(docs))
    assert result.exit_code == 2 and "hypergrid did not write" in result.output
    assert sorted(p.name for p in docs.iterdir()) == ["keep.md"] and (docs / "keep.md").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".docs")]


def test_report_out_dot_in_a_project_folder_removes_nothing(scored: Path, db: Path, outputs: RunFactory,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    before = sorted(p.relative_to(outputs.root.parent) for p in outputs.root.parent.rglob("*"))
    monkeypatch.chdir(outputs.root.parent)
    result = invoke("report", str(scored), "--db", str(db), "--out", ".")
    assert result.exit_code == 2
    assert sorted(p.relative_to(outputs.root.parent) for p in outputs.root.parent.rglob("*")) == before


def test_report_rewrites_its_own_folder_and_a_report_of_before_the_marker(scored: Path, db: Path) -> None:
    first = write_report([scored], db)
    assert (first.parent / MARKER).is_file()
    (first.parent / MARKER).unlink()  # a report written by a hypergrid before the marker
    second = write_report([scored], db)
    assert second == first and (second.parent / MARKER).is_file()
    assert not [p for p in scored.iterdir() if p.name.startswith(".report.")]


def test_report_refuses_a_file_as_its_folder(scored: Path, db: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ForeignFolder):
        write_report([scored], db, out=tmp_path / "a-file")
    assert (tmp_path / "a-file").read_text() == "x"


def test_a_full_disk_leaves_the_previous_report_whole(scored: Path, db: Path, small_disk: Path) -> None:
    out = small_disk / "report"
    write_report([scored], db, out=out)
    before = {p.relative_to(out): p.read_bytes() for p in _files(out)}
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:  # fill the disk to the last byte
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    result = invoke("report", str(scored), "--db", str(db), "--out", str(out))
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output and "No space left" in result.output
    assert {p.relative_to(out): p.read_bytes() for p in _files(out)} == before
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "report"]


# -- 3: secrets are never recorded or printed ---------------------------------------------------------------------


def test_credentials_in_urls_reach_neither_the_index_nor_the_report(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    url = f"https://user:{SECRET}@hub.example.org/api?token={SECRET}"
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8", f"+hub.endpoint={url}"],
                perturb=shift(3))
    failed = outputs.run(sweep, "2_steps=4", make_cell(steps=4), overrides=["steps=4"], terminal="failed", n_done=1)
    record = json.loads((failed / rundir.FAILED).read_text())
    rundir.atomic_write_json(failed / rundir.FAILED, {**record, "message": f"cannot reach {url}",
                                                      "traceback": f"ConnectionError: {url}"})
    score([sweep], db, metrics=["psnr"])
    with Index.open(db, create=False) as index:
        dump = "\n".join(index.conn.iterdump())
    assert SECRET not in dump and "hub.example.org" in dump
    html = write_report([sweep], db).read_text()
    assert SECRET not in html and "https://***@hub.example.org" in html


@pytest.fixture
def hub_with_credentials(monkeypatch: pytest.MonkeyPatch) -> str:
    """A hub endpoint with a password in its URL (HF_ENDPOINT=http://user:pw@host), unreachable, and no model of
    the metrics cached: every model metric's unavailable reason names the endpoint."""
    from huggingface_hub import constants

    from assess.metrics import clipmodels

    endpoint = f"http://user:{SECRET}@127.0.0.1:9"
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(clipmodels, "hub_reachable", lambda: False)
    monkeypatch.setattr(clipmodels, "_LOADED", {})
    return endpoint


def test_a_hub_endpoint_with_credentials_is_in_no_output(outputs: RunFactory, db: Path, tmp_path: Path,
                                                        hub_with_credentials: str) -> None:
    """Issue 45: the credentials of the hub's URL (the metrics' unavailable reasons) and of a metric's model source
    (the scores' config) reach no line printed, no row of any table, no report file, no status and no export."""
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8", f"+hub.endpoint={hub_with_credentials}"],
                perturb=shift(3))
    source = f"pickscore={hub_with_credentials}/models/PickScore"
    printed = {}
    for args in (["-v"], [], ["-q"], ["--force"], ["--rebuild"]):
        result = invoke("score", str(sweep), "--db", str(db), "--metrics", "psnr,clip_score,pickscore",
                        "--metric-model", source, *args)
        assert result.exit_code == 0, result.output
        printed[" ".join(args)] = result.output
    assert "the hub (http://***@127.0.0.1:9) cannot be reached" in printed["-v"]  # the reason is there, redacted
    bad = invoke("score", str(sweep), "--db", str(db), "--metrics", "nonesuch", "--metric-model", source)
    malformed = invoke("score", str(sweep), "--db", str(db), "--metric-model", f"{hub_with_credentials}/x")
    printed["error"], printed["bad parameter"] = bad.output, malformed.output
    assert bad.exit_code == 1 and malformed.exit_code == 2 and "http://***@127.0.0.1:9/x" in malformed.output
    for args in (["--json"], []):
        printed[f"status {args}"] = invoke("status", str(sweep), "--db", str(db), *args).output
    report = tmp_path / "report"
    printed["report"] = invoke("report", str(sweep), "--db", str(db), "--out", str(report)).output
    assert {name: SECRET in text for name, text in printed.items()} == dict.fromkeys(printed, False)

    with Index.open(db, create=False) as index:
        dump = "\n".join(index.conn.iterdump())
        configs = {row["config"] for row in index.query("SELECT DISTINCT config FROM scores WHERE metric = 'pickscore'")}
    assert SECRET not in dump and "http://***@127.0.0.1:9" in dump
    assert configs == {f"model=http://***@127.0.0.1:9/models/PickScore processor={PICKSCORE_PROCESSOR}"}
    assert [p for p in _files(report) if SECRET.encode() in p.read_bytes()] == []

    from assess.export.selection import sweep_runs

    tracked = sweep_runs(sweep, db, tmp_path / "export")
    assert SECRET not in json.dumps([[r.name, r.params, r.tags] for r in tracked])
    assert [p for p in _files(tmp_path / "export") if SECRET.encode() in p.read_bytes()] == []


@pytest.mark.slow
def test_a_tracking_uri_with_a_password_is_not_printed_back(scored: Path, db: Path) -> None:
    pytest.importorskip("mlflow")
    result = invoke("export", "mlflow", str(scored), "--db", str(db), "--tracking-uri",
                    f"http://user:{SECRET}@127.0.0.1:9/")
    assert result.exit_code == 2 and SECRET not in result.output and "http://***@127.0.0.1:9/" in result.output


def test_redaction_keeps_what_is_not_a_secret() -> None:
    from render.rundir.redact import redact

    assert redact("http://user:pw@host:5000/x") == "http://***@host:5000/x"
    assert redact("+hub.token=hf_abc") == "+hub.token=***"
    assert redact("x?api_key=1&b=2") == "x?api_key=***&b=2"
    for kept in ("tokenizer=t5", "author=me", "steps=8", "a@b.c", "prompts.limit=3", "/path/with@at"):
        assert redact(kept) == kept


def test_environment_variables_are_recorded_only_by_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    from render.run import provenance

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("HF_TOKEN", SECRET)
    record = json.dumps([provenance.device_info("cpu"), provenance.job_info("inprocess")])
    assert SECRET not in record and '"0"' in record
    with pytest.raises(ValueError, match="allow-list"):
        provenance.recorded_env("HF_TOKEN")


def test_every_write_to_the_index_is_redacted_the_climbs_records_and_updates_too(tmp_path: Path) -> None:
    """Issue 45 item 2, the principle: one edge for the index's rows (assess.index.writer). The climb's generation
    records (commands, notes, cells, the final's claim), written by the climb's own route, and an update in place keep
    no credential; a folder's own path is written as it is."""
    from assess.climb.archive import sync_index

    url = f"http://user:{SECRET}@hub.example"
    generation = {"generation": 1, "created_at": "2026-12-05T00:00:00Z", "state": "decided",
                  "incumbent": {"cell": {"model": {"id": f"{url}/m"}}, "status": "ok"}, "stop": None,
                  "note": f"fetched from {url}", "commands": [f"python -m render -m model.id={url}/m steps=4,8"],
                  "record": str(tmp_path / "g0001.json"),
                  "proposals": [{"cell": {"hub": url}, "rung": 0, "kind": "start", "reason": f"from {url}"}]}
    with Index.open(tmp_path / "index.db") as index:
        sync_index(index, "exp", [generation], {"claimed_at": "now", "incumbent": {"cell": {"id": url}}},
                   tmp_path / "final.json")
        with index.write():  # an update of a row in place takes the same edge
            index.table("generations").update(("exp", 1), {"note": f"amended from {url}"})
        dump = "\n".join(index.conn.iterdump())
    assert SECRET not in dump, [line for line in dump.splitlines() if SECRET in line]
    assert "http://***@hub.example" in dump and "amended from http://***@hub.example" in dump
    assert str(tmp_path / "g0001.json") in dump  # a record's path, as it is
