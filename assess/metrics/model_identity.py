"""The identity of a metric's model (CLIP, the preference models), kept with every score it produces.

A score's `config` is `model=<identity>`: a local folder's content digest or a hub model's resolved commit
(render.rundir.identity.model_identity), so two scores are comparable exactly when the same weights produced them,
whatever the model was called or wherever its folder lies. A folder is asked again on every call (one stat per
file, its digest cached by file state and never trusted within a timestamp tick of a change): weights swapped
under the same name in a running process, even with the same size and a restored mtime, are another model. Only
a hub id's resolution is kept for the process (a commit is content already).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

_HUB: dict[str, str] = {}  # hub id -> its identity, resolved once per process (a network round trip)


def metric_model_identity(name: str) -> str:
    """`sha256:...` of a local folder, `hub:<commit>` of a hub model, or `unresolved` when it cannot be had here
    (the metric is then unavailable with its reason: no score carries an unresolved identity)."""
    from render.rundir import model_identity

    folder = Path(name).expanduser()
    if folder.is_dir():
        return _resolved(lambda: model_identity(str(folder), None))
    if name not in _HUB:  # unresolved too: an offline process asks the hub once
        _HUB[name] = _resolved(lambda: model_identity(name, None))
    return _HUB[name]


def _resolved(identity: Callable[[], str]) -> str:
    try:
        return identity()
    except (ValueError, OSError):
        return "unresolved"


def model_config(name: str) -> str:
    """The score's config: the model's identity; its name only when the model cannot be had here (then every
    score of it is unavailable, with the reason), its credentials redacted: the config is stored and compared
    as the index keeps it (render.rundir.redact)."""
    from render.rundir.redact import redact

    identity = metric_model_identity(name)
    return f"model={redact(name)}" if identity == "unresolved" else f"model={identity}"


# -- the model the frozen decision rule names ---------------------------------------------------


def scored_identity(config: str | None) -> str | None:
    """The model identity a score's `config` records (`model=<identity> [processor=...]`), or None."""
    for token in (config or "").split():
        if token.startswith("model="):
            return token.removeprefix("model=")
    return None


@dataclass(frozen=True)
class RuleModel:
    """The model a frozen decision rule scores its quality metric with (render.laws.rule.metric_models): the one its
    environment variable named at the first launch, frozen by content for a folder; else the metric's default hub
    model. A score is the rule's evidence only when it records this model's identity."""

    metric: str
    named: str  # how the rule names it, e.g. `HYPERGRID_CLIP_MODEL=/models/clip` or `the default openai/clip-vit-...`
    name: str  # the folder or hub id
    identity: str | None  # a folder's frozen content digest; None for a hub id (resolved here when a score needs it)

    def why_not(self, config: str | None) -> str | None:
        """None when a score of this `config` was produced by the rule's model, else why it is set apart."""
        scored = scored_identity(config)
        expected = self.identity
        if expected is None and scored is not None and scored.startswith("hub:"):
            expected = metric_model_identity(self.name)
            if expected == "unresolved":  # the hub id cannot be resolved here: its commit is not checked (docs/climb.md)
                return None
        if scored is not None and scored == expected:
            return None
        return (f"set apart: scored with model={scored or 'unnamed'}, not the frozen rule's {self.metric} model "
                f"({self.named}{': ' + expected if expected else ''}); re-score with it (assess score --force, the "
                "rule's model selected) or take the new model as an amendment (assess climb <name> --amend)")


def rule_model(rule: Mapping[str, Any], metric: str) -> RuleModel | None:
    """The model `rule` scores `metric` with; None for a metric without a model (ssim, lpips's fixed network)."""
    from assess.metrics import SPECS, metric_class

    spec = SPECS.get(metric)
    source = getattr(metric_class(spec), "metric_model", None) if spec is not None and spec.compute else None
    if source is None:
        return None
    frozen = (rule.get("metric_models") or {}).get(source.env)
    if frozen:
        value, identity = str(frozen["value"]), str(frozen.get("identity") or "")
        return RuleModel(metric, f"{source.env}={value}", value, identity if identity.startswith("sha256:") else None)
    return RuleModel(metric, f"the default {source.default}", source.default, None)
