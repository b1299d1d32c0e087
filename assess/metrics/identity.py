"""The identity of a metric's model: a content digest of its files, recorded with every score it makes.

Two scores are comparable only when their models are the same bytes: a hub id can move to new weights
and a local folder can be overwritten, so the name alone says nothing. One place computes it, so the
project's content-identity module can replace it whole.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_CHUNK = 1 << 20
_DIGESTS: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not any(part.startswith(".") for part in
                                                                           p.relative_to(folder).parts))


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def folder_digest(folder: Path) -> str:
    """sha256 over every file's relative path and content (hidden files left out), first 16 hex digits.
    Kept per process while no file's size or mtime changes: hashing a large checkpoint once is enough."""
    folder = folder.resolve()
    files = _files(folder)
    stamp = tuple((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    key = (str(folder), stamp)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        for path in files:  # resolve(): a hub snapshot's files are links into its blobs
            digest.update(f"{path.relative_to(folder).as_posix()}\0{_file_digest(path.resolve())}\n".encode())
        _DIGESTS[key] = digest.hexdigest()[:16]
    return _DIGESTS[key]


def model_folder(name: str) -> Path | None:
    """Where a model's files are: the local folder it names, or its hub snapshot in the local cache."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if name.startswith(("/", ".", "~")):
        return None
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # not cached (or not a valid id): no identity until it is loaded from the hub
        return None


def model_identity(name: str) -> str | None:
    """`sha256:<digest>` of a model's files, or None while they are not on this machine."""
    folder = model_folder(name)
    return f"sha256:{folder_digest(folder)}" if folder is not None and os.access(folder, os.R_OK) else None
