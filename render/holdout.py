"""The holdout is locked by content, and its final is claimed once, by evidence.

A text is *reserved* when it belongs to the shipped holdout manifest or to the holdout of an experiment
that ever launched a render (registered then, in `<out_root>/.hypergrid/holdouts.jsonl` and in the
user's state folder). Any render that includes a reserved text (compared by `text_hash`, whatever
the option name, split label, file or id) is refused at preflight, unless it is that experiment's
claimed final, carries the claim's token and renders only the final's cells.

A final's claim is kept in three places keyed by the experiment and its holdout's content hash:
the experiment folder (FINAL.json), the out_root's and the user's `finals.jsonl`. `assess climb
--final` also records it in the index and refuses when holdout samples already exist anywhere:
deleting one file, another out_root or another working directory does not reset it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

from omegaconf import OmegaConf

from render.errors import RenderError
from render.prompts import PACKAGE_PROMPTS, Prompt, load_prompts
from render.rundir import STATE_DIR, append_record, check_name, now_iso, read_lines, scan_runs, text_hash

SHIPPED_HOLDOUT = "holdout.jsonl"
HOLDOUTS = "holdouts.jsonl"
FINALS = "finals.jsonl"
FINAL = "FINAL.json"


class HoldoutLocked(RenderError, ValueError):
    """A render that would spend a holdout outside its claimed final."""


def experiment_dir(out_root: Path, name: str) -> Path:
    """An experiment's folder under the output root: its claim, frozen anchor, generations, budget."""
    return out_root / "experiments" / check_name(name, "experiment.name")


def user_state_dir() -> Path:
    """The user's own record of holdouts and finals, across output roots (`$HYPERGRID_STATE`)."""
    env = os.environ.get("HYPERGRID_STATE")
    return Path(env).expanduser() if env else Path.home() / ".local" / "state" / "hypergrid"


def registries(out_root: Path) -> list[Path]:
    """Where the evidence is kept twice: the output root's state folder and the user's."""
    return [out_root / STATE_DIR, user_state_dir()]


def conf_dirs() -> list[Path]:
    """Where prompts options live: the package's configs, and the user's ./conf."""
    return [Path(__file__).parent / "conf", Path.cwd() / "conf"]


def option_prompts(option: str) -> tuple[str, list[Prompt]]:
    """(file, prompts) of a prompts option, from the file the option points to (not its name)."""
    for folder in reversed(conf_dirs()):
        path = folder / "prompts" / f"{option}.yaml"
        if path.is_file():
            file = str(OmegaConf.load(path).file)
            return file, load_prompts(file)
    raise HoldoutLocked(f"prompts option {option!r} not found in {', '.join(str(d / 'prompts') for d in conf_dirs())}")


def content_hash(prompts: Iterable[Prompt]) -> str:
    """A split's identity: the sha256 of its sorted normalised text hashes."""
    return hashlib.sha256("\n".join(sorted(text_hash(p.text) for p in prompts)).encode()).hexdigest()[:16]


def register_holdout(out_root: Path, experiment: str, option: str) -> None:
    """Reserve an experiment's holdout texts (idempotent)."""
    file, prompts = option_prompts(option)
    entry = {"experiment": experiment, "option": option, "file": file, "content": content_hash(prompts),
             "sha": sorted({text_hash(p.text) for p in prompts}), "registered_at": now_iso()}
    for folder in registries(out_root):
        known = read_lines(folder / HOLDOUTS)
        if not any(e.get("experiment") == experiment and e.get("content") == entry["content"] for e in known):
            folder.mkdir(parents=True, exist_ok=True)
            append_record(folder / HOLDOUTS, entry)


def reserved(out_root: Path) -> dict[str, str]:
    """text hash -> whose holdout it is: the shipped manifest, and every registered experiment's."""
    owners = {text_hash(p.text): "the shipped holdout manifest" for p in load_prompts(str(PACKAGE_PROMPTS / SHIPPED_HOLDOUT))}
    for folder in registries(out_root):
        for entry in read_lines(folder / HOLDOUTS):
            for sha in entry.get("sha", []):
                owners.setdefault(sha, f"experiment {entry.get('experiment')}'s holdout ({entry.get('option')})")
    return owners


def final_claim(out_root: Path, experiment: str, content: str) -> dict[str, Any] | None:
    """The claim of this experiment's final on this holdout, from whichever record survives."""
    path = experiment_dir(out_root, experiment) / FINAL
    if path.is_file():
        claim = json.loads(path.read_text())
        if claim.get("holdout_content") in (None, content):
            return claim
    for folder in registries(out_root):
        for entry in read_lines(folder / FINALS):
            if entry.get("experiment") == experiment and entry.get("holdout_content") == content:
                return entry
    return None


def record_claim(out_root: Path, claim: dict[str, Any]) -> None:
    for folder in registries(out_root):
        folder.mkdir(parents=True, exist_ok=True)
        append_record(folder / FINALS, claim)


def holdout_samples(out_root: Path, prompts: list[Prompt]) -> list[str]:
    """Run folders known to `out_root` that hold samples of these prompts' texts (evidence of a spent holdout)."""
    wanted = {text_hash(p.text) for p in prompts}
    return sorted(str(run.path) for run in scan_runs(out_root)
                  if any((s.prompt_sha or (text_hash(s.prompt) if s.prompt else None)) in wanted for s in run.samples))


def check_holdout(job: Any, cfg: Any) -> None:
    """Refuse a render that includes a reserved text, unless it is the claimed final of that experiment's holdout."""
    owners = reserved(job.out_root)
    hits = [p for p in job.prompts if text_hash(p.text) in owners]
    experiment = cfg.get("experiment")
    if experiment is not None and experiment.final:
        _, holdout = option_prompts(experiment.holdout)
        claim = final_claim(job.out_root, experiment.name, content_hash(holdout))
        if claim is None:
            raise HoldoutLocked(f"experiment {experiment.name}: experiment.final=true without a claimed final; "
                                f"run `assess climb {experiment.name} --final`")
        if not experiment.final_token or experiment.final_token != claim.get("token"):
            raise HoldoutLocked(f"experiment {experiment.name}: experiment.final=true works only with the token of its "
                                f"claimed final (experiment.final_token, in the commands `assess climb {experiment.name} "
                                "--final` printed)")
        allowed = set(claim.get("cells") or [])
        keys = {job.cell.key} | ({job.anchor.key} if job.render_anchor else set())
        if not keys <= allowed:
            raise HoldoutLocked(f"experiment {experiment.name}: cell {job.cell.describe()} is not one of its final's cells "
                                "(the incumbent, the anchor, the steps-only control)")
        holdout_texts = {text_hash(p.text) for p in holdout}
        hits = [p for p in hits if text_hash(p.text) not in holdout_texts]
    if hits:
        owner = owners[text_hash(hits[0].text)]
        raise HoldoutLocked(f"prompts={cfg.prompts.name} ({cfg.prompts.file}) includes {len(hits)} text(s) of "
                            f"a locked holdout ({owner}), e.g. {hits[0].id} = {hits[0].text!r}; the holdout is rendered only by an "
                            "experiment's final (`assess climb <name> --final`), once")
