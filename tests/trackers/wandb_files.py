"""Read a W&B offline run back: its `.wandb` transaction log (LevelDB's log format behind a W&B header), each
record parsed with wandb's own protobuf schema (`wandb.proto.wandb_internal_pb2.Record`)."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 32768  # LevelDB log blocks; a record header is crc32 (4), length (2), type (1)
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
MAGIC = b":W&B"


def records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == MAGIC, f"{path} is not a W&B transaction log"
    chunks, partial, pos = [], b"", HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # the block's tail is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        body = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind == FULL:
            chunks.append(body)
        elif kind == FIRST:
            partial = body
        elif kind == MIDDLE:
            partial += body
        elif kind == LAST:
            chunks.append(partial + body)
    return [wandb_internal_pb2.Record.FromString(c) for c in chunks]


@dataclass
class OfflineRun:
    folder: Path
    run_id: str = ""
    name: str = ""
    group: str = ""
    job_type: str = ""
    project: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    history: dict[str, Any] = field(default_factory=dict)
    artefacts: list[dict[str, Any]] = field(default_factory=list)  # {"name", "type", "files": [path, ...]}


def _items(items: Any) -> dict[str, Any]:
    return {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in items}


def read_run(folder: Path) -> OfflineRun:
    (log,) = folder.glob("run-*.wandb")
    run = OfflineRun(folder)
    for record in records(log):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.name, run.group, run.job_type, run.project = r.run_id, r.display_name, r.run_group, \
                r.job_type, r.project
            run.tags = list(r.tags)
            run.config |= _items(r.config.update)
        elif kind == "config":
            run.config |= _items(record.config.update)
        elif kind == "history":
            run.history |= {k: v for k, v in _items(record.history.item).items() if not k.startswith("_")}
        elif kind == "artifact":
            a = record.artifact
            run.artefacts.append({"name": a.name, "type": a.type, "files": sorted(e.path for e in a.manifest.contents)})
    return run


def offline_runs(folder: Path) -> list[OfflineRun]:
    return [read_run(p) for p in sorted((folder / "wandb").glob("offline-run-*"))]
