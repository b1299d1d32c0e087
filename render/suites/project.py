"""The project's own prompt suite (render/prompts/suite-dev.jsonl, suite-holdout.jsonl; docs/quality.md)
and the rule that splits it, deterministically by content and stratified by category.

Within each category the prompts are ranked by their text's content hash; the first third (rounded)
is the holdout, the rest dev. Each split is then ordered round-robin over the categories (rank 0 of
every category, then rank 1, ...), so `prompts.limit=N`, the climb's rungs, take every category in
turn. The shipped files are what `split_suite` makes of their union (a test holds them to it); to
add prompts, append them to either file and run `python -m render.suites.project`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from render.rundir import text_hash
from render.suites._base import shown
from render.suites._base import Prompt, PromptError, content_id

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"
DEV_FILE, HOLDOUT_FILE = "suite-dev.jsonl", "suite-holdout.jsonl"
HOLDOUT_FRACTION = 1 / 3
ID_PREFIX = "hg"


def _ranked(prompts: list[Prompt]) -> dict[str, list[Prompt]]:
    by_category: dict[str, list[Prompt]] = defaultdict(list)
    for prompt in prompts:
        if not prompt.category:
            raise PromptError(f"suite prompt {prompt.id!r} ({shown(prompt.text)}) has no category")
        by_category[prompt.category].append(prompt)
    return {c: sorted(ps, key=lambda p: (text_hash(p.text), p.text)) for c, ps in sorted(by_category.items())}


def _round_robin(groups: dict[str, list[Prompt]]) -> list[Prompt]:
    longest = max((len(g) for g in groups.values()), default=0)
    return [group[rank] for rank in range(longest) for group in groups.values() if rank < len(group)]


def split_suite(prompts: list[Prompt]) -> tuple[list[Prompt], list[Prompt]]:
    """(dev, holdout): per category, the lowest-hash third is the holdout; both ordered round-robin."""
    dev: dict[str, list[Prompt]] = {}
    holdout: dict[str, list[Prompt]] = {}
    for category, ranked in _ranked(prompts).items():
        n_holdout = round(len(ranked) * HOLDOUT_FRACTION)
        holdout[category], dev[category] = ranked[:n_holdout], ranked[n_holdout:]
    return _round_robin(dev), _round_robin(holdout)


def suite_prompt(text: str, category: str) -> Prompt:
    """A suite prompt: its id is its category and content hash, so it never changes with the file's order."""
    return Prompt(content_id(f"{ID_PREFIX}-{category}", text), text, category)


def write_manifest(path: Path, prompts: list[Prompt]) -> None:
    lines = [json.dumps({"id": p.id, "text": p.text, "category": p.category}, ensure_ascii=False) for p in prompts]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def rewrite(folder: Path = PROMPTS_DIR) -> tuple[int, int]:
    """Re-split the union of the shipped files (after prompts were added) and write both back."""
    from render.suites import read_suite

    union = [suite_prompt(p.text, p.category or "") for f in (DEV_FILE, HOLDOUT_FILE) if (folder / f).is_file()
             for p in read_suite(folder / f, "manifest")]
    dev, holdout = split_suite(union)
    write_manifest(folder / DEV_FILE, dev)
    write_manifest(folder / HOLDOUT_FILE, holdout)
    return len(dev), len(holdout)


if __name__ == "__main__":
    n_dev, n_holdout = rewrite()
    print(f"wrote {PROMPTS_DIR / DEV_FILE} ({n_dev} prompts) and {PROMPTS_DIR / HOLDOUT_FILE} ({n_holdout})")
