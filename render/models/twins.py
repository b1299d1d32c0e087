"""Where a model family's tiny twin lives and how it is built: once, atomically, into the project's cache.

A twin is a random-weight pipeline of a family's own diffusers classes at toy sizes, built offline
(tokenizers included) and always loaded back with `from_pretrained(folder)`, the path a hub model takes.
Its folder is `<cache root>/models/<name>-<version>`; the cache root is `$HYPERGRID_CACHE`, else
`~/.cache/hypergrid`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from render.run.quiet import saving
from render.rundir.files import folder_mode


def default_cache_root() -> Path:
    """The project's cache folder: `$HYPERGRID_CACHE`, else `~/.cache/hypergrid`."""
    env = os.environ.get("HYPERGRID_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "hypergrid"


@dataclass(frozen=True)
class Twin:
    """A family's tiny twin: `model=<name>` (render/conf/model/<name>.yaml, id `hypergrid:<name>`)."""

    name: str  # the built-in model's name: its id is hypergrid:<name>
    version: str  # bump when the architecture or the weights change: a new folder, so new cells
    build: Callable[[], Any]  # builds the pipeline in memory (imports torch/diffusers when called)

    def folder(self, cache_root: Path | None = None) -> Path:
        return Path(cache_root or default_cache_root()).expanduser() / "models" / f"{self.name}-{self.version}"

    def ensure(self, cache_root: Path | None = None) -> Path:
        return ensure_built(self.folder(cache_root), self.build)


def ensure_built(final: Path, build: Callable[[], Any]) -> Path:
    """Build a pipeline once and `save_pretrained` it into `final`; return `final`.

    The pipeline is written into a temporary sibling folder, fsynced, then renamed into place, so a
    killed build leaves no half folder, and of two concurrent builders the loser of the rename
    simply uses the winner's folder.
    """
    if is_complete(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.building-", dir=final.parent))
    try:
        os.chmod(tmp, folder_mode())  # mkdtemp makes 0700: the cache is shared by whoever shares the umask
        with saving():  # no shard-writing bars (render.run.quiet)
            build().save_pretrained(tmp)
        _fsync_tree(tmp)
        try:
            os.rename(tmp, final)  # atomic; fails when another builder's folder is already there
        except OSError:
            if not is_complete(final):
                raise RuntimeError(
                    f"{final} exists but holds no complete pipeline (no model_index.json); "
                    f"delete it and run again to rebuild it"
                ) from None
        else:
            _fsync_dir(final.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already when the rename succeeded
    return final


def is_complete(folder: Path) -> bool:
    return (folder / "model_index.json").is_file()


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(Path(dirpath))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
