"""`assess verify <winner> --model <folder or hub id>` and `hypergrid.verify(pipe, winner)`: the check in place.

The winner's levers are applied to the user's pipeline (assess.winner.apply: the renderer's code), a few of its
judged samples are rendered again and compared with the judged images: identical bytes (the same device kind and
library versions should give them), or, where they differ, within the rule metric's measured lossless floor
(assess.statistics.floor: the drift renders that change no mathematics show), saying which. Then the applied pipeline
and the anchor (the model's reference, loaded from the same weights) are timed side by side on this device by
render.timing.sessions, the speed-up from the paired rounds (assess.statistics.side_by_side), so the speed-up is
confirmed where it will serve.

It writes nothing: no run folder, no index row, no experiment spend. It is not an experiment's device work, so it
takes no admission (render.laws.admission): a final's winner lists its incumbent's dev
samples for this, never the holdout's (seen once, by the final).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from assess.winner.apply import Applied, VersionWarning, WinnerRefused, apply, pipeline_device, read_source
from assess.winner.contract import JudgedSample, Winner

IDENTICAL, WITHIN_FLOOR, DIFFERS = "identical", "within the lossless floor", "differs"
DEFAULT_SAMPLES = 2
DEFAULT_ROUNDS = 6  # render.timing.sessions.MIN_ROUNDS: the fewest that give an interval


@dataclass(frozen=True)
class SampleCheck:
    prompt_id: str
    seed: int
    outcome: str  # IDENTICAL | WITHIN_FLOOR | DIFFERS
    detail: str = ""


@dataclass
class Verification:
    """What `verify` found: each sample's comparison, the side-by-side speed-up here and the judged one."""

    cell: str  # the cell as the renderer describes it
    device: str
    samples: list[SampleCheck]
    speedup: dict[str, Any] | None  # here: value, low, high, n (rounds)
    judged_speedup: dict[str, Any] | None
    judged_timed: str
    latencies: dict[str, float] = field(default_factory=dict)  # median seconds of the applied pipeline and the anchor
    versions_differ: list[str] = field(default_factory=list)

    @property
    def samples_hold(self) -> bool:
        return bool(self.samples) and all(s.outcome != DIFFERS for s in self.samples)

    @property
    def speedup_confirmed(self) -> bool:
        """The speed-up's interval here lies above 1x (its point estimate when no interval could be had)."""
        s = self.speedup
        return s is not None and ((s["low"] if s.get("low") is not None else s["value"]) > 1)

    @property
    def holds(self) -> bool:
        return self.samples_hold and self.speedup_confirmed

    def lines(self) -> list[str]:
        out = [f"verify {self.cell} on {self.device}"]
        if self.versions_differ:
            out.append(f"  library versions differ from the winner's: {', '.join(self.versions_differ)}")
        for s in self.samples:
            out.append(f"  sample {s.prompt_id} seed {s.seed}: {s.outcome}" + (f" ({s.detail})" if s.detail else ""))
        out.append(f"  speed-up over the anchor here: {_speed(self.speedup)} side by side"
                   + (f" (applied {self.latencies['applied']:.4g} s, anchor {self.latencies['anchor']:.4g} s a call)"
                      if self.latencies else "")
                   + f"; judged: {_speed(self.judged_speedup)} ({self.judged_timed})")
        verdict = "the winner holds here" if self.holds else "the winner does NOT hold here: " + "; ".join(
            ([] if self.samples_hold else ["its judged samples are not reproduced"])
            + ([] if self.speedup_confirmed else ["its speed-up is not confirmed on this device"]))
        return [*out, verdict]

    def as_dict(self) -> dict[str, Any]:
        return {"cell": self.cell, "device": self.device, "holds": self.holds,
                "samples": [s.__dict__ for s in self.samples], "speedup": self.speedup,
                "judged_speedup": self.judged_speedup, "judged_timed": self.judged_timed, "latencies": self.latencies,
                "versions_differ": self.versions_differ}


def _speed(s: dict[str, Any] | None) -> str:
    if not s or s.get("value") is None:
        return "n/a"
    interval = f" [{s['low']:.2f}, {s['high']:.2f}]" if s.get("low") is not None and s.get("high") is not None else ""
    return f"{s['value']:.2f}x{interval}"


def verify(pipe: Any, winner: Any, *, anchor: Any = None, samples: int = DEFAULT_SAMPLES, rounds: int = DEFAULT_ROUNDS,
           device: str | None = None) -> Verification:
    """Apply `winner` to `pipe`, render `samples` of its judged samples and compare them with the judged images, then
    time the applied pipeline against the anchor side by side (`anchor`: a pipeline of the same weights left as
    loaded; None loads one from the pipeline's own folder or hub id). WinnerRefused when it cannot be applied."""
    found = read_source(winner)
    if found.winner is None:
        raise WinnerRefused(f"{found.where}: verify needs a winner file (winner.yaml): it holds the judged samples")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", VersionWarning)
        applied = apply(pipe, found.winner, device=device)
    differ = [str(w.message) for w in caught if issubclass(w.category, VersionWarning)]
    source = getattr(pipe, "name_or_path", None)
    return verify_applied(pipe, applied, model=source, anchor=anchor, samples=samples, rounds=rounds,
                          versions_differ=differ)


def verify_applied(pipe: Any, applied: Applied, *, model: str | None, anchor: Any = None,
                   samples: int = DEFAULT_SAMPLES, rounds: int = DEFAULT_ROUNDS,
                   versions_differ: list[str] | None = None) -> Verification:
    """verify, for a pipeline `apply` (or `load`) has configured already."""
    winner = applied.winner
    assert winner is not None
    if samples < 1 or not winner.samples:
        raise WinnerRefused(f"samples={samples}: verify renders at least one judged sample, and the winner lists "
                            f"{len(winner.samples)}")
    chosen = winner.samples[:samples]
    exact = applied.cell.device_kind == winner.device_kind and not versions_differ  # then only the same bytes hold
    checks = [check_sample(pipe, applied, s, winner, exact) for s in chosen]
    speed, latencies = time_against_anchor(pipe, applied, chosen, model=model, anchor=anchor, rounds=rounds)
    return Verification(applied.describe(), applied.device, checks, speed, winner.evidence.speedup,
                        winner.evidence.timed, latencies, versions_differ or [])


def render_png(pipe: Any, applied: Applied, prompt: str, seed: int) -> bytes:
    """The sample's file as the renderer writes it (render.run.runner.png_bytes of the call's first output)."""
    import torch

    from render.models.families import family
    from render.run.runner import png_bytes

    with torch.inference_mode():
        output = pipe(**applied.call_kwargs(prompt, seed))
    pixels = (output.frames if family(applied.cell.model.family).clips else output.images)[0]
    return png_bytes(pixels, f"sample ({prompt[:40]}, seed {seed})", applied.cell.model.fps)


def check_sample(pipe: Any, applied: Applied, sample: JudgedSample, winner: Winner, exact: bool) -> SampleCheck:
    """The sample rendered again against its judged image: the same bytes; else, where the device kind or the library
    versions differ from the winner's (`exact` false), within the metric's lossless floor."""
    from render.rundir import digest

    png = render_png(pipe, applied, sample.prompt, sample.seed)
    if digest(png) == sample.sha256:
        return SampleCheck(sample.prompt_id, sample.seed, IDENTICAL)
    if exact:
        return SampleCheck(sample.prompt_id, sample.seed, DIFFERS, f"other bytes on the device kind ({winner.device_kind}) "
                           "and library versions it was judged with, where a render is reproduced byte for byte")
    floor = winner.evidence.floor
    metric = winner.evidence.metric
    judged = Path(sample.image)
    if not judged.is_file():
        return SampleCheck(sample.prompt_id, sample.seed, DIFFERS, f"other bytes than the judged image; {judged} is not "
                           "here to measure how far")
    drift = metric_drift(metric, png, judged, sample)
    if drift is None:
        return SampleCheck(sample.prompt_id, sample.seed, DIFFERS, f"other bytes; {metric} cannot measure the drift")
    if floor is None:
        return SampleCheck(sample.prompt_id, sample.seed, DIFFERS, f"{metric} drift {drift:.3g}; no lossless floor was "
                           "measured for the winner (`assess floor` measures it)")
    limit = max(float(floor["value"]), float(floor.get("high") or 0.0))
    outcome = WITHIN_FLOOR if drift <= limit else DIFFERS
    return SampleCheck(sample.prompt_id, sample.seed, outcome, f"{metric} drift {drift:.3g}, floor {limit:.3g} "
                       f"({floor.get('sibling', 'a lossless sibling')})")


def metric_drift(metric: str, png: bytes, judged: Path, sample: JudgedSample) -> float | None:
    """How far the render is from the judged image on the rule metric: a reference metric's distance from its
    identity value with the judged image as the reference; otherwise the difference of the two images' scores."""
    import io

    import numpy as np
    from PIL import Image

    from assess.metrics import SPECS, SampleInput, build_sample_metrics

    if metric not in SPECS:
        return None
    (scorer,) = build_sample_metrics([metric])
    spec = SPECS[metric]
    ours = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    theirs = np.asarray(Image.open(judged).convert("RGB"))
    if spec.needs_reference:
        (outcome,) = scorer.score([SampleInput(sample.prompt_id, sample.seed, ours, sample.prompt, reference=theirs)])
        if outcome.value is None:
            return None
        return abs(outcome.value - (spec.identity if spec.identity is not None else 0.0))
    a, b = scorer.score([SampleInput(sample.prompt_id, sample.seed, image, sample.prompt) for image in (ours, theirs)])
    return None if a.value is None or b.value is None else abs(a.value - b.value)


def time_against_anchor(pipe: Any, applied: Applied, chosen: list[JudgedSample], *, model: str | None, anchor: Any,
                        rounds: int) -> tuple[dict[str, Any] | None, dict[str, float]]:
    """The applied pipeline and the anchor timed side by side (render.timing.sessions.retime, nothing recorded)."""
    import statistics

    from assess.statistics.side_by_side import round_speedup
    from render.run.loader import LoadedPipeline
    from render.rundir.identity import sample_text_id
    from render.timing.sessions import Contender, Sample, retime, warm_up

    class Prepared(Contender):
        """A contender whose pipeline is loaded and configured already (the user's): prepare only warms it up."""

        def prepare(self, first: Sample, warmups: int | None) -> float:
            return warm_up(self, first, warmups)

    keyed = {(sample_text_id(s.prompt, s.prompt_id), s.seed): s for s in chosen}
    ours = {k: Sample(k[0], s.prompt, s.seed, s.sha256) for k, s in keyed.items()}
    theirs = {k: replace(s, sha256=None) for k, s in ours.items()}  # the anchor's digests are not in the file
    anchor_job, anchor_loaded = anchor_pipeline(applied, model, anchor)
    mine = LoadedPipeline(pipe, 0.0, dict(pipe.scheduler.config), device=applied.device,
                          configured_for=applied.cell.key, records=applied.records)
    where = Path(".")
    contenders = [Prepared(applied.job, where, ours, loaded=mine), Prepared(anchor_job, where, theirs, loaded=anchor_loaded)]
    retime(contenders, rounds=rounds, record=False, purpose="verify")
    first, second = contenders
    speed = round_speedup(first.latencies, second.latencies)
    latencies = {"applied": statistics.median(first.latencies), "anchor": statistics.median(second.latencies)} \
        if first.latencies and second.latencies else {}
    return (speed.as_dict() if speed is not None else None), latencies


def anchor_pipeline(applied: Applied, model: str | None, anchor: Any) -> tuple[Any, Any]:
    """The anchor's job and its pipeline: `anchor` as given (configured for the anchor cell), else loaded from
    `model` (the folder or hub id of the winner's weights) as the renderer loads it."""
    from render import axes
    from render.run.loader import LoadedPipeline, configure, load_pipeline

    from assess.winner.apply import _model_id, check_class, check_weights, compose_job

    job = compose_job(applied.anchor_overrides, applied.device, what="the winner's anchor")
    if anchor is None:
        if not model:
            raise WinnerRefused("no anchor to time against: pass anchor=<a pipeline of the same weights, as loaded>, "
                                "or load the pipeline from a folder or hub id (its name_or_path)")
        loaded = load_pipeline(replace(job.cell.model, id=_model_id(model)), applied.device, axes.load_options(job.cell))
    else:
        check_class(anchor, job.cell)
        check_weights(anchor, job.cell, applied.winner)
        loaded = LoadedPipeline(anchor, 0.0, dict(anchor.scheduler.config), device=pipeline_device(anchor))
    configure(loaded, job.cell, None)
    return job, loaded
