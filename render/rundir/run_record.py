"""What run.json holds, as one typed record: the renderer writes it through `RunRecord.as_dict()` and every reader
parses it through `RunRecord.parse`, which refuses a record that breaks the contract (docs/run-directory.md).

Keys this version does not know (a newer writer's, the axes' `<axis>_record` added after the run started) are kept
in `extra`, so a record read and written back loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from render.rundir.errors import InvalidRunDirectory
from render.rundir.files import CONTRACT_VERSION

READABLE_VERSIONS = (1, 2, CONTRACT_VERSION)  # version 1 records carry no content hashes: they are not verified


@dataclass(frozen=True)
class AnchorRef:
    """The cell this run is compared with: its key, its canonical cell, how to render it, where its runs live."""

    cell_key: str
    cell: dict[str, Any] | None = None
    overrides: tuple[str, ...] = ()
    dir: str | None = None  # under out_root

    def as_dict(self) -> dict[str, Any]:
        return {"cell_key": self.cell_key, "cell": self.cell, "overrides": list(self.overrides), "dir": self.dir}


@dataclass(frozen=True)
class PromptsRef:
    """The prompts the run renders: the option's name and split, its file, the ids in order and their text hashes."""

    name: str
    ids: tuple[str, ...]
    split: str | None = None
    file: str | None = None
    sha: dict[str, str] = field(default_factory=dict)  # prompt id -> render.rundir.identity.text_hash of its text

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "split": self.split, "file": self.file, "ids": list(self.ids), "sha": self.sha}


@dataclass(frozen=True)
class RunRecord:
    """run.json."""

    schema: int
    cell_key: str
    cell: dict[str, Any]  # the canonical cell its key hashes
    anchor: AnchorRef
    is_anchor: bool
    prompts: PromptsRef
    seeds: tuple[int, ...]
    describe: str | None = None
    overrides: tuple[str, ...] = ()  # the Hydra overrides that made the cell
    out_root: str | None = None
    tag: str | None = None
    config: dict[str, Any] = field(default_factory=dict)  # the resolved task config
    versions: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    git: dict[str, Any] = field(default_factory=dict)
    host: str | None = None
    pid: int | None = None
    job: dict[str, Any] = field(default_factory=dict)  # launcher, SLURM job id, array index (render.run.provenance)
    estimate: dict[str, Any] = field(default_factory=dict)  # what preflight expected of it (render.rundir.watchdog)
    started_at: str | None = None
    # the experiment's ledger in force at launch (render.laws.ledger.ledger_stamp): its name, the digest of its
    # chain's first entry (`origin`, the experiment's identity) and its head; empty outside an experiment
    ledger: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know, kept as they are

    @classmethod
    def parse(cls, data: Any, where: str) -> "RunRecord":
        """run.json's object as a record; InvalidRunDirectory naming `where` and the bad key when it breaks the
        contract."""
        if not isinstance(data, dict):
            raise InvalidRunDirectory(f"{where}: expected a JSON object, found {type(data).__name__}")
        _require(data, ("schema", "cell_key", "cell", "anchor", "is_anchor", "prompts", "seeds"), where)
        if data["schema"] not in READABLE_VERSIONS:
            raise InvalidRunDirectory(f"{where}: contract version {data['schema']!r}; this hypergrid reads versions "
                                      f"{', '.join(map(str, READABLE_VERSIONS))}")
        anchor, prompts = _mapping(data, "anchor", where), _mapping(data, "prompts", where)
        _require(anchor, ("cell_key",), f"{where} [anchor]")
        _require(prompts, ("name", "ids"), f"{where} [prompts]")
        if not isinstance(data["seeds"], list) or not isinstance(prompts["ids"], list):
            raise InvalidRunDirectory(f"{where}: 'seeds' and 'prompts.ids' must be lists")
        known = {f.name for f in fields(cls)} - {"extra"}
        try:
            return cls(
                schema=data["schema"], cell_key=str(data["cell_key"]), cell=dict(data["cell"]),
                anchor=AnchorRef(str(anchor["cell_key"]), anchor.get("cell"), tuple(anchor.get("overrides") or ()),
                                 anchor.get("dir")),
                is_anchor=bool(data["is_anchor"]),
                prompts=PromptsRef(str(prompts["name"]), tuple(str(p) for p in prompts["ids"]), prompts.get("split"),
                                   prompts.get("file"), dict(prompts.get("sha") or {})),
                seeds=tuple(int(s) for s in data["seeds"]),
                describe=data.get("describe"), overrides=tuple(data.get("overrides") or ()), out_root=data.get("out_root"),
                tag=data.get("tag"), config=dict(data.get("config") or {}), versions=dict(data.get("versions") or {}),
                device=dict(data.get("device") or {}), git=dict(data.get("git") or {}), host=data.get("host"),
                pid=data.get("pid"), job=dict(data.get("job") or {}), estimate=dict(data.get("estimate") or {}),
                started_at=data.get("started_at"), ledger=dict(data.get("ledger") or {}),
                extra={k: v for k, v in data.items() if k not in known},
            )
        except (TypeError, ValueError) as error:
            raise InvalidRunDirectory(f"{where}: {error}") from None

    def as_dict(self) -> dict[str, Any]:
        """The JSON object run.json holds (its keys in the order the contract lists them, then the unknown ones)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            out[f.name] = value.as_dict() if isinstance(value, AnchorRef | PromptsRef) else \
                list(value) if isinstance(value, tuple) else value
        return {**out, **self.extra}

    @property
    def writer(self) -> dict[str, Any]:
        """Who wrote the run, as render.rundir.liveness.writer_state reads it."""
        return {"host": self.host, "pid": self.pid, "started_at": self.started_at, "job": self.job}

    def axis_record(self, axis: str) -> dict[str, Any] | None:
        """What an axis derived when it was applied (`<axis>_record`: MagCache's calibrated ratios, ...)."""
        record = self.extra.get(f"{axis}_record")
        return record if isinstance(record, dict) else None


def _require(data: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if k not in data]
    if missing:
        raise InvalidRunDirectory(f"{where}: missing key(s) {', '.join(missing)} (see docs/run-directory.md)")


def _mapping(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data[key]
    if not isinstance(value, dict):
        raise InvalidRunDirectory(f"{where}: {key!r} must be an object")
    return value
