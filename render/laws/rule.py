"""The decision rule of an experiment, frozen at its first launch like its anchor.

The rule is everything a verdict depends on besides the samples: the quality metric, its parity band
and alpha, the rungs and eta of successive halving, the objective and the confidence of its speed
comparison, the axes, the seeds, the splits (by the content hash of their texts, not by option name)
and the budget. It is recorded in the ledger at the first launch; a later launch, climb or report whose
composed rule differs is refused with both versions shown, unless the change was taken as an explicit
amendment (`assess climb <name> --amend`), which the ledger keeps and every later generation and report
shows.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

from render.errors import RenderError
from render.laws.gpu_budget import Budget, BudgetError
from render.laws.ledger import Kind, Ledger
from render.rundir.states import Name


class RuleChanged(RenderError, ValueError):
    """The experiment's composed decision rule differs from the one in force; nothing was launched."""


class BadRule(RenderError, ValueError):
    """A value of the decision rule is out of its range; nothing was launched."""


TESTS = ("noninferiority", "equivalence")  # experiment.quality.test (assess.statistics.compare.ParityTest); a new experiment's default first
LEGACY_TEST = "equivalence"  # the test of a rule frozen before quality.test existed: it keeps its TOST


def rule_test(rule: dict[str, Any] | None) -> str:
    """The parity test a rule says (a rule without the key was frozen before it existed: equivalence)."""
    return str(((rule or {}).get("quality") or {}).get("test", LEGACY_TEST))


def quality_test(quality: dict[str, Any], in_force: dict[str, Any] | None) -> str:
    """experiment.quality.test, checked; unset, the rule in force's (a rule frozen before the key existed keeps its
    equivalence test), else non-inferiority."""
    value = quality.get("test")
    if value is None:
        return rule_test(in_force) if in_force is not None else TESTS[0]
    if str(value) not in TESTS:
        raise BadRule(f"experiment.quality.test={value}: valid tests are {', '.join(TESTS)} (noninferiority: parity when "
                      "the cell is no worse than the anchor by more than the band; equivalence: within +-band, TOST)")
    return str(value)


class Objective(Name):
    """What the climb minimises among cells at parity (experiment.objective; members named as their values)."""

    latency = "latency"  # the median warm latency per image (s/image)
    gpu_seconds = "gpu_seconds"  # the median warm GPU-seconds per image: latency x the cell's width / its batch (throughput)

    def per_image(self, latency: float, width: float) -> float:
        """A warm latency of a cell holding `width` GPUs per image (its parallel width over its batch), in this
        objective's units: a width-2 cell wins on GPU-seconds only when more than twice as fast per image, a batch-4
        cell whenever its call takes less than 4 single calls."""
        return latency * width if self is Objective.gpu_seconds else latency

    @property
    def unit(self) -> str:
        return "GPU-s/image" if self is Objective.gpu_seconds else "s/image"

    @property
    def text(self) -> str:
        """The objective in words, as the climb's output names it."""
        return (f"{self.value} (median warm latency x the cell's GPUs / its batch, {self.unit})" if self is Objective.gpu_seconds
                else f"{self.value} (median warm {self.unit})")


def check_search(exp: dict[str, Any]) -> None:
    """The search's own ranges, refused alike by the renderer (at launch) and assess (at load)."""
    try:
        eta = int(exp.get("eta"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise BadRule(f"experiment.eta={exp.get('eta')!r}: the halving factor must be an integer >= 2") from None
    if eta < 2:
        raise BadRule(f"experiment.eta={eta}: the halving factor must be >= 2")
    objective = exp.get("objective")
    if str(objective) not in {o.value for o in Objective}:
        raise BadRule(f"experiment.objective={objective}: valid objectives are {', '.join(o.value for o in Objective)}")
    check_quality_metric(str((exp.get("quality") or {}).get("metric")))


def check_quality_metric(metric: str) -> None:
    """The climb's quality metric: one whose parity band is defined (render.compose.metric_registry: a climbable metric)."""
    from render.compose.metric_registry import SPECS, climb_metric_names

    valid = climb_metric_names()
    if metric not in valid:
        why = (f"parity is a band around the anchor's own value, and {metric} of the anchor against itself has "
               "none; " if metric in SPECS and SPECS[metric].is_quality else "")
        raise BadRule(f"experiment.quality.metric={metric}: {why}valid metrics are {', '.join(valid)}")


SPEED_CONFIDENCE = 0.95  # experiment.speed.confidence by default (render/compose/schema.py SpeedConf); also the rule's absence


def speed_confidence(experiment: Any) -> float:
    """experiment.speed.confidence, checked: the confidence of "faster beyond noise" in the climb's choice."""
    speed = _plain(experiment).get("speed") or {}
    value = speed.get("confidence", SPEED_CONFIDENCE)
    try:
        confidence = float(value)
    except (TypeError, ValueError):
        confidence = math.nan
    if not 0.5 <= confidence < 1.0:
        raise BadRule(f"experiment.speed.confidence={value}: must be in [0.5, 1), e.g. 0.95 (the confidence with "
                      "which a cell must be faster than another before it takes the incumbent's place on speed)")
    return confidence


def canon(value: Any) -> str:
    """The canonical text of an axis value, as an override writes it (8, 0.3, fbcache, true)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if value is None:
        return "null"
    text = str(value)
    try:
        return canon(float(text)) if re.fullmatch(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?", text) else text
    except ValueError:
        return text


def _plain(node: Any) -> Any:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig | ListConfig) else node


def rule_of(experiment: Any, dev_content: str, holdout_content: str, in_force: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    """The decision rule of a composed experiment node (its splits given by their content hashes); `in_force`, the
    ledger's rule in force, supplies what the node leaves unset (quality.test)."""
    exp = _plain(experiment)
    check_search(exp)
    quality = dict(exp.get("quality") or {})
    try:
        budget = Budget.of(exp.get("budget"))
    except BudgetError as error:
        raise BadRule(str(error)) from None
    # the per-category rule enters only when it changes a verdict: a rule frozen before these keys existed (or
    # with them at their defaults) stays the same rule
    per_category = {"per_category": True, "category_min_prompts": int(quality.get("category_min_prompts") or 8)} \
        if quality.get("per_category") else {}
    # the parity test: a rule without the key is an equivalence rule (frozen before it existed), so the key is written
    # only for non-inferiority, and an unset test keeps the rule in force's
    test = quality_test(quality, in_force)
    tested = {} if test == LEGACY_TEST else {"test": test}
    confidence = speed_confidence(exp)  # likewise: at its default, a rule frozen before it existed stays the same
    speed = {} if confidence == SPEED_CONFIDENCE else {"speed": {"confidence": confidence}}
    models = metric_models()  # likewise: with no metric model chosen by the environment, the rule stays the same
    return {
        "quality": {"metric": str(quality.get("metric")), "band": float(quality["band"]),
                    "alpha": float(quality["alpha"]), **tested, **per_category},
        "rungs": [int(r) for r in exp.get("rungs") or []],
        "eta": int(exp.get("eta")),
        "objective": str(exp.get("objective")),
        **speed,
        **({"metric_models": models} if models else {}),
        "axes": {str(k): [canon(v) for v in values] for k, values in (exp.get("axes") or {}).items()},
        "seeds": [int(s) for s in (exp.get("seeds") if isinstance(exp.get("seeds"), list) else [exp.get("seeds")])],
        "splits": {"dev": {"option": str(exp.get("dev")), "content": dev_content},
                   "holdout": {"option": str(exp.get("holdout")), "content": holdout_content}},
        "budget": budget.record(),
    }


METRIC_MODEL_ENV = re.compile(r"HYPERGRID_[A-Z0-9_]+_MODEL")  # every variable that selects a metric's model


def metric_models() -> dict[str, dict[str, str]]:
    """The metric models the environment selects (HYPERGRID_CLIP_MODEL, HYPERGRID_PICKSCORE_MODEL, ...): each
    variable with its value and the model's identity (a local folder's content digest; a hub id as given), so a
    verdict cannot change its metric's model without an amendment."""
    import os

    from render.rundir import folder_digest

    found = {}
    for name in sorted(os.environ):
        value = os.environ[name]
        if METRIC_MODEL_ENV.fullmatch(name) and value:
            folder = Path(value).expanduser()
            found[name] = {"value": value, "identity": folder_digest(folder) if folder.is_dir() else f"hub-id:{value}"}
    return found


def rule_digest(rule: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(rule, sort_keys=True).encode()).hexdigest()[:16]


def rule_in_force(ledger: Ledger) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the rule in force, the amendments in order): the frozen rule with its latest amendment applied."""
    frozen = ledger.first(Kind.RULE)
    amendments = ledger.entries(Kind.AMENDMENT)
    if frozen is None:
        return None, amendments
    return (amendments[-1]["rule"] if amendments else frozen["rule"]), amendments


def differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """`key: old -> new` for every leaf that differs."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {json.dumps(a)} -> {json.dumps(b)}")
    return out


def recorded_rules(ledger: Ledger) -> list[dict[str, Any]]:
    """Every version of the rule the ledger holds: the frozen one, then each amendment's."""
    frozen = ledger.first(Kind.RULE)
    return [] if frozen is None else [frozen["rule"], *(a["rule"] for a in ledger.entries(Kind.AMENDMENT))]


def check_rule(ledger: Ledger, rule: dict[str, Any]) -> None:
    """Refuse a composed rule that differs from every version the ledger holds (both shown, and how to amend). The
    rule in force is the ledger's: a config that composes an earlier version (the experiment's file as it was
    before an amendment, without the amendment's --set) runs under the rule in force, and needs nothing repeated."""
    current, _ = rule_in_force(ledger)
    if current is None or current == rule or rule in recorded_rules(ledger):
        return
    changes = differences(current, rule)
    raise RuleChanged(
        f"experiment {ledger.name}: the decision rule is frozen since its first launch, and this one differs:\n  "
        + "\n  ".join(changes)
        + f"\n  in force: {json.dumps(current, sort_keys=True)}\n  this run: {json.dumps(rule, sort_keys=True)}\n"
        f"Restore the experiment's config, or take the change as a recorded amendment: "
        f"assess climb {ledger.name} --amend \"<why>\" (with the same --set overrides)")


def budget_in_force(ledger: Ledger, composed: Any) -> Budget:
    """The experiment's budget under the rule in force (an amended gpu_hours holds without its --set); the composed
    budget when nothing is frozen yet."""
    current, _ = rule_in_force(ledger)
    return Budget.of(current["budget"] if current is not None else composed)


def freeze_rule(ledger: Ledger, rule: dict[str, Any]) -> None:
    """At the first launch: record the rule (idempotent)."""
    if ledger.first(Kind.RULE) is None:
        ledger.append(Kind.RULE, rule=rule, digest=rule_digest(rule))


def amend_rule(ledger: Ledger, rule: dict[str, Any], reason: str) -> dict[str, Any] | None:
    """Record `rule` as an amendment of the one in force, with its reason; None when nothing changes."""
    current, _ = rule_in_force(ledger)
    if current is None:
        freeze_rule(ledger, rule)
        return None
    if current == rule:
        return None
    if ledger.first(Kind.CLAIM) is not None:
        raise RuleChanged(f"experiment {ledger.name}: the final was claimed under the rule in force; the rule cannot be "
                          "amended any more (a new rule needs a new experiment)")
    if not reason.strip():
        raise RuleChanged(f"experiment {ledger.name}: an amendment needs its reason: --amend \"<why>\"")
    return ledger.append(Kind.AMENDMENT, rule=rule, digest=rule_digest(rule), previous=rule_digest(current),
                         changes=differences(current, rule), reason=reason)
