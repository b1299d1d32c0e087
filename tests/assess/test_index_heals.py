"""The index heals: it is rebuilt from every run the output root knows (registered folders too), a damaged
or foreign index file is a one-line message naming that command, a read-only index can be reported on, and
the index file follows the umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.index.database import Index
from render import rundir
from tests.assess.conftest import RunFactory, make_cell

REBUILD = "assess score --rebuild <out_root>"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def runs_in(db: Path) -> set[str]:
    with Index.open(db) as index:
        return {Path(r["path"]).name for r in index.query("SELECT path FROM runs")}


@pytest.fixture
def out_root_with_a_registered_run(outputs: RunFactory, tmp_path: Path) -> Path:
    """An output root with a sweep inside it and a run written elsewhere (hydra.run.dir) that registered itself."""
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_steps=28")
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"])
    elsewhere = outputs.run(tmp_path / "elsewhere", "run-outside", make_cell(steps=4), overrides=["steps=4"])
    rundir.register(outputs.root, elsewhere, rundir.load_run(elsewhere).cell_key)
    return outputs.root


def test_scoring_an_output_root_includes_the_runs_it_registered_elsewhere(out_root_with_a_registered_run: Path,
                                                                             db: Path) -> None:
    result = invoke("score", str(out_root_with_a_registered_run), "--db", str(db), "--metrics", "psnr", "-q")
    assert result.exit_code == 0, result.output
    assert runs_in(db) == {"0_steps=28", "1_steps=8", "run-outside"}


def test_rebuild_reports_the_counts_before_and_after(out_root_with_a_registered_run: Path, db: Path) -> None:
    sweep = out_root_with_a_registered_run / "multirun" / "2026-11-30" / "10-04-12-3fa2"
    assert invoke("score", str(sweep), "--db", str(db), "--metrics", "psnr", "-q").exit_code == 0
    result = invoke("score", "--rebuild", str(out_root_with_a_registered_run), "--db", str(db), "--metrics", "psnr", "-q")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == (f"rebuilt {db}: before 2 run(s), 16 sample(s); "
                                              "after 3 run(s), 24 sample(s)")
    assert runs_in(db) == {"0_steps=28", "1_steps=8", "run-outside"}
    assert not list(db.parent.glob(f".{db.name}.rebuild-*"))


def foreign(db: Path) -> None:
    db.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40)  # --db pointing at an image


def damaged(db: Path, sweep: Path) -> None:
    """A real index, truncated (a full disk, a copy cut short)."""
    assert invoke("score", str(sweep), "--db", str(db), "--metrics", "psnr", "-q").exit_code == 0
    with open(db, "r+b") as f:
        f.truncate(8192)


@pytest.mark.parametrize("spoil", [foreign, damaged])
@pytest.mark.parametrize("command", ["score", "report", "climb"])
def test_a_damaged_or_foreign_index_is_one_line_naming_the_rebuild(spoil, command: str, sweep_with_anchor: Path,
                                                                     db: Path) -> None:
    spoil(db) if spoil is foreign else spoil(db, sweep_with_anchor)
    args = {"score": ["score", str(sweep_with_anchor), "--metrics", "psnr"], "report": ["report", str(sweep_with_anchor)],
            "climb": ["climb", "tiny-demo", "--out-root", str(sweep_with_anchor.parents[2])]}[command]
    result = CliRunner().invoke(cli, [*args, "--db", str(db)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    (line,) = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert line.startswith(f"Error: {db} is not a readable assess index (")
    assert REBUILD in line and "Traceback" not in result.output


def test_another_sqlite_database_names_the_rebuild(sweep_with_anchor: Path, db: Path) -> None:
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER)")
    result = CliRunner().invoke(cli, ["report", str(sweep_with_anchor), "--db", str(db)])
    assert result.exit_code == 1
    assert result.output.strip() == (f"Error: {db} is not an assess index (it has tables but no 'meta' table): pass the "
                                     f"index's path with --db, or rebuild it from the run directories with `{REBUILD}`")


def test_rebuild_replaces_a_foreign_or_damaged_index(out_root_with_a_registered_run: Path, db: Path) -> None:
    foreign(db)
    result = invoke("score", "--rebuild", str(out_root_with_a_registered_run), "--db", str(db), "--metrics", "psnr", "-q")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == (f"rebuilt {db}: before unreadable (IndexDamaged: {db} is not a readable "
                                              f"assess index (file is not a database): rebuild it from the run "
                                              f"directories with `{REBUILD}`, or pass another --db); "
                                              "after 3 run(s), 24 sample(s)")
    assert runs_in(db) == {"0_steps=28", "1_steps=8", "run-outside"}


@pytest.mark.parametrize("umask,mode", [(0o002, 0o664), (0o007, 0o660)])  # sqlite alone: 0644 & ~umask
def test_the_index_file_follows_the_umask(umask: int, mode: int, sweep_with_anchor: Path, db: Path) -> None:
    previous = os.umask(umask)
    try:
        assert invoke("score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr", "-q").exit_code == 0
    finally:
        os.umask(previous)
    assert stat.S_IMODE(db.stat().st_mode) == mode


@pytest.mark.slow
def test_a_read_only_index_can_be_reported_on(sweep_with_anchor: Path) -> None:
    """As another user (root: `nobody`, via setpriv) or with the folder made read-only: no -wal/-shm can be made."""
    shared = Path(tempfile.mkdtemp(prefix="hypergrid-ro-"))
    try:
        shared.chmod(0o755)
        db = shared / "index.db"
        assert invoke("score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr", "-q").exit_code == 0
        out = shared / "report-out"
        out.mkdir(mode=0o777)
        out.chmod(0o777)
        command = [sys.executable, "-m", "assess.cli", "report", str(sweep_with_anchor), "--db", str(db), "--out", str(out / "r")]
        env = {**os.environ, "MPLCONFIGDIR": str(out / "mpl")}
        if os.geteuid() == 0:
            for folder in [*reversed(sweep_with_anchor.parents), sweep_with_anchor]:
                if str(folder).startswith(tempfile.gettempdir() + "/"):
                    folder.chmod(folder.stat().st_mode | 0o055)  # pytest's tmp folders are private to root
            command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
        else:
            db.chmod(0o444)
            shared.chmod(0o555)
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == str(out / "r" / "index.html") and (out / "r" / "index.html").is_file()
        assert sorted(p.name for p in shared.iterdir()) == ["index.db", "report-out"]  # no -wal/-shm left or made
        scoring = [*command[: command.index("report")], "score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr"]
        result = subprocess.run(scoring, capture_output=True, text=True, env=env, timeout=300)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.startswith(f"Error: {db} cannot be written by this user (")
    finally:
        shared.chmod(0o755)
        subprocess.run(["rm", "-rf", str(shared)], check=False)
