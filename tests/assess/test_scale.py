"""Cost that grows with what is new (issue 45 item 1): a rescore with nothing new reads no sample file, a run whose
content changed is read again whatever its mtime says, and what `status` and `report` ask the index is answered
through its indexes, never by reading a whole table of samples or scores (benchmarks/scale.py measures the sizes)."""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from assess.index import database as index_module
from assess.cli import cli
from assess.index.database import Index
from assess.scoring.ingest import score
from render import rundir
from tests.conftest import load_benchmark

RUNS = 30  # run folders (one anchor), SAMPLES each
SAMPLES = 2


@pytest.fixture
def scored(tmp_path: Path) -> tuple[Path, Path]:
    """An output root built by the benchmark (its run.json name its anchor by its out_root: built in place), scored."""
    root = tmp_path / "outputs"
    load_benchmark("scale").build(root, RUNS, SAMPLES, anchor_samples=20)
    db = tmp_path / "index.db"
    score([root], db, metrics=["psnr"])
    return root, db


@pytest.fixture
def sample_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every file opened from here on whose name is a run's samples.jsonl or lies in its images folder."""
    opened: list[str] = []
    real = builtins.open

    def counting(file: Any, *args: Any, **kwargs: Any) -> Any:
        path = Path(os.fsdecode(file)) if isinstance(file, (str, bytes, os.PathLike)) else None
        if path is not None and (path.name == rundir.SAMPLES or path.parent.name == rundir.IMAGES):
            opened.append(str(path))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(io, "open", counting)
    yield opened


def test_a_rescore_with_nothing_new_reads_no_sample_file(scored: tuple[Path, Path], sample_reads: list[str]) -> None:
    root, db = scored
    summary = score([root], db, metrics=["psnr"])
    assert sample_reads == [], f"a rescore with nothing new read {len(sample_reads)} sample file(s): {sample_reads[:3]}"
    assert (summary.runs, summary.written, summary.current) == (RUNS, 0, (RUNS - 1) * SAMPLES), summary.lines()
    assert summary.samples == (RUNS - 1) * SAMPLES + 20  # the anchor's too, counted from the index


def test_a_run_whose_content_changed_under_the_same_mtime_is_read_again(scored: tuple[Path, Path],
                                                                          sample_reads: list[str]) -> None:
    root, db = scored
    run = next((root / "multirun" / "sweep-000").glob("3_*"))
    samples = run / rundir.SAMPLES
    before = samples.stat()
    import re

    text = re.sub(r'"latency_s": 0\.\d', '"latency_s": 0.7', samples.read_text())  # same size, new content
    assert text != samples.read_text()
    samples.write_text(text)
    os.utime(samples, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert samples.stat().st_mtime_ns == before.st_mtime_ns and samples.stat().st_size == before.st_size
    sample_reads.clear()
    score([root], db, metrics=["psnr"])
    assert sample_reads == [str(samples)], "only the changed run's samples are read again (its scores are current)"
    with Index.open(db) as index:
        latencies = {r["latency_s"] for r in index.query("SELECT latency_s FROM samples WHERE run_path = ?", (str(run),))}
    assert latencies and all(0.7 <= v < 0.8 for v in latencies), latencies


def test_a_rescore_retries_a_run_left_incomplete(scored: tuple[Path, Path], sample_reads: list[str]) -> None:
    """A run with an unavailable score (its anchor's sample gone) is scored again on every rescore, unchanged or not:
    the reason may have gone since."""
    root, db = scored
    with Index.open(db) as index, index.write():
        index.conn.execute("UPDATE run_files SET complete = 0 WHERE path LIKE '%/1_steps=2'")
    summary = score([root], db, metrics=["psnr"])
    assert [Path(p).name for p in sample_reads] == [rundir.SAMPLES]
    assert summary.written == 0 and summary.current == (RUNS - 1) * SAMPLES


# Read once per report, not once per cell: the compiled cells' eager twins, matched over every run's configuration.
ONCE_PER_REPORT = {"SELECT * FROM compile_break_even"}
BIG_TABLES = ("runs", "samples", "scores", "cell_scores", "cell_summary", "run_files", "parity", "set_scores")


@contextlib.contextmanager
def tracing() -> Iterator[list[str]]:
    """Every statement an index opened in this process sends, while the context lasts."""
    statements: list[str] = []
    connect = index_module.Index._connect.__func__  # type: ignore[attr-defined]

    def traced_connect(cls: type[Index], path: Path, readonly: bool) -> Index:
        index = connect(cls, path, readonly)
        index.conn.set_trace_callback(statements.append)
        return index

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_module.Index, "_connect", classmethod(traced_connect))
        yield statements


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A scored root, and every statement `status` (of the root and of a sweep, plain and --json) and `report` sent
    the index (the report's imports and figure take most of its time: once per module)."""
    folder = tmp_path_factory.mktemp("traced")
    root, db = folder / "outputs", folder / "index.db"
    load_benchmark("scale").build(root, RUNS, SAMPLES, anchor_samples=20)
    score([root], db, metrics=["psnr"])
    sweep = root / "multirun" / "sweep-000"
    with tracing() as statements:
        for args in (["status", str(root), "--json"], ["status", str(sweep)], ["status", str(sweep), "--json"],
                     ["report", str(root), "--out", str(folder / "report")]):
            result = CliRunner().invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)
            assert result.exit_code == 0, result.output
    return db, statements


def test_status_and_report_read_the_index_through_its_indexes(traced: tuple[Path, list[str]]) -> None:
    db, statements = traced
    reads = {s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH")) and s not in ONCE_PER_REPORT}
    assert len(reads) > 20  # the report's reads are traced
    conn = sqlite3.connect(db)
    scans = {}
    for statement in reads:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}")]
        whole = [step for step in plan if step.startswith("SCAN") and step.split()[1] in BIG_TABLES]
        if whole:
            scans[statement[:160]] = whole
    assert not scans, f"queries that read a whole table: {scans}"


def _report_reads(folder: Path, runs: int) -> list[str]:
    """The statements `assess report` of a scored root of `runs` run folders sends the index."""
    root, db = folder / "outputs", folder / "index.db"
    load_benchmark("scale").build(root, runs, SAMPLES, anchor_samples=20)
    score([root], db, metrics=["psnr"])
    with tracing() as statements:
        result = CliRunner().invoke(cli, ["report", str(root), "--out", str(folder / "report"), "--db", str(db)],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
    return [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))]


@pytest.fixture(scope="module")
def report_reads(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[str]]:
    return {runs: _report_reads(tmp_path_factory.mktemp(f"reads{runs}"), runs) for runs in (4, RUNS)}


def test_a_report_asks_the_index_as_many_questions_whatever_its_number_of_cells(
        report_reads: dict[int, list[str]]) -> None:
    """A report reads each table's rows of all its cells at once (assess.report.reads), never once per cell: 5,000
    cells sent 86,000 queries (5 s)."""
    import re
    from collections import Counter

    def shapes(statements: list[str]) -> Counter[str]:  # a statement with its values and lists of values left out
        return Counter(re.sub(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b", "?", re.sub(r"\((?:\?|'[^']*')(?:, ?(?:\?|'[^']*'))*\)",
                                                                            "(...)", s)) for s in statements)

    few, many = report_reads[4], report_reads[RUNS]
    grown = {s[:160]: n for s, n in (shapes(many) - shapes(few)).items()}
    assert len(many) == len(few), f"{len(few)} reads for 3 cells, {len(many)} for {RUNS - 1}; grown: {grown}"


def test_a_report_pauses_the_cyclic_collector_and_leaves_it_as_it_was(scored: tuple[Path, Path], tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """assess.report.write.collector_paused: the report builds its heap with the collector off (its full collections were
    2 s of a 5,000-cell report), and the collector is as it was after, on or off."""
    import gc

    from assess.report import write as report

    root, db = scored
    seen: list[bool] = []
    views = report._cell_views
    monkeypatch.setattr(report, "_cell_views", lambda *a: (seen.append(gc.isenabled()), views(*a))[1])
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            report.write_report([root], db, out=tmp_path / f"report-{enabled}")
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
    assert seen == [False, False]


def test_a_second_report_computes_no_interval_and_shows_the_same(scored: tuple[Path, Path], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """assess.statistics.memo: the bootstrap intervals of a report are kept beside the index under a digest of their
    inputs and code; the next report of the same cells computes none and writes the same page, and a cell whose
    values changed is computed again (and only it)."""
    import re

    from assess.report import write as report
    from assess.statistics import resample
    from assess.statistics.memo import memo_path

    root, db = scored
    computed: list[str] = []
    for name in ("mean_interval_bca", "median_interval_percentile", "resampled_medians"):
        real = getattr(resample, name)
        monkeypatch.setattr(resample, name, lambda *a, _real=real, _name=name: (computed.append(_name), _real(*a))[1])

    def page(out: str) -> str:
        html = Path(report.write_report([root], db, out=tmp_path / out)).read_text()
        return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?", "<time>", html)  # when it was written

    first = page("first")
    assert computed and memo_path(db).is_file()
    computed.clear()
    assert page("again") == first and computed == []
    with sqlite3.connect(db) as conn:  # one sample of one cell changes its score: that cell's interval only
        conn.execute("UPDATE scores SET value = value + 1 WHERE rowid = (SELECT max(rowid) FROM scores "
                     "WHERE metric = 'psnr')")
    assert page("changed") != first and computed == ["mean_interval_bca"]



def _damage(memo: Path, value: str) -> None:
    """Every row of the memo given `value` (SQL), in a table that allows any value."""
    with sqlite3.connect(memo) as conn:
        conn.execute("ALTER TABLE intervals RENAME TO old")
        conn.execute("CREATE TABLE intervals (key TEXT PRIMARY KEY, value)")
        conn.execute(f"INSERT INTO intervals SELECT key, {value} FROM old")
        conn.execute("DROP TABLE old")


@pytest.mark.parametrize("damage", ["5", "'5'", "'[1.0, 2.0, 3.0]'", "'[\"a\", \"b\"]'", "'[true, 1]'", "'{}'",
                                    "'not json'", "NULL", "x'00ff'"])
def test_a_damaged_memo_row_is_computed_again_and_healed(tmp_path: Path, damage: str) -> None:
    """A memo row that holds no interval (a number, a list of three, text, booleans, NULL, bytes) is computed again
    and replaced when the memo is saved: a damaged memo is only a slower report."""
    import numpy as np

    from assess.statistics.memo import memo_path, remembered, remembering

    db, values, computed = tmp_path / "index.db", (np.arange(5.0),), []

    def compute() -> tuple[float, float]:
        computed.append(1)
        return (1.5, 2.5)

    for _ in range(2):
        with remembering(db):
            assert remembered("mean", 0, values, compute) == (1.5, 2.5)
        _damage(memo_path(db), damage) if not computed[1:] else None
    assert len(computed) == 2  # once at first, once for the damaged row
    with remembering(db):
        assert remembered("mean", 0, values, compute) == (1.5, 2.5)
    assert len(computed) == 2  # healed


@pytest.mark.slow
def test_a_report_over_a_damaged_memo_is_the_same_page(scored: tuple[Path, Path], tmp_path: Path) -> None:
    """The report's route (issue 61): a number where a tuple belongs crashed it with a traceback."""
    import re

    from assess.report import write as report
    from assess.statistics.memo import memo_path

    root, db = scored

    def page(out: str) -> str:
        html = Path(report.write_report([root], db, out=tmp_path / out)).read_text()
        return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?", "<time>", html)

    first = page("first")
    _damage(memo_path(db), "5")
    assert page("damaged") == first


def _flags(db: Path) -> dict[tuple[str, int], str | None]:
    with Index.open(db) as index:
        return {(r["prompt_id"], r["seed"]): r["problem"] for r in index.query("SELECT prompt_id, seed, problem FROM samples")}


def _scores(db: Path) -> dict[tuple[str, int], tuple[Any, Any]]:
    with Index.open(db) as index:
        return {(r["prompt_id"], r["seed"]): (r["value"], (r["unavailable_reason"] or "")[:40]) for r in index.query(
            "SELECT prompt_id, seed, value, unavailable_reason FROM scores WHERE metric = 'psnr'")}


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["cp", "cp-preserve-timestamps"])
def test_an_image_rewritten_in_place_is_noticed_by_the_rescore_as_by_a_fresh_index(
        scored: tuple[Path, Path], tmp_path: Path, sample_reads: list[str], keep_mtime: bool) -> None:
    """Issue 61: `cp other.png images/x.png` writes into the file in place, and the images folder's stat stays as it
    was; the rescore said "0 written, 8 already current" while a fresh index flags the mismatch. The stamp now
    holds each image's own state, and a re-read run checks the images written since its last scoring."""
    import shutil

    root, db = scored
    run = next((root / "multirun" / "sweep-000").glob("3_*"))
    images = sorted((run / rundir.IMAGES).iterdir())
    folder = (run / rundir.IMAGES).stat()
    before = images[0].stat()
    shutil.copyfile(images[1], images[0])  # in place: same inode, the folder untouched
    if keep_mtime:  # `cp --preserve=timestamps`, rsync -t: only the ctime tells (no user call sets it back)
        os.utime(images[0], ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (run / rundir.IMAGES).stat().st_mtime_ns == folder.st_mtime_ns
    sample_reads.clear()
    summary = score([root], db, metrics=["psnr"])
    assert [Path(p).name for p in sample_reads if p.endswith(rundir.SAMPLES)] == [rundir.SAMPLES]  # that run only
    assert len(summary.flagged) == 1 and images[0].name in summary.flagged[0] and "does not match" in summary.flagged[0]
    fresh = tmp_path / "fresh.db"
    score([root], fresh, metrics=["psnr"])
    assert _flags(db) == _flags(fresh) and _scores(db) == _scores(fresh)


def test_a_scoring_refreshes_each_cell_it_touched_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 61: Index.refresh_cell reads every run and sample of its cell and was called twice per run, so a cell that
    many runs share (re-runs, shared sweeps: the benchmark's `shared` shape) cost the square of its runs. Now once per
    cell a command touched, whatever the shape; and what it derives is what refreshing after every run derived."""
    root = tmp_path / "outputs"
    load_benchmark("scale").build(root, 20, SAMPLES, anchor_samples=20, shape="shared")
    refreshed: list[str] = []
    real = Index.refresh_cell
    monkeypatch.setattr(Index, "refresh_cell", lambda self, conn, key: (refreshed.append(key), real(self, conn, key))[1])
    db = tmp_path / "index.db"
    summary = score([root], db, metrics=["psnr"])
    assert summary.runs == 20 and not summary.failed
    assert sorted(refreshed) == sorted(set(refreshed)) and len(refreshed) == 2  # the anchor's cell and the shared one
    with Index.open(db) as index:
        derived = index.query("SELECT cell_key, split, metric, value, n FROM cell_scores ORDER BY 1, 2, 3")
        one_by_one = []
        for key in {r["cell_key"] for r in derived}:
            with index.write() as conn:
                real(index, conn, key)
        one_by_one = index.query("SELECT cell_key, split, metric, value, n FROM cell_scores ORDER BY 1, 2, 3")
    assert derived == one_by_one and derived
    refreshed.clear()
    score([root], db, metrics=["psnr"])
    assert refreshed == []  # nothing new: nothing touched


def _cell_scores(db: Path) -> dict[tuple[str, str, int], tuple[Any, Any]]:
    with Index.open(db) as index:
        return {(r["cell_key"], r["prompt_id"], r["seed"]): (r["value"], (r["unavailable_reason"] or "")[:40])
                for r in index.query("SELECT cell_key, prompt_id, seed, value, unavailable_reason FROM scores "
                                     "WHERE metric = 'psnr'")}


@pytest.mark.parametrize("scope", ["root", "anchor-only"])
def test_a_rewritten_anchor_image_rescores_the_cells_compared_with_it_as_a_fresh_index(
        scored: tuple[Path, Path], tmp_path: Path, scope: str) -> None:
    """Issue 61: an anchor image overwritten in place was noticed in the anchor's own run, but every cell compared with
    it kept its old reference score (psnr against the old image) until --force: their own folders had not changed.
    Now a scoring that finds an anchor's image rewritten scores again each cell's samples of that text and seed
    against it, whether it was asked to score the whole root or the anchor's folder alone (a route of our own), and
    once the image is put back, they are scored against it again."""
    import shutil

    root, db = scored
    anchor = root / "anchors" / "tiny" / "x" / "a"
    images = sorted((anchor / rundir.IMAGES).iterdir())
    original, before = images[0].read_bytes(), _cell_scores(db)
    shutil.copyfile(images[1], images[0])  # in place: same inode, the folder untouched
    summary = score([root] if scope == "root" else [anchor], db, metrics=["psnr"])
    assert summary.runs == RUNS if scope == "root" else summary.runs > 1, "each run counted once; the anchor's cells read"
    fresh = tmp_path / "fresh.db"
    score([root], fresh, metrics=["psnr"])
    changed = {key for key, value in _cell_scores(fresh).items() if value != before[key]}
    assert changed and {prompt for _, prompt, _ in changed} == {"dev-000"}, "the cells' samples of the rewritten one"
    assert _cell_scores(db) == _cell_scores(fresh) and _flags(db) == _flags(fresh)
    images[0].write_bytes(original)  # put back
    score([root] if scope == "root" else [anchor], db, metrics=["psnr"])
    assert _cell_scores(db) == before


def test_a_rewritten_anchor_image_rescores_the_set_scores_of_its_cells_when_the_anchor_alone_is_scored(
        tmp_path: Path, tiny_clip: Path) -> None:
    """The set metrics (CMMD: a cell's images against its anchor's) read the anchor's images too: a scoring of the
    anchor's folder alone that finds one rewritten scores its cells' sets again, as a fresh index does."""
    import shutil

    root = tmp_path / "outputs"
    load_benchmark("scale").build(root, 4, 3, anchor_samples=3)
    options = {"metrics": ["cmmd"], "metric_models": {"cmmd": str(tiny_clip)}}
    db, fresh = tmp_path / "index.db", tmp_path / "fresh.db"
    score([root], db, **options)
    anchor = root / "anchors" / "tiny" / "x" / "a"
    images = sorted((anchor / rundir.IMAGES).iterdir())
    shutil.copyfile(images[1], images[0])
    score([anchor], db, **options)
    score([root], fresh, **options)

    def sets(path: Path) -> dict[str, tuple[Any, Any]]:
        with Index.open(path) as index:
            return {r["cell_key"]: (r["n"], r["value"]) for r in index.query("SELECT * FROM set_scores")}

    assert sets(db) == sets(fresh) and len(sets(db)) == 3
