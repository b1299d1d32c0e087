"""`winner.yaml`: a verdict as a file that travels to production (docs/production.md).

One typed record, written by the climb's final (the incumbent on the holdout) and by `assess report` (a sweep's
fastest cell at parity), read by `hypergrid.apply` and `assess verify`. It holds what the cell is (the model's
identity, the canonical cell and the overrides that compose it), why it won (the verdict and its evidence), where it
was judged (a few judged samples with their image digests, the anchor's overrides) and with which libraries.
Written atomically; a reader refuses a file that breaks the contract, naming the key.
"""

from __future__ import annotations

import math
import numbers
from enum import Enum
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from assess.errors import Refused

WINNER = "winner.yaml"
SCHEMA = 1
LIBRARIES = ("torch", "diffusers", "torchao")  # the versions a verdict was measured with, compared on apply
SAMPLES = 4  # judged samples a winner file lists (what `assess verify` renders again)


class WinnerFileError(Refused, ValueError):
    """A winner file that cannot be read or breaks the contract."""


@dataclass(frozen=True)
class JudgedSample:
    """One sample the verdict judged: its prompt text and seed, its image's digest and where the image is."""

    prompt_id: str
    prompt: str
    seed: int
    sha256: str
    image: str  # absolute path of the judged image (it may not travel with the file: the digest decides)


@dataclass(frozen=True)
class Evidence:
    """Why the cell won: its verdict under the rule, the speed-up and the quality delta with their intervals."""

    verdict: str  # parity | out | undecided (under the rule)
    metric: str
    band: float | None
    band_source: str  # where the band comes from (the model's parity rule, --band, the experiment's rule)
    alpha: float
    speedup: dict[str, Any] | None  # value, low, high, n (over the anchor)
    timed: str  # how the speed-up was timed: side by side, or timed apart
    quality: dict[str, Any] | None  # the delta to the anchor on `metric`: value, low, high, n
    prompts: int  # prompts that decided it
    split: str  # the split it was judged on (dev, holdout)
    holdout: dict[str, Any] | None = None  # a final's holdout result (verdict, delta, speed-up), None for a sweep
    floor: dict[str, Any] | None = None  # the metric's measured lossless floor (assess.statistics.floor), when known


@dataclass(frozen=True)
class Winner:
    """winner.yaml."""

    model: dict[str, Any]  # the canonical model (render.compose.spec.ModelSpec): name, id, revision, weights, ...
    cell_key: str
    cell: dict[str, Any]  # the canonical cell its key hashes
    device_kind: str  # where it was judged
    overrides: list[str]  # compose exactly this cell (hypergrid.apply reads them)
    anchor: dict[str, Any]  # cell_key, overrides
    evidence: Evidence
    samples: list[JudgedSample]
    versions: dict[str, str | None]  # LIBRARIES as measured
    source: dict[str, Any] = field(default_factory=dict)  # kind (sweep | final), where (sweep folders, experiment)
    schema: int = SCHEMA

    def as_dict(self) -> dict[str, Any]:
        return {"schema": self.schema, **{k: v for k, v in asdict(self).items() if k != "schema"}}

    @property
    def override_line(self) -> str:
        return " ".join(self.overrides)

    @classmethod
    def parse(cls, data: Any, where: str) -> Winner:
        if not isinstance(data, dict):
            raise WinnerFileError(f"{where}: expected a mapping, found {type(data).__name__}")
        required = [f.name for f in fields(cls) if f.name not in ("source", "schema")]
        missing = [k for k in required if k not in data]
        if missing:
            raise WinnerFileError(f"{where}: missing key(s) {', '.join(missing)} (docs/production.md lists them)")
        if data.get("schema", SCHEMA) != SCHEMA:
            raise WinnerFileError(f"{where}: winner file version {data.get('schema')!r}; this hypergrid reads {SCHEMA}")
        try:
            return cls(model=dict(data["model"]), cell_key=str(data["cell_key"]), cell=dict(data["cell"]),
                       device_kind=str(data["device_kind"]), overrides=[str(o) for o in data["overrides"]],
                       anchor=dict(data["anchor"]), evidence=Evidence(**data["evidence"]),
                       samples=[JudgedSample(**s) for s in data["samples"]], versions=dict(data["versions"]),
                       source=dict(data.get("source") or {}))
        except (TypeError, ValueError) as error:
            raise WinnerFileError(f"{where}: {error}") from None


def write_winner(path: Path | str, winner: Winner) -> Path:
    """Write winner.yaml atomically (a folder is given: winner.yaml inside it); the path written."""
    import yaml

    from render.rundir import atomic_write_bytes

    target = Path(path)
    target = target / WINNER if target.is_dir() else target
    text = yaml.safe_dump(_plain(winner.as_dict()), sort_keys=False, allow_unicode=True, width=120)
    atomic_write_bytes(target, text.encode())
    return target


def read_winner(path: Path | str) -> Winner:
    """winner.yaml (or the winner.yaml of a folder) as a Winner; WinnerFileError naming the problem."""
    import yaml

    target = Path(path).expanduser()
    target = target / WINNER if target.is_dir() else target
    try:
        data = yaml.safe_load(target.read_text(encoding="utf-8"))
    except OSError as error:
        raise WinnerFileError(f"{target}: cannot be read ({error.strerror or error})") from None
    except yaml.YAMLError as error:
        raise WinnerFileError(f"{target}: not YAML ({str(error).splitlines()[0]})") from None
    return Winner.parse(data, str(target))


def _plain(value: Any) -> Any:
    """YAML-safe values: tuples as lists, an Enum as its value (a verdict is a str Enum), numpy's numbers as Python's,
    non-finite floats as null (a figure that cannot be had). yaml.safe_dump represents exact types only."""
    if isinstance(value, Enum):
        return _plain(value.value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return str(value)
    return value


def library_versions() -> dict[str, str | None]:
    """The installed versions of LIBRARIES (None: not installed), as run.json records them (render.run.provenance)."""
    from render.run.provenance import versions

    installed = versions()
    return {name: installed.get(name) for name in LIBRARIES}


def differing_versions(recorded: dict[str, str | None], installed: dict[str, str | None] | None = None) -> list[str]:
    """`torch 2.13.0 (the winner's 2.12.1)` for each library whose installed version differs from the recorded one."""
    installed = library_versions() if installed is None else installed
    return [f"{name} {installed.get(name) or 'not installed'} (the winner's {recorded[name] or 'not installed'})"
            for name in LIBRARIES if name in recorded and recorded[name] != installed.get(name)]


def judged_samples(runs: list[Any], cell_key: str, limit: int = SAMPLES) -> list[JudgedSample]:
    """Up to `limit` of the cell's judged samples (render.rundir.RunDir runs), warm or not, in prompt order: the
    ones with a prompt text and an image digest (what a render can be compared with)."""
    out: list[JudgedSample] = []
    seen: set[tuple[str, int]] = set()
    for run in runs:
        if run.cell_key != cell_key:
            continue
        for s in run.samples:
            if s.prompt is None or s.sha256 is None or (s.text_id, s.seed) in seen:
                continue
            seen.add((s.text_id, s.seed))
            out.append(JudgedSample(s.prompt_id, s.prompt, s.seed, s.sha256, str((run.path / s.image).resolve())))
            if len(out) >= limit:
                return out
    return out
