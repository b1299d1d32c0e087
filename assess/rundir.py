"""Read run directories (docs/run-directory.md, contract version 1).

Everything `assess` knows about a run comes from its folder: `run.json`, `samples.jsonl`, the
images and the terminal record (`DONE.json` or `FAILED.json`). Nothing here writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from assess.errors import InvalidRunDirectory, NoRunsFound, NotARunDirectory
from render.rundir import DONE as DONE_JSON
from render.rundir import FAILED as FAILED_JSON
from render.rundir import FAILURE_CATEGORIES, RUN_JSON  # noqa: F401  (re-exported: the contract's names live in render.rundir)
from render.rundir import SAMPLES as SAMPLES_JSONL

CONTRACT_VERSION = 1
SWEEP_JSON = "SWEEP.json"
MULTIRUN_YAML = "multirun.yaml"
_SKIP_DIRS = {"images", ".hydra", "__pycache__", ".git"}


@dataclass(frozen=True)
class SampleRecord:
    """One line of samples.jsonl."""

    cell_key: str
    prompt_id: str
    seed: int
    prompt: str | None
    image: str
    width: int | None
    height: int | None
    latency_s: float | None
    warmup: bool
    steps: int | None
    s_per_step: float | None
    peak_mem_bytes: int | None
    mem_kind: str | None
    load_s: float | None
    reused_from: str | None
    finished_at: str | None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.cell_key, self.prompt_id, self.seed)


@dataclass(frozen=True)
class Terminal:
    """The run's terminal record: DONE.json or FAILED.json."""

    kind: str  # "done" or "failed"
    path: Path
    data: dict[str, Any]

    @property
    def category(self) -> str | None:
        return self.data.get("category") if self.kind == "failed" else None

    @property
    def finished_at(self) -> str | None:
        return self.data.get("finished_at") or self.data.get("failed_at")


@dataclass
class RunDir:
    """A parsed run directory."""

    path: Path
    run: dict[str, Any]
    samples: list[SampleRecord]
    terminal: Terminal | None
    problems: list[str] = field(default_factory=list)  # lines of samples.jsonl that were skipped

    @property
    def cell_key(self) -> str:
        return self.run["cell_key"]

    @property
    def cell(self) -> dict[str, Any]:
        return self.run["cell"]

    @property
    def anchor_cell_key(self) -> str:
        return self.run["anchor"]["cell_key"]

    @property
    def anchor_overrides(self) -> list[str]:
        return list(self.run["anchor"].get("overrides") or [])

    @property
    def is_anchor(self) -> bool:
        return bool(self.run["is_anchor"])

    @property
    def prompt_ids(self) -> list[str]:
        return list(self.run["prompts"]["ids"])

    @property
    def prompts_name(self) -> str:
        return self.run["prompts"]["name"]

    @property
    def split(self) -> str:
        return self.run["prompts"].get("split") or self.prompts_name

    @property
    def seeds(self) -> list[int]:
        return [int(s) for s in self.run["seeds"]]

    @property
    def overrides(self) -> list[str]:
        return list(self.run.get("overrides") or [])

    @property
    def n_expected(self) -> int:
        return len(self.prompt_ids) * len(self.seeds)

    @property
    def anchor_dir(self) -> Path | None:
        """Where the renderer keeps this cell's anchor runs (run.json anchor.dir under out_root), if named."""
        folder = self.run["anchor"].get("dir")
        if not folder:
            return None
        folder = Path(folder)
        if not folder.is_absolute():
            if not self.run.get("out_root"):
                return None
            folder = Path(self.run["out_root"]) / folder
        return folder

    @property
    def describe(self) -> str | None:
        return self.run.get("describe")

    @property
    def sweep(self) -> Path | None:
        parent = self.path.parent
        if (parent / SWEEP_JSON).exists() or (parent / MULTIRUN_YAML).exists():
            return parent
        return None

    def image_path(self, sample: SampleRecord) -> Path:
        return self.path / sample.image


def load_json(path: Path) -> dict[str, Any]:
    """Read a JSON object from a contract file; a broken file raises InvalidRunDirectory."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidRunDirectory(f"{path}: not a readable JSON file ({exc})") from exc
    if not isinstance(data, dict):
        raise InvalidRunDirectory(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _require(data: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if k not in data]
    if missing:
        raise InvalidRunDirectory(f"{where}: missing key(s) {', '.join(missing)} (see docs/run-directory.md)")


def validate_run_json(run: dict[str, Any], path: Path) -> None:
    where = str(path / RUN_JSON)
    _require(run, ("schema", "cell_key", "cell", "anchor", "is_anchor", "prompts", "seeds"), where)
    if run["schema"] != CONTRACT_VERSION:
        raise InvalidRunDirectory(
            f"{where}: contract version {run['schema']!r}, this assess reads version {CONTRACT_VERSION}"
        )
    _require(run["anchor"], ("cell_key",), f"{where} [anchor]")
    _require(run["prompts"], ("name", "ids"), f"{where} [prompts]")
    if not isinstance(run["seeds"], list) or not isinstance(run["prompts"]["ids"], list):
        raise InvalidRunDirectory(f"{where}: 'seeds' and 'prompts.ids' must be lists")


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def parse_sample(obj: dict[str, Any], cell_key: str) -> SampleRecord:
    """One samples.jsonl object -> SampleRecord; a missing required key raises KeyError."""
    return SampleRecord(
        cell_key=obj.get("cell_key") or cell_key,
        prompt_id=str(obj["prompt_id"]),
        seed=int(obj["seed"]),
        prompt=obj.get("prompt"),
        image=str(obj["image"]),
        width=_opt_int(obj.get("width")),
        height=_opt_int(obj.get("height")),
        latency_s=_opt_float(obj["latency_s"]),
        warmup=bool(obj.get("warmup", False)),
        steps=_opt_int(obj.get("steps")),
        s_per_step=_opt_float(obj.get("s_per_step")),
        peak_mem_bytes=_opt_int(obj.get("peak_mem_bytes")),
        mem_kind=obj.get("mem_kind"),
        load_s=_opt_float(obj.get("load_s")),
        reused_from=obj.get("reused_from"),
        finished_at=obj.get("finished_at"),
    )


def read_samples(path: Path, cell_key: str) -> tuple[list[SampleRecord], list[str]]:
    """Parse samples.jsonl: (samples, problems). A later line for the same sample wins.

    A line that does not parse is skipped and reported as a problem; a sample line that names
    another cell key breaks the contract and raises.
    """
    file = path / SAMPLES_JSONL
    if not file.exists():
        return [], []
    by_key: dict[tuple[str, str, int], SampleRecord] = {}
    problems: list[str] = []
    text = file.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            sample = parse_sample(json.loads(line), cell_key)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            partial = number == len(lines)  # no trailing newline: a write cut short
            what = "unfinished last line" if partial else "unreadable line"
            problems.append(f"{file}:{number}: {what} skipped ({type(exc).__name__}: {exc})")
            continue
        if sample.cell_key != cell_key:
            raise InvalidRunDirectory(
                f"{file}:{number}: sample of cell {sample.cell_key} in a run of cell {cell_key}"
            )
        by_key[sample.key] = sample
    return list(by_key.values()), problems


def read_terminal(path: Path) -> Terminal | None:
    done, failed = path / DONE_JSON, path / FAILED_JSON
    if done.exists() and failed.exists():
        raise InvalidRunDirectory(f"{path}: both DONE.json and FAILED.json (exactly one terminal record allowed)")
    if done.exists():
        return Terminal("done", done, load_json(done))
    if failed.exists():
        data = load_json(failed)
        _require(data, ("category",), str(failed))
        return Terminal("failed", failed, data)
    return None


def load_run(path: Path | str) -> RunDir:
    """Parse one run directory. Raises NotARunDirectory when it has no run.json."""
    path = Path(path).resolve()
    if not (path / RUN_JSON).is_file():
        raise NotARunDirectory(f"{path} is not a run directory: it has no {RUN_JSON}")
    run = load_json(path / RUN_JSON)
    validate_run_json(run, path)
    samples, problems = read_samples(path, run["cell_key"])
    return RunDir(path=path, run=run, samples=samples, terminal=read_terminal(path), problems=problems)


def is_sweep_folder(path: Path) -> bool:
    return (path / SWEEP_JSON).exists() or (path / MULTIRUN_YAML).exists()


def find_run_dirs(path: Path | str) -> list[Path]:
    """Run directories at or below `path` (a run, a sweep, or any folder such as outputs/).

    Raises NotARunDirectory or NoRunsFound, with what to do, when there is none.
    """
    root = Path(path).resolve()
    if not root.is_dir():
        raise NotARunDirectory(f"{path}: no such folder")
    if (root / RUN_JSON).is_file():
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        if RUN_JSON in filenames:
            found.append(Path(dirpath))
            dirnames.clear()  # run directories do not nest
            continue
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
    if found:
        return sorted(found)
    if is_sweep_folder(root):
        raise NoRunsFound(f"sweep folder {path} has no run directories yet (no */{RUN_JSON}); nothing to score")
    raise NotARunDirectory(f"{path} is not a run directory (no {RUN_JSON}) and holds no run directory below it")


def load_runs(paths: list[Path | str], with_anchors: bool = False) -> list[RunDir]:
    """Every run directory under `paths`, parsed; duplicates (same folder twice) collapse.

    with_anchors: also the anchor runs that the runs' run.json name (anchor.dir under out_root),
    when that folder exists: the renderer keeps them outside the sweep.
    """
    seen: dict[Path, RunDir] = {}
    for path in paths:
        for run_path in find_run_dirs(path):
            if run_path not in seen:
                seen[run_path] = load_run(run_path)
    if with_anchors:
        folders = {run.anchor_dir for run in seen.values() if not run.is_anchor and run.anchor_dir}
        for folder in sorted(f for f in folders if f is not None and f.is_dir()):
            try:
                anchor_paths = find_run_dirs(folder)
            except (NotARunDirectory, NoRunsFound):
                continue
            for run_path in anchor_paths:
                if run_path not in seen:
                    seen[run_path] = load_run(run_path)
    return list(seen.values())


@dataclass(frozen=True)
class SweepCell:
    """One cell listed in SWEEP.json (whether or not its run directory exists yet)."""

    job_num: int | None
    overrides: tuple[str, ...]
    cell_key: str | None
    subdir: str | None
    n_expected: int | None


@dataclass(frozen=True)
class SweepInfo:
    path: Path
    cells: list[SweepCell]
    launcher: str | None
    started_at: str | None


def _sweep_cell(entry: Any, index: int) -> SweepCell:
    if isinstance(entry, list):
        return SweepCell(index, tuple(str(o) for o in entry), None, None, None)
    if not isinstance(entry, dict):
        raise TypeError(f"cell {index}: expected an object or a list of overrides")
    n_expected = entry.get("expected_samples", entry.get("n_expected"))
    if n_expected is None and "prompt_ids" in entry and "seeds" in entry:
        n_expected = len(entry["prompt_ids"]) * len(entry["seeds"])
    job_num = entry.get("num", entry.get("job_num", index))
    return SweepCell(
        job_num=None if job_num is None else int(job_num),
        overrides=tuple(str(o) for o in entry.get("overrides", [])),
        cell_key=entry.get("cell_key"),
        subdir=entry.get("dir") or entry.get("subdir"),
        n_expected=None if n_expected is None else int(n_expected),
    )


def load_sweep(path: Path | str) -> SweepInfo | None:
    """SWEEP.json of a sweep folder, or None when the folder has none (it is optional)."""
    path = Path(path).resolve()
    file = path / SWEEP_JSON
    if not file.exists():
        return None
    data = load_json(file)
    cells_raw = data.get("cells")
    if not isinstance(cells_raw, list):
        raise InvalidRunDirectory(f"{file}: missing list 'cells'")
    try:
        cells = [_sweep_cell(entry, i) for i, entry in enumerate(cells_raw)]
    except (TypeError, ValueError) as exc:
        raise InvalidRunDirectory(f"{file}: {exc}") from exc
    launcher = data.get("launcher")
    if isinstance(launcher, dict):
        launcher = launcher.get("name") or json.dumps(launcher, sort_keys=True)
    return SweepInfo(path=path, cells=cells, launcher=launcher, started_at=data.get("started_at"))


def parse_time(value: str | None) -> datetime | None:
    """ISO-8601 time from a record; naive times are taken as UTC."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def parse_override(override: str) -> tuple[str, str] | None:
    """'steps=8' -> ('steps', '8'); '+a.b=1' -> ('a.b', '1'); no '=' -> None."""
    if "=" not in override:
        return None
    key, value = override.split("=", 1)
    return key.lstrip("+~"), value
