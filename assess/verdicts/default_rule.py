"""A sweep report's parity rule when none is given: its metric and band, each with where it comes from.

With no flag, a sweep's report still decides: the quality metric is the one the model's config names
(`model.parity.metric`, e.g. shapes_fit for the shapes model) when its cells have it, else the first quality metric
they have (render/compose/metric_registry.py's order: a reference metric against the same model's anchor first). The band, in
order of trust:

1. `--band` on the command line (labelled so);
2. the metric's lossless floor measured on the sweep's anchors (assess.statistics.floor), times assess.statistics.floor.MULTIPLE;
3. the model's config (`model.parity.band`, with the reason it states);
4. the metric's documented default (render.compose.metric_registry `default_band`; docs/quality.md says why each).

The source is shown beside the band on the first screen and kept with the verdicts (`assess status --json`), so a
verdict is never read without the band it was decided at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COMMAND_LINE = "--band on the command line"


@dataclass(frozen=True)
class DefaultRule:
    metric: str
    band: float | None
    source: str  # where the band comes from ("" without a band)


def model_parity(run_paths: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """(model name, its `parity` config) as the first readable run.json of the runs records it; a run rendered
    before models had one takes its model's config as it is today ({} when that cannot be composed either)."""
    from render.rundir import InvalidRunDirectory, read_run_record

    for path in run_paths:
        try:
            record = read_run_record(Path(path))
        except (OSError, ValueError, InvalidRunDirectory):  # a run.json gone or broken: the next run's
            continue
        model = record.config.get("model") or {}
        name = str(model.get("name", ""))
        return name, dict(model["parity"]) if model.get("parity") is not None else _configured(name)
    return "", {}


def _configured(model: str) -> dict[str, Any]:
    if not model:  # a run that records no model name: `model=` composes no config (and costs Hydra's 0.4 s)
        return {}
    from omegaconf import OmegaConf

    from assess.experiment import compose

    try:
        parity = compose([f"model={model}"]).model.get("parity")
    except Exception:  # noqa: BLE001 - a model config that no longer composes: the metric's default stands
        return {}
    return dict(OmegaConf.to_container(parity)) if parity is not None else {}  # type: ignore[arg-type]


def choose_metric(requested: str | None, parity: dict[str, Any], has: Sequence[str], valid: Sequence[str]) -> str:
    """--quality-metric, else the model's own when its cells have it, else the first in `valid` they have."""
    if requested:
        return requested
    own = parity.get("metric")
    if own and own in has:
        return str(own)
    return next((m for m in valid if m in has), valid[0])


def choose_band(metric: str, band: float | None, floors: dict[str, Any], model: str, parity: dict[str, Any]
                ) -> tuple[float | None, str]:
    """(band, its source) by the order of the module doc."""
    from assess.statistics.floor import MULTIPLE
    from render.compose.metric_registry import SPECS

    if band is not None:
        return band, COMMAND_LINE
    floor = floors.get(metric)
    if floor is not None and floor.suggestion(MULTIPLE) > 0:
        return float(f"{floor.suggestion(MULTIPLE):.3g}"), (f"{MULTIPLE:g} × the lossless floor measured on "
                                                           f"{floor.sibling} (assess floor)")
    if parity.get("band") is not None and parity.get("metric") in (None, metric):
        why = f": {parity['source']}" if parity.get("source") else ""
        return float(parity["band"]), f"model {model}'s config{why}"
    spec = SPECS.get(metric)
    if spec is not None and spec.default_band is not None:
        return spec.default_band, f"{metric}'s documented default (docs/quality.md); measure yours: assess floor"
    return None, ""
