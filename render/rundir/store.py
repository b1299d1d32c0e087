"""Skip-if-done: the finished samples known to an output root, verified before reuse, and the claims
that let concurrent processes split work instead of doing it twice.

A sample is (cell key, text identity, seed) (render.rundir.identity): the prompt id is a label, so a
sample rendered under another id with the same text is the same sample, and one with the same id but
another text is not. It is reused only when its record's content hash matches its image file; a damaged or swapped file is logged and rendered again. Claims are
flock(2) locks under `<out_root>/.hypergrid/claims/`, one per sample: they die with their process,
so a claim of a killed process is simply taken over.
"""

from __future__ import annotations

import logging
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Iterator

from render.rundir.errors import InvalidRunDirectory
from render.rundir.states import CellState
from render.rundir.files import DONE, FAILED, IMAGES, SAMPLES, STATE_DIR, Appended, FileState, exclusive, file_digest, now_iso
from render.rundir.digests import DigestCache
from render.rundir.identity import sample_text_hash
from render.rundir.keys import image_name
from render.rundir.liveness import writer_state
from render.rundir.records import SampleRecord, read_run_record, read_samples
from render.rundir.untrusted import contained
from render.rundir.walk import Registry, known_run_dirs

log = logging.getLogger("render")
CLAIMS = "claims"


@dataclass(frozen=True)
class ExistingSample:
    run_dir: Path
    record: SampleRecord

    @property
    def image(self) -> Path:
        """Its image file; UnsafePath (an OSError) when the record leads outside its run folder."""
        return contained(self.run_dir, self.record.image, "image")

    @cached_property
    def folder(self) -> Path:
        """The run directory, resolved (once: a cell's plan compares every sample's with its own)."""
        return self.run_dir.resolve()


def verify(sample: ExistingSample, digests: DigestCache | None = None) -> str | None:
    """None when the image file is the one its record describes, else why not; `digests` spares hashing a file
    in a state already hashed (render.rundir.digests)."""
    record = sample.record
    if record.sha256 is None or record.bytes is None:
        return "its record carries no content hash (written before contract version 2)"
    try:
        image = sample.image  # UnsafePath when the record leads out of its run folder
    except OSError as error:
        return str(error)
    try:
        size = image.stat().st_size
        if size != record.bytes:
            return f"{image} has {size} bytes, its record says {record.bytes}"
        found = digests.digest(image) if digests is not None else file_digest(image)[0]
    except OSError as error:
        return f"{image} cannot be read ({error.strerror or error})"
    if found != record.sha256:
        return f"{image} has sha256 {found[:12]}..., its record says {record.sha256[:12]}..."
    return None


class SampleStore:
    """Finished samples of every run directory known to an output root (walked and registered)."""

    def __init__(self, out_root: Path) -> None:
        self.out_root = out_root
        self._registry = Registry(out_root)
        self._by_cell: dict[str, dict[tuple[str, int], list[ExistingSample]]] | None = None
        self._dirs: dict[str, set[Path]] = {}
        self._read: dict[Path, FileState | None] = {}  # each run dir's samples.jsonl as last read: unchanged, not read again
        self._checked: dict[tuple[Path, str], str | None] = {}  # (image, sha256) -> problem, once per process
        self._digests = DigestCache(out_root)

    # -- reading ---------------------------------------------------------------------------------

    def _load_dir(self, run_dir: Path) -> None:
        state = FileState.at(run_dir / SAMPLES)  # taken before reading: an append after it is read next time
        try:
            run = read_run_record(run_dir)
            cell_key = run.cell_key
            records, _ = read_samples(run_dir, cell_key)
        except InvalidRunDirectory:
            return
        self._read[run_dir] = state
        finished = (run_dir / DONE).exists() or (run_dir / FAILED).exists()  # its writer ended: nothing left to clean
        if not finished and writer_state(run.writer, ask_slurm=False)[0] == CellState.CRASHED:
            remove_stale_temporaries(run_dir)
        self._dirs.setdefault(cell_key, set()).add(run_dir)
        samples = self._by_cell.setdefault(cell_key, {})  # type: ignore[union-attr]
        for record in records:
            candidates = samples.setdefault((record.text_id, record.seed), [])
            candidates[:] = [c for c in candidates if c.run_dir != run_dir]
            candidates.append(ExistingSample(run_dir, record))

    def _scan(self) -> dict[str, dict[tuple[str, int], list[ExistingSample]]]:
        if self._by_cell is None:
            self._by_cell, self._dirs, self._read = {}, {}, {}
            self._registry = Registry(self.out_root)
            self._registry.update()
            for run_dir in known_run_dirs(self.out_root):
                self._load_dir(run_dir)
        return self._by_cell

    def refresh(self) -> None:
        self._by_cell = None

    def refresh_cell(self, cell_key: str) -> None:
        """Re-read what other processes may have finished for one cell since the scan (cheap: the registry's tail,
        and only the run directories whose samples.jsonl changed since it was read)."""
        self._scan()
        for key, folder in self._registry.update():
            self._dirs.setdefault(key, set()).add(folder)
        for folder in sorted(self._dirs.get(cell_key, ())):
            if folder not in self._read or FileState.at(folder / SAMPLES) != self._read[folder]:
                self._load_dir(folder)

    # -- lookups ---------------------------------------------------------------------------------

    def _problem(self, sample: ExistingSample) -> str | None:
        key = (sample.image, sample.record.sha256 or "")
        if key not in self._checked:
            self._checked[key] = verify(sample, self._digests)
            if self._checked[key]:
                log.warning("not reusing sample %s seed %d of cell %s: %s; it will be rendered again",
                            sample.record.prompt_id, sample.record.seed, sample.record.cell_key, self._checked[key])
        return self._checked[key]

    def find(self, cell_key: str, prompt_id: str, text: str, seed: int) -> ExistingSample | None:
        """A verified finished sample with this identity (cell key, the text's identity, seed), or None; `prompt_id`
        is only a label."""
        for sample in self._scan().get(cell_key, {}).get((sample_text_hash(text), seed), []):
            if self._problem(sample) is None:
                return sample
        return None

    def pending(self, cell_key: str, wanted: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
        """The (prompt id, text, seed) of `wanted` with no verified finished sample."""
        return [w for w in wanted if self.find(cell_key, *w) is None]

    def rendered(self, cell_key: str) -> list[SampleRecord]:
        """Every record of this cell that a process rendered (not linked), each sample once."""
        samples = self._scan().get(cell_key, {}).values()
        return [c.record for candidates in samples for c in candidates[:1] if c.record.reused_from is None]

    def add(self, run_dir: Path, *records: SampleRecord, appended: Appended | None = None) -> None:
        """Records this process just appended to `run_dir`; when nobody else wrote the file since it was read,
        the store knows it whole without reading it again."""
        if self._by_cell is None:
            return
        for record in records:
            self._dirs.setdefault(record.cell_key, set()).add(run_dir)
            candidates = self._by_cell.setdefault(record.cell_key, {}).setdefault((record.text_id, record.seed), [])
            candidates.insert(0, ExistingSample(run_dir, record))
        if appended is not None and appended.alone and self._read.get(run_dir) == appended.before:
            self._read[run_dir] = appended.after

    # -- claims ----------------------------------------------------------------------------------

    @contextmanager
    def claim(self, cell_key: str, text: str, seed: int, *, wait: bool) -> Iterator[bool]:
        """Hold the right to render one sample (by its text identity); yields False (when not waiting) if another
        process holds it."""
        lock = self.out_root / STATE_DIR / CLAIMS / cell_key / f"{sample_text_hash(text)}__s{int(seed)}.lock"
        with exclusive(lock, wait=wait) as acquired:
            yield acquired


_STORES: dict[Path, SampleStore] = {}  # process-level: preflight and every in-process cell share one scan


def sample_store(out_root: Path) -> SampleStore:
    """This process's store of an output root."""
    if out_root not in _STORES:
        _STORES[out_root] = SampleStore(out_root)
    return _STORES[out_root]


def link_sample(existing: ExistingSample, run_dir: Path, out_root: Path, prompt_id: str | None = None) -> SampleRecord:
    """Make a verified finished sample part of `run_dir` without rendering it: hard link (or copy) its image, under
    this run's prompt id (`prompt_id`) when the sample was rendered under another id for the same text."""
    prompt_id = prompt_id or existing.record.prompt_id
    image = f"{IMAGES}/{image_name(prompt_id, existing.record.seed)}"
    target = run_dir / image
    if run_dir.resolve() != existing.folder or image != existing.record.image:  # else it is the very file
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        try:
            os.link(existing.image, tmp)
        except OSError:
            shutil.copy2(existing.image, tmp)
        os.replace(tmp, target)  # replaces a damaged file of the same name
    try:
        source = str(existing.run_dir.relative_to(out_root))
    except ValueError:
        source = str(existing.run_dir)
    return replace(existing.record, prompt_id=prompt_id, image=image, reused_from=source, load_s=0.0,
                   finished_at=now_iso())


def remove_stale_temporaries(run_dir: Path) -> None:
    """A killed writer can leave its temporary file (never a truncated image: those are only renamed whole)."""
    for tmp in list(run_dir.glob(".*.tmp")) + list((run_dir / IMAGES).glob(".*.tmp")):
        tmp.unlink(missing_ok=True)
