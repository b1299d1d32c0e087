"""The holdout is locked by content: rendered once, by its experiment's claimed final, for the final's cells.

A text is *reserved* when it belongs to a shipped holdout manifest or to the holdout of an experiment
that ever launched (its ledger's `holdout` entry). Any render that includes a reserved text, compared
by the holdout identity (render.rundir.identity.holdout_identity: NFKC, invisible characters,
punctuation, spacing and case folded, then the Unicode TR39 confusables skeleton), or a prompt that
contains a reserved text as a whole phrase (a longer prompt, a JSON or CSV line read by the wrong
`prompts.format`), whatever the option name, split label, file or id, is refused at preflight, unless
it carries the token of that experiment's claimed, unfinished final and renders only the final's cells.
The holdout is spent per content: its samples are found by the same identity in every run directory.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Iterable

from omegaconf import DictConfig

from render.errors import RenderError
from render.laws.ledger import Kind, Ledger, all_ledgers
from render.compose.splits import PACKAGE_PROMPTS, Prompt, load_prompts
from render.rundir import holdout_identity, scan_runs, text_hash


class HoldoutLocked(RenderError, ValueError):
    """A render that would spend a holdout outside its claimed final."""


def shipped_holdouts() -> list[Path]:
    """Every holdout manifest the package ships (each is reserved whether or not an experiment uses it)."""
    return sorted(PACKAGE_PROMPTS.glob("*holdout*.jsonl"))


def option_prompts(option: str) -> tuple[str, list[Prompt]]:
    """(file, prompts) of a prompts option, from the file the option points to (not its name), as Hydra composes
    the option (render.compose.confpath.compose_option: an option that extends another through its defaults list too)."""
    import render.compose.schema  # noqa: F401  (registers schema/prompts, which every prompts option names)
    from render.compose.confpath import compose_option, conf_dirs

    node = compose_option("prompts", option)
    if node is None:
        raise HoldoutLocked(f"prompts option {option!r} not found in "
                            f"{', '.join(str(d / 'prompts') for d in conf_dirs())}")
    if not isinstance(node, DictConfig) or node.get("file") is None:
        raise HoldoutLocked(f"prompts={option}: a prompts option names its file (file, format, dataset)")
    file = str(node.file)  # the whole split, never its limit
    return file, load_prompts(file, None, str(node.get("format") or "auto"), node.get("dataset"),
                              node.get("revision"), str(node.get("order") or "stratified"))


def content_hash(prompts: Iterable[Prompt]) -> str:
    """A split's identity: the sha256 of its sorted text identities."""
    return hashlib.sha256("\n".join(sorted(text_hash(p.text) for p in prompts)).encode()).hexdigest()[:16]


def register_holdout(ledger: Ledger, option: str) -> None:
    """Reserve an experiment's holdout texts in its ledger (idempotent, by content)."""
    file, prompts = option_prompts(option)
    content = content_hash(prompts)
    if not any(e.get("content") == content for e in ledger.entries(Kind.HOLDOUT)):
        ledger.append(Kind.HOLDOUT, option=option, file=file, content=content,
                      sha=sorted({text_hash(p.text) for p in prompts}),
                      identities=sorted({holdout_identity(p.text) for p in prompts}))


class Reserved:
    """The reserved texts and their owners: by folded hash (ledger entries of older versions), by holdout identity,
    and by containment of a holdout identity in a prompt's."""

    def __init__(self) -> None:
        self.by_sha: dict[str, str] = {}
        self.by_identity: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None

    def add(self, owner: str, *, sha: Iterable[str] = (), identities: Iterable[str] = ()) -> None:
        for value in sha:
            self.by_sha.setdefault(value, owner)
        for value in identities:
            if value:
                self.by_identity.setdefault(value, owner)
        self._pattern = None

    def merge(self, other: Reserved) -> None:
        """Take `other`'s reserved texts too (each keeps its first owner)."""
        for value, owner in other.by_sha.items():
            self.by_sha.setdefault(value, owner)
        for value, owner in other.by_identity.items():
            self.by_identity.setdefault(value, owner)
        self._pattern = None

    def __contains__(self, text: str) -> bool:
        return self.owner(text) is not None

    def owner(self, text: str) -> str | None:
        """Whose holdout `text` is (or contains), or None."""
        found = self.by_sha.get(text_hash(text))
        identity = holdout_identity(text)
        found = found or self.by_identity.get(identity)
        if found is None and self.by_identity:
            match = self.pattern().search(identity)
            found = self.by_identity[match.group(1)] if match else None
        return found

    def pattern(self) -> re.Pattern[str]:
        if self._pattern is None:  # longest first, so a longer reserved phrase is named before a shorter one in it
            phrases = sorted(self.by_identity, key=len, reverse=True)
            self._pattern = re.compile(r"(?:^| )(" + "|".join(map(re.escape, phrases)) + r")(?= |$)")
        return self._pattern


def reserved(out_root: Path) -> Reserved:
    """Whose holdout each reserved text is: the shipped manifests, and every experiment's with a ledger."""
    owners = Reserved()
    for manifest in shipped_holdouts():
        owners.add(f"the shipped holdout manifest {manifest.name}",
                   identities=[holdout_identity(p.text) for p in load_prompts(str(manifest))])
    for ledger in all_ledgers(out_root):
        for entry in ledger.entries(Kind.HOLDOUT):
            owners.add(f"experiment {ledger.name}'s holdout ({entry.get('option')})", sha=entry.get("sha", []),
                       identities=entry.get("identities", []))
    return owners


def holdout_samples(out_roots: Iterable[Path], prompts: list[Prompt]) -> list[str]:
    """Run folders known to any of `out_roots` that hold samples of these prompts' texts (a spent holdout), by the
    holdout identity (and containment), whatever experiment, option or file rendered them."""
    wanted = Reserved()
    wanted.add("holdout", identities=[holdout_identity(p.text) for p in prompts])
    found: set[str] = set()
    for out_root in out_roots:
        if Path(out_root).is_dir():
            found |= {str(run.path) for run in scan_runs(Path(out_root))
                      if any(s.prompt is not None and s.prompt in wanted for s in run.samples)}
    return sorted(found)


def spent_elsewhere(ledger: Ledger, prompts: Iterable[Prompt]) -> str | None:
    """Whose final already spent these holdout texts, or None: the holdout is spent per content, whatever the
    experiment is called. Every other experiment with a ledger in the user's state folder or under one of this
    experiment's out_roots is read; a claim spends the texts of the holdout it was claimed on (by holdout identity,
    or by the folded hash of a ledger entry of an older version). Then the holdout lock (render.laws.lock: the
    machine's and every out_root's) for claims and finals of any other body of evidence: another experiment, or
    this name under another ledger (a fresh state folder, a new out_root)."""
    texts = list(prompts)
    identities, shas = {holdout_identity(p.text) for p in texts}, {text_hash(p.text) for p in texts}
    seen = {ledger.name}
    for out_root in ledger.out_roots():
        for other in all_ledgers(out_root):
            if other.name in seen:
                continue
            seen.add(other.name)
            for claim in other.entries(Kind.CLAIM):
                holdouts = [e for e in other.entries(Kind.HOLDOUT)
                            if claim.get("holdout_content") in (None, e.get("content"))]
                shared = (identities & {i for e in holdouts for i in e.get("identities", [])}
                          or shas & {h for e in holdouts for h in e.get("sha", [])})
                if shared:
                    return (f"experiment {other.name}'s final claimed {len(shared)} of its texts on "
                            f"{claim.get('at', '?')}: the holdout is spent per content, whatever the experiment is "
                            "called. Give this experiment a fresh holdout manifest")
    from render.laws.lock import locked_by_others

    return locked_by_others(ledger, identities)


def open_claim(ledger: Ledger, content: str) -> dict[str, Any] | None:
    """The experiment's claim of its final on this holdout, whichever copy of the ledger keeps it."""
    return next((c for c in ledger.entries(Kind.CLAIM) if c.get("holdout_content") in (None, content)), None)


def token_spent(ledger: Ledger, token: str | None) -> bool:
    """A claim's token opens the final's samples until the final completes; then it is spent."""
    return token is not None and any(e.get("token") == token for e in ledger.entries(Kind.TOKEN_SPENT))


def check_holdout(job: Any, cfg: Any) -> None:
    """Refuse a render that includes a reserved text, unless it is the claimed final of that experiment's holdout."""
    owners = reserved(job.out_root)
    hits = [p for p in job.prompts if p.text in owners]
    experiment = cfg.get("experiment")
    if experiment is not None and experiment.final:
        ledger = Ledger(experiment.name, job.out_root)
        _, holdout = option_prompts(experiment.holdout)
        claim = open_claim(ledger, content_hash(holdout))
        if claim is None:
            raise HoldoutLocked(f"experiment {experiment.name}: experiment.final=true without a claimed final; "
                                f"run `assess climb {experiment.name} --final`")
        if not experiment.final_token or experiment.final_token != claim.get("token"):
            raise HoldoutLocked(f"experiment {experiment.name}: experiment.final=true works only with the token of its "
                                f"claimed final (experiment.final_token, in the commands `assess climb {experiment.name} "
                                "--final` printed)")
        if token_spent(ledger, experiment.final_token):
            raise HoldoutLocked(f"experiment {experiment.name}: its final is complete and its token is spent; the "
                                f"holdout cannot be rendered again. See `assess climb {experiment.name} --final`")
        # the claim's cells; what the runner renders alongside one of them (its anchor, a parallel cell's width-1
        # twin: render.cell.companions) is rendered because that cell is, and is allowed with it
        if job.cell.key not in set(claim.get("cells") or []):
            raise HoldoutLocked(f"experiment {experiment.name}: cell {job.cell.describe()} is not one of its final's cells "
                                "(the incumbent, the anchor, the steps-only control)")
        holdout_texts = {holdout_identity(p.text) for p in holdout}
        others = [p for p in job.prompts if holdout_identity(p.text) not in holdout_texts]
        if others:  # the token (and the reserve it opens) is the final's: its holdout samples, nothing else
            raise HoldoutLocked(f"experiment {experiment.name}: the final's token opens its holdout's samples only; "
                                f"prompts={cfg.prompts.name} has {len(others)} other text(s), e.g. {others[0].id} = "
                                f"{others[0].text!r}")
        hits = [p for p in hits if holdout_identity(p.text) not in holdout_texts]
    if hits:
        owner = owners.owner(hits[0].text)
        raise HoldoutLocked(f"prompts={cfg.prompts.name} ({cfg.prompts.file}) includes {len(hits)} text(s) of "
                            f"a locked holdout ({owner}), e.g. {hits[0].id} = {hits[0].text!r}; the holdout is rendered only by an "
                            "experiment's final (`assess climb <name> --final`), once")


def check_timed_texts(ledger: Ledger | None, out_roots: Iterable[Path], texts: Iterable[str], cells: Iterable[str], *,
                      final: bool) -> None:
    """Refuse timing (a side-by-side session: render.timing.sessions) on reserved texts, as a render is refused: a
    holdout is seen once, by its final. Only the final's own timing (`final`) of its open claim's cells, on that
    claim's holdout and before its token is spent, may time them; `assess retime` by hand never does."""
    owners = Reserved()
    for out_root in dict.fromkeys(out_roots) or [Path.cwd()]:
        owners.merge(reserved(out_root))
    hits = [t for t in texts if t in owners]
    if hits and final and ledger is not None:
        claim = next((c for c in ledger.entries(Kind.CLAIM) if not token_spent(ledger, c.get("token"))), None)
        if claim is not None and set(cells) <= set(claim.get("cells") or []):
            ours = {i for e in ledger.entries(Kind.HOLDOUT) if claim.get("holdout_content") in (None, e.get("content"))
                    for i in e.get("identities", [])}
            hits = [t for t in hits if holdout_identity(t) not in ours]
    if hits:
        spent = " (its final is complete: its token is spent)" if ledger is not None and ledger.entries(Kind.TOKEN_SPENT) else ""
        raise HoldoutLocked(f"{len(hits)} text(s) to time belong to a locked holdout ({owners.owner(hits[0])}{spent}), "
                            f"e.g. {hits[0]!r}: a holdout is seen once, by its final's renders and timing; nothing was "
                            "timed. Time the experiment's dev runs instead (the final's own timing is `assess climb "
                            "<name> --final`'s)")
