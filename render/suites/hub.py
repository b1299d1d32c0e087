"""A suite file from a hub dataset: downloaded once into hypergrid's cache, read from there afterwards.

`prompts.dataset=<owner/name> prompts.file=<path in the dataset>`: the file is looked up in
`<cache>/datasets` (`$HYPERGRID_CACHE`, else ~/.cache/hypergrid) first; only a file not cached is
downloaded, and only when the hub can be reached. Otherwise the error names the download command
and the local-file override, before anything is written (preflight: exit 2).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from render.run.online import hub_reachable
from render.suites._base import PromptError


def datasets_cache() -> Path:
    from render.models.tiny import default_cache_root

    return default_cache_root() / "datasets"


def _cached(dataset: str, file: str, revision: str | None, cache: Path) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(dataset, file, cache_dir=cache, revision=revision, repo_type="dataset")
    except ValueError as error:  # not a valid repo id
        raise PromptError(f"prompts.dataset={dataset!r}: {error}") from None
    return Path(found) if isinstance(found, str) else None


def download_command(dataset: str, file: str, revision: str | None, cache: Path) -> str:
    words = ["hf", "download", dataset, file, "--repo-type", "dataset", "--cache-dir", str(cache)]
    return " ".join(shlex.quote(w) for w in words + (["--revision", revision] if revision else []))


def dataset_file(dataset: str, file: str, revision: str | None = None) -> Path:
    """The local path of `file` in the hub dataset `dataset` (downloaded now when not cached yet)."""
    cache = datasets_cache()
    found = _cached(dataset, file, revision, cache)
    if found is not None:
        return found
    if not hub_reachable():
        raise PromptError(
            f"prompts.dataset={dataset}: {file} is not in hypergrid's dataset cache ({cache}) and the hub cannot be "
            f"reached from here. Download it once where the hub is reachable (`{download_command(dataset, file, revision, cache)}`, "
            f"then copy {cache} here; $HYPERGRID_CACHE sets the cache folder), or read a local copy: "
            f"prompts.dataset=null prompts.file=/path/to/{Path(file).name}")
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(dataset, file, repo_type="dataset", revision=revision, cache_dir=cache))
    except Exception as error:  # no such dataset or file, gated, a download that broke off
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PromptError(f"prompts.dataset={dataset}: could not download {file} ({type(error).__name__}: {first}); "
                          f"check the dataset id and the file's path in it, or read a local copy: "
                          f"prompts.dataset=null prompts.file=/path/to/{Path(file).name}") from None
