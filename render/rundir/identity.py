"""What a thing *is*, from its content only: a prompt text, a cell, a model's weights, a folder of files.

Everything that compares two things compares these, never a name, a path or an id:

    sample_text_hash  a sample's text: the exact text the model receives (the pipeline's tokenizers keep case
                   and punctuation, so "A RED CIRCLE, AT THE TOP!" is another sample than "a red circle at the top")
    text_identity  a prompt's text folded: NFKC, format and invisible characters removed, every Unicode
                   punctuation, symbol-free spacing and space folded, case folded
    text_hash      its 16-hex-digit digest (a split's content, the dev/holdout split rule)
    holdout_identity  the holdout lock's broad identity: the folded text's confusables skeleton (Unicode TR39),
                   folded again, so "а red сircle" in Cyrillic letters is the holdout's "a red circle"; a
                   prompt that *contains* a holdout text (a longer prompt, a line read by the wrong reader) is
                   the holdout's too (render.laws.holdout). All are pure functions of the text, memoised.
    cell_key_of    the digest of a cell's canonical config (which holds its model's weights identity)
    folder_digest  the digest of a folder's files (relative path, size, content), cached by file state
    model_identity a model's weights: a local folder's digest, or a hub model's resolved commit

A cached digest is reused only while every file keeps its size, mtime, ctime (nanoseconds) and inode, so the
common case (a re-run) costs one stat per file, and a replaced weight file is hashed again, even one of the same
size whose mtime was restored (`touch -r`, `cp -p`, `rsync -t`: the ctime moves with any change, and a file
put in place by rename has a new inode). As git does with its index ("racy git"), a digest taken within one
timestamp tick (render.rundir.digests.TICK_NS) of the file's last change is not trusted: the kernel stamps files
from a coarse clock, so a second write in the same tick can leave size, mtime, ctime and inode all as they were;
such a file is hashed again until its digest is older than its change by a tick. The in-process memo obeys the
same rule: no cache, on disk or in memory, answers for bytes it has not seen.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
import unicodedata
from pathlib import Path
from typing import Any, Iterable

from render.rundir.digests import TICK_NS

# Code points that render as nothing but are not Unicode category Cf (format): fillers, joiners and
# variation selectors (Unicode's Default_Ignorable_Code_Point, less what Cf already covers).
_IGNORABLE = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)


def _ignorable(char: str) -> bool:
    code = ord(char)
    return unicodedata.category(char) == "Cf" or any(low <= code <= high for low, high in _IGNORABLE)


def _fold(char: str) -> str:
    """A space for punctuation, separators and controls; nothing for invisible characters; else the character."""
    if _ignorable(char):
        return ""
    category = unicodedata.category(char)
    if category[0] in "PZ" or category == "Cc":
        return " "
    return char


# The fold of every ASCII character, made by `_fold` itself: an ASCII text (most prompts) is folded by one
# str.translate instead of a call per character (NFKC leaves ASCII as it is, and casefold is lower there).
_ASCII_FOLD = {code: _fold(chr(code)) for code in range(128) if _fold(chr(code)) != chr(code)}


@functools.lru_cache(maxsize=1 << 16)  # a pure function of the text: each text folded once per process
def text_identity(text: str) -> str:
    """A prompt's text as compared everywhere: "Ａ ＲＥＤ “cube”…" and "a red cube" are one text."""
    if text.isascii():
        return " ".join(text.translate(_ASCII_FOLD).lower().split())
    return _unicode_identity(text)


def _unicode_identity(text: str) -> str:
    once = unicodedata.normalize("NFKC", text)
    folded = unicodedata.normalize("NFKC", "".join(_fold(c) for c in once).casefold())
    return " ".join("".join(_fold(c) for c in folded).split())  # NFKC after casefold can bring punctuation back


@functools.lru_cache(maxsize=1 << 16)
def text_hash(text: str) -> str:
    """Part of a sample's identity: two prompts with the same id but different texts are different samples."""
    return hashlib.sha256(text_identity(text).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1 << 16)
def sample_text_hash(text: str) -> str:
    """Part of a sample's identity (reuse): the exact text the model receives, no more folded than the pipeline
    folds it (it does not: the tokenizers see case and punctuation)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def sample_text_id(prompt: str | None, prompt_id: str) -> str:
    """A sample record's text identity; a record without its text (contract version 1) falls back to its id."""
    return sample_text_hash(prompt) if prompt is not None else f"id:{prompt_id}"


@functools.cache
def _confusables() -> dict[str, str]:
    """Unicode confusables.txt (UTS #39): source character -> its prototype (shipped as rundir/confusables.txt)."""
    table: dict[str, str] = {}
    for line in (Path(__file__).with_name("confusables.txt")).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            source, *target = line.split()
            table[chr(int(source, 16))] = "".join(chr(int(t, 16)) for t in target)
    return table


def skeleton(text: str) -> str:
    """UTS #39's skeleton: NFD, each character replaced by its confusables prototype, NFD again."""
    table = _confusables()
    return unicodedata.normalize("NFD", "".join(table.get(c, c) for c in unicodedata.normalize("NFD", text)))


@functools.lru_cache(maxsize=1 << 16)
def holdout_identity(text: str) -> str:
    """The holdout lock's identity of a text: folded, skeleton, folded again (a pure function of the text)."""
    return text_identity(skeleton(text_identity(text)))


def shared_texts(a: Iterable[tuple[str, str]], b: Iterable[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """The split rule: (id in a, id in b, text) for every text of `a` that is a text of `b` by the holdout identity
    (folded, skeleton) or contains one as a whole phrase."""
    in_b = {holdout_identity(text): pid for pid, text in b}
    found = []
    for pid, text in a:
        mine = holdout_identity(text)
        hit = in_b.get(mine) or next((other for h, other in in_b.items() if contains(mine, h)), None)
        if hit is not None:
            found.append((pid, hit, text))
    return found


def contains(text_id: str, phrase_id: str) -> bool:
    """Whether a holdout identity holds another as a whole phrase (word boundaries), e.g. a holdout text inside a
    longer prompt or inside a JSON line read as plain text."""
    return bool(phrase_id) and f" {phrase_id} " in f" {text_id} "


def cell_key_of(canonical: dict[str, Any]) -> str:
    """First 16 hex digits of the sha256 of the canonical JSON of a cell (run.json["cell"])."""
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# -- folders and models ---------------------------------------------------------------------

DIGEST_CACHE = "digests.json"
# within one process: no file read; (folder, file states) -> (digest, when the digest was taken, ns)
_MEMO: dict[tuple[str, tuple[tuple[str, int, int, int, int], ...]], tuple[str, int]] = {}


def _settled(at_ns: int, mtime_ns: int, ctime_ns: int) -> bool:
    """Whether a digest taken at `at_ns` can answer for a file last changed at max(mtime, ctime): only when it was
    taken a whole timestamp tick after that change (a later write in the same tick could keep every stat field)."""
    return at_ns >= max(mtime_ns, ctime_ns) + TICK_NS


def digest_cache_path() -> Path:
    """Where content digests are cached across processes: `$HYPERGRID_CACHE` (default ~/.cache/hypergrid)."""
    env = os.environ.get("HYPERGRID_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "hypergrid") / DIGEST_CACHE


def _files(folder: Path) -> list[tuple[str, int, int, int, int]]:
    """(relative path, size, mtime_ns, ctime_ns, inode) of every file under `folder`, sorted; hidden files and
    folders skipped."""
    found = []
    for root, dirs, names in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            if name.startswith("."):
                continue
            path = Path(root) / name
            stat = path.stat()
            found.append((path.relative_to(folder).as_posix(), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns,
                          stat.st_ino))
    return sorted(found)


def _file_sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _store_cache(path: Path, cache: dict[str, Any]) -> None:
    """Best effort: an unwritable cache only costs the next process the hashing."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass


def folder_digest(folder: Path | str) -> str:
    """`sha256:<16 hex>` of a folder's files (relative path, size and content of each), cached by file state
    (size, mtime, ctime, inode)."""
    folder = Path(folder).expanduser().resolve()
    files = _files(folder)
    memo_key = (str(folder), tuple(files))
    memo = _MEMO.get(memo_key)
    if memo is not None and all(_settled(memo[1], mtime, ctime) for _, _, mtime, ctime, _ in files):
        return memo[0]
    cache_path = digest_cache_path()
    cache = _load_cache(cache_path)
    known = cache.get(str(folder), {})
    shas, taken, changed = {}, {}, False
    for rel, size, mtime, ctime, inode in files:
        entry = known.get(rel)
        if entry and (entry.get("size"), entry.get("mtime_ns"), entry.get("ctime_ns"), entry.get("ino")) == \
                (size, mtime, ctime, inode) and _settled(int(entry.get("at_ns", 0)), mtime, ctime):
            shas[rel], taken[rel] = entry["sha256"], int(entry["at_ns"])
        else:
            taken[rel] = time.time_ns()
            shas[rel], changed = _file_sha(folder / rel), True
    whole = hashlib.sha256("\n".join(f"{rel}\0{size}\0{shas[rel]}" for rel, size, *_ in files).encode())
    result = f"sha256:{whole.hexdigest()[:16]}"
    if changed or set(known) != set(shas):
        cache[str(folder)] = {rel: {"size": size, "mtime_ns": mtime, "ctime_ns": ctime, "ino": inode, "sha256": shas[rel],
                                    "at_ns": taken[rel]}
                              for rel, size, mtime, ctime, inode in files}
        _store_cache(cache_path, cache)
    _MEMO[memo_key] = (result, min(taken.values(), default=time.time_ns()))
    return result


def hub_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit a hub revision resolves to: from the local cache's refs, else the hub; None when neither answers."""
    import re

    revision = revision or "main"
    if re.fullmatch(r"[0-9a-f]{40}", revision):
        return revision
    from huggingface_hub import constants

    ref = Path(constants.HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}" / "refs" / revision
    if ref.is_file():
        return ref.read_text().strip()
    try:
        from huggingface_hub import HfApi

        return HfApi().model_info(repo_id, revision=revision, timeout=10).sha
    except Exception:  # noqa: BLE001 - any failure to reach the hub means: not resolvable here
        return None


def model_identity(source: str, revision: str | None) -> str:
    """The identity of the weights `from_pretrained(source)` loads: a local folder's digest, or `hub:<commit>`.
    Raises ValueError when a hub revision cannot be resolved (neither cached nor reachable)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return folder_digest(path)
    commit = hub_commit(source, revision)
    if commit is None:
        raise ValueError(f"{source}@{revision or 'main'}: the revision cannot be resolved to a commit "
                         "(not in the local Hugging Face cache, and the hub does not answer)")
    return f"hub:{commit}"
