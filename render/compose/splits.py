"""Prompt splits: a manifest shipped with hypergrid, a suite file of a supported format, or a file of a
hub dataset (fetched once into the cache). Readers: render/suites/ (one per format)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from render.rundir import Name
from render.suites import READERS, Prompt, PromptError, read_suite
from render.suites.project import DEV_FILE as SUITE_DEV, HOLDOUT_FILE as SUITE_HOLDOUT

PACKAGE_PROMPTS = Path(__file__).parent.parent / "prompts"  # every *holdout*.jsonl here is reserved (render.laws.holdout)
# A file's prompts, read once per process while it keeps its size and mtime: preflight reads the same
# manifests for every cell (the split, the holdout lock's shipped manifests, an experiment's splits).
_READ: dict[tuple[str, str, int, int], list[Prompt]] = {}


def resolve_manifest(file: str) -> Path:
    """An absolute path, a path relative to the working directory, or a manifest shipped with hypergrid."""
    path = Path(file).expanduser()
    candidates = [path] if path.is_absolute() or path.exists() else [path, PACKAGE_PROMPTS / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    shipped = ", ".join(sorted(p.name for p in PACKAGE_PROMPTS.glob("*.jsonl")))
    raise PromptError(
        f"prompts.file={file!r}: no such file (looked in {', '.join(str(c) for c in candidates)}). "
        f"Give a suite file ({', '.join(READERS.names())}; prompts.format picks the reader), a hub dataset's file "
        f"(prompts.dataset=<id> prompts.file=<path in it>), or one of the shipped manifests: {shipped}"
    )


class Split(Name):
    """What a prompts option is for (prompts.split; members named as their values, so a bad one fails at composition
    naming these): holdout renders are locked by the climb (render.laws.holdout)."""

    smoke = "smoke"
    dev = "dev"
    holdout = "holdout"
    custom = "custom"


class Order(Name):
    """The order `prompts.limit` takes a split's first N prompts from (prompts.order)."""

    stratified = "stratified"  # categories round-robin in order of first appearance: N prompts cover N categories
    file = "file"  # the file's own order


def stratified(prompts: list[Prompt]) -> list[Prompt]:
    """Categories round-robin in a stable order: the categories in the order they first appear in the file, one
    prompt of each in turn, each category's prompts in file order (prompts without a category form one group of
    their own). A file sorted by category (DrawBench, PartiPrompts, GenEval) then gives a first N that covers N
    categories; a file without categories, or one already round-robin (the shipped suite), keeps its order."""
    groups: dict[str | None, list[Prompt]] = {}
    for prompt in prompts:
        groups.setdefault(prompt.category, []).append(prompt)
    if len(groups) <= 1:
        return list(prompts)
    out: list[Prompt] = []
    queues = list(groups.values())
    for i in range(max(len(q) for q in queues)):
        out += [q[i] for q in queues if i < len(q)]
    return out


def ordered(prompts: list[Prompt], order: str = "stratified") -> list[Prompt]:
    """The split's prompts in the order `prompts.limit` takes them from (render.compose.schema.PromptsConf.order). A composed
    config's order is checked by its schema; this check is for a prompts option read raw (the holdout lock's)."""
    if order not in Order.__members__:
        raise PromptError(f"prompts.order={order!r}: valid orders are {', '.join(Order.__members__)} (stratified: "
                          "categories round-robin, so prompts.limit=N covers N categories; file: the file's own order)")
    return stratified(prompts) if order == Order.stratified else list(prompts)


def load_prompts(file: str, limit: int | None = None, format: str = "auto", dataset: str | None = None,
                 revision: str | None = None, order: str = "stratified") -> list[Prompt]:
    """A split's prompts: `file` read by `format`'s reader (auto: by its suffix), from a hub dataset when
    `dataset` is set. Ids are unique and texts non-empty. In `order` (categories round-robin by default: see
    `stratified`); `limit` keeps the first N prompts of that order."""
    if dataset:
        from render.suites.hub import dataset_file

        path = dataset_file(dataset, file, revision)
    else:
        path = resolve_manifest(file)
    prompts = ordered(read_file(path, format), order)
    if limit is not None:
        if limit < 1:
            raise PromptError(f"prompts.limit={limit}: must be at least 1 (or null for all {len(prompts)} prompts)")
        prompts = prompts[:limit]
    return prompts


def read_file(path: Path, format: str = "auto") -> list[Prompt]:
    """`read_suite`, memoised by (path, format, size, mtime_ns): an edited file is read again."""
    stat = path.stat()
    key = (str(path), format, stat.st_size, stat.st_mtime_ns)
    if key not in _READ:
        _READ[key] = read_suite(path, format)
    return list(_READ[key])


def load_split(conf: Any) -> list[Prompt]:
    """The prompts a `prompts` config node (render.compose.schema.PromptsConf) names."""
    return load_prompts(conf.file, conf.limit, conf.get("format", "auto"), conf.get("dataset"), conf.get("revision"),
                        str(conf.get("order") or "stratified"))


__all__ = ["Order", "PACKAGE_PROMPTS", "Prompt", "PromptError", "Split", "SUITE_DEV", "SUITE_HOLDOUT", "load_prompts",
           "load_split", "ordered", "resolve_manifest", "stratified"]
