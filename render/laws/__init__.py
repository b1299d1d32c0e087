"""The laws of an experiment (a named climb), enforced by content and evidence, in one package that the
renderer's preflight and the climb (assess) both read:

    ledger   one append-only ledger per experiment, in the user's state folder and every out_root it used
    holdout  the holdout locked by text identity; opened only by the claimed final's token
    anchor   the anchor frozen at the first launch (its cell key holds the model's weights identity)
    rule     the decision rule frozen at the first launch; changes only as recorded amendments
    budget   spend across out_roots, reservations, admission, the running sweep's guard
    final    one claim, its token spent on completion, its result kept in the ledger

docs/climb.md states each law and the content it is enforced by.
"""

from __future__ import annotations

from typing import Any, Sequence

from render.laws.anchor import ExperimentGuard, check_anchor, frozen_anchor, record_anchor
from render.laws.final import FinalAlreadyClaimed, claim_final, complete_final, final_record, final_result
from render.laws.holdout import (HoldoutLocked, check_holdout, content_hash, holdout_samples, open_claim,
                                 option_prompts, register_holdout, reserved, token_spent)
from render.laws.ledger import Ledger, all_ledgers, experiment_dir, user_state_dir
from render.laws.rule import RuleChanged, amend_rule, canon, check_rule, freeze_rule, rule_in_force, rule_of
from render.compose.confpath import shadowed_message, shadowing
from render.rundir import check_name, shared_texts
from render.suites._base import shown


def experiment_rule(experiment: Any) -> dict[str, Any]:
    """The decision rule of a composed experiment node, its splits read from the files their options name."""
    _, dev = option_prompts(str(experiment["dev"]))
    _, holdout = option_prompts(str(experiment["holdout"]))
    return rule_of(experiment, content_hash(dev), content_hash(holdout))


def check_experiment(cfg: Any, overrides: Sequence[str], job: Any) -> None:
    """Raise ExperimentGuard, RuleChanged or HoldoutLocked when this cell breaks its experiment's laws. The
    holdout lock holds for every render, with or without an experiment."""
    check_holdout(job, cfg)
    experiment = cfg.get("experiment")
    if experiment is None:
        return
    name = check_name(experiment.name, "experiment.name")
    files = shadowing("experiment", name)
    if files is not None:  # a user's experiment of a shipped name would climb under the shipped rule
        raise ExperimentGuard(shadowed_message("experiment", name, files))
    anchored = [o for o in overrides if o.lstrip("+~").startswith("model.anchor")]
    if anchored:
        raise ExperimentGuard(f"experiment {name}: the anchor is frozen; remove {' '.join(anchored)} "
                              "(a different reference needs a new experiment)")
    (dev_file, dev), (holdout_file, holdout) = option_prompts(experiment.dev), option_prompts(experiment.holdout)
    shared = shared_texts([(p.id, p.text) for p in dev], [(p.id, p.text) for p in holdout])
    if shared:
        dev_id, holdout_id, text = shared[0]
        raise ExperimentGuard(f"experiment {name}: prompts {experiment.dev} ({dev_file}) and {experiment.holdout} "
                              f"({holdout_file}) share {len(shared)} text(s), e.g. {dev_id} = {holdout_id} ({shown(text)})")
    ledger = Ledger(name, job.out_root)
    check_anchor(ledger, job.anchor)
    check_rule(ledger, rule_of(experiment, content_hash(dev), content_hash(holdout), rule_in_force(ledger)[0]))


def record_launch(jobs: Sequence[Any]) -> None:
    """What an experiment's first launch fixes for good (its anchor, its decision rule, its holdout's reservation),
    and, on every launch, the cross-check of its ledger's copies (this out_root becomes one of them); every launch,
    with or without an experiment, records its out_root among the machine's known roots (render.laws.lock)."""
    from render.laws.lock import remember_root

    done: set[tuple[str, str]] = set()
    for job in jobs:
        remember_root(job.out_root)  # a holdout previewed here, before or outside any experiment, is found by finals
        experiment = job.experiment
        if experiment is None or (experiment.name, str(job.out_root)) in done:
            continue
        done.add((experiment.name, str(job.out_root)))
        ledger = Ledger(experiment.name, job.out_root)
        with ledger.lock():
            ledger.sync()
            record_anchor(ledger, job.anchor)
            freeze_rule(ledger, experiment_rule(experiment.node))
            register_holdout(ledger, str(experiment.node["holdout"]))


__all__ = [
    "ExperimentGuard", "FinalAlreadyClaimed", "HoldoutLocked", "Ledger", "RuleChanged", "all_ledgers", "amend_rule",
    "canon", "check_anchor", "check_experiment", "check_holdout", "check_rule", "claim_final", "complete_final",
    "content_hash", "experiment_dir", "experiment_rule", "final_record", "final_result", "freeze_rule",
    "frozen_anchor", "holdout_samples", "open_claim", "option_prompts", "record_anchor", "record_launch",
    "register_holdout", "reserved", "rule_in_force", "rule_of", "token_spent", "user_state_dir",
]
