"""The journey is the spec (issue 58): the README, followed in order as a new user would, on a fresh folder, reaches
every answer it shows, the demo climb's final included, with no amendment and no flag the README does not give.

The README's path is read out of README.md (tests/journey.py): a README change that breaks the journey fails here.
It is walked once for the module (the first sweep, the dev sweep its `next:` names, `assess retime`, the batch sweep
and `assess fleet`, the demo climb to its final and its report: minutes), and each promise is asserted on the walk.
The README's own commands run in the walk, so the demo climb's end-to-end promises (generations, a final run once and
shown from its ledger after, timed side by side and budgeted, the report's winner) are asserted on it here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.journey import Step, expected, journey, shows, with_sweep

SHARE = 0.25  # the side-by-side timing round's promised share of a sweep's render time (docs/timing.md)


@dataclass
class Walked:
    step: Step
    command: str  # as run (the README's example sweep path replaced)
    code: int
    output: str
    seconds: float


@dataclass
class Walk:
    cwd: Path
    steps: list[Walked]

    def of(self, start: str) -> list[Walked]:
        return [w for w in self.steps if w.command.startswith(start)]

    def times(self) -> str:
        return "\n".join(f"{w.seconds:7.1f} s  exit {w.code}  {w.command}" for w in self.steps)


def _sweeps(cwd: Path) -> set[Path]:
    return set((cwd / "outputs" / "multirun").glob("*/*"))


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """The README's journey, each step in a shell in one fresh folder, as a user runs it (the shapes model ships in
    the package; the user's state and the holdout lock are the walk's own)."""
    cwd = tmp_path_factory.mktemp("journey")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYPERGRID_STATE": str(cwd / "state"),
           "HYPERGRID_LOCK": str(cwd / "lock" / "holdout-lock.jsonl"), "HYPERGRID_CACHE": str(cwd / "cache")}
    env.pop("HYPERGRID_INDEX", None)
    steps, _ = journey()
    done: list[Walked] = []
    sweep: str | None = None
    for step in steps:
        if step.shown_with_previous:
            done.append(Walked(step, done[-1].command, done[-1].code, done[-1].output, 0.0))
            continue
        command = with_sweep(step.command, sweep)
        before, started = _sweeps(cwd), time.monotonic()
        ran = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
        done.append(Walked(step, command, ran.returncode, ran.stdout + ran.stderr, time.monotonic() - started))
        made = sorted(_sweeps(cwd) - before)
        if made:
            sweep = str(made[-1].relative_to(cwd))
    walk = Walk(cwd, done)
    for path in (cwd / "journey-times.txt", os.environ.get("HYPERGRID_JOURNEY_TIMES")):  # CI prints its copy
        if path:
            Path(path).write_text(walk.times() + "\n")
    return walk


@pytest.mark.slow
@pytest.mark.long("the README's whole journey on the shapes model: two sweeps, a retime, a batch sweep, the demo "
                  "climb to its final and its report (minutes on two cores)")
def test_the_readme_followed_in_order_reaches_every_answer_it_shows(walked: Walk) -> None:
    failures = []
    for w in walked.steps:
        if w.code != 0:
            failures.append(f"`{w.command}` exited {w.code}:\n{w.output[-2500:]}")
        elif missing := shows(w.output, w.step.expected):
            failures.append(f"`{w.command}` does not show, as the README does:\n  " + "\n  ".join(missing)
                            + f"\nits output:\n{w.output[-2500:]}")
    assert not failures, "\n\n".join(failures) + "\n\nthe journey, step by step:\n" + walked.times()


@pytest.mark.slow
def test_the_demo_climb_stops_and_runs_its_final_with_no_amendment(walked: Walk) -> None:
    """The final's reserve is a promise: after the README's dev sweep (whose anchor samples the climb reuses and is
    charged for) the demo stops on its own and its final runs, with no amendment and no flag the README lacks."""
    (apply,) = walked.of("assess climb demo --apply")
    assert "decision: STOP: " in apply.output, apply.output[-3000:]
    (final,) = walked.of("assess climb demo --final")
    assert final.code == 0 and "winner:" in final.output, final.output[-3000:]
    from render.laws import Ledger

    kinds = [e["kind"] for e in Ledger("demo", walked.cwd / "outputs").entries()]
    assert "amendment" not in kinds and "final-result" in kinds, kinds


@pytest.mark.slow
def test_the_demos_plan_is_costed_from_the_readmes_renders_and_fits_its_budget(walked: Walk) -> None:
    """`assess climb demo --plan`, before the climb: each stage costed from the shapes model's renders the README's
    sweeps made on this machine (not unknown), the final's share kept back, and the budget fits a pass."""
    (plan,) = walked.of("assess climb demo --plan")
    assert plan.code == 0, plan.output[-3000:]
    assert "costed from shapes's renders at 32x32 on cpu" in plan.output and "? GPU-h" not in plan.output, plan.output
    assert plan.output.strip().splitlines()[-1].startswith("answer: fits: "), plan.output


@pytest.mark.slow
def test_the_demos_final_writes_its_winner_file_and_the_winner_applies_to_a_fresh_pipeline_bit_for_bit(
        walked: Walk) -> None:
    """The climb ends with a file, not a line: the final's incumbent as winner.yaml in the experiment's folder, with
    its holdout result; applied to the shapes model loaded afresh, its judged samples (dev: the holdout is seen once) come back bit for bit."""
    import hypergrid
    from render.laws import experiment_dir
    from render.models.shapes import ShapesPipeline, shapes_model_dir
    from render.rundir import digest
    from render.run.runner import png_bytes

    (final,) = walked.of("assess climb demo --final")
    folder = experiment_dir(walked.cwd / "outputs", "demo")
    assert f"winner file: {(folder / 'winner.yaml').relative_to(walked.cwd)}" in final.output, final.output[-3000:]
    result = json.loads((folder / "final-result.json").read_text())
    winner = hypergrid.read_winner(folder / "winner.yaml")
    assert winner.cell_key == result["arms"][0]["cell_key"] and winner.source["kind"] == "final"
    assert winner.evidence.holdout is not None and winner.evidence.holdout["verdict"] == result["parity"]
    pipe = ShapesPipeline.from_pretrained(shapes_model_dir())
    pipe.set_progress_bar_config(disable=True)
    applied = hypergrid.apply(pipe, folder / "winner.yaml")
    for sample in winner.samples[:2]:
        image = pipe(**applied.call_kwargs(sample.prompt, sample.seed)).images[0]
        assert digest(png_bytes(image, "a judged sample")) == sample.sha256


@pytest.mark.slow
def test_a_dev_sweep_after_the_first_is_judged_on_every_dev_prompt(walked: Walk) -> None:
    """Six dev prompts share their text with smoke prompts: their samples, rendered by the first sweep, count in dev
    (the answer said "on 54 prompts")."""
    scored = walked.of("assess score")
    assert len(scored) == 3  # the first sweep, the dev sweep, the batch sweep
    answer = next(line for line in scored[1].output.splitlines() if line.startswith("answer:"))
    assert re.search(r"\bon 60 prompts\b", answer), answer


@pytest.mark.slow
def test_every_sweeps_timing_round_stays_within_its_share(walked: Walk) -> None:
    """The side-by-side round of every sweep of the journey, the batch sweep's included (it took 428 % and 563 % of
    the sweep's time), adds at most a quarter of the sweep's render time, or says what it skipped."""
    rounds = [line for w in walked.of("python -m render -m") for line in w.output.splitlines()
              if line.startswith("side by side:")]
    assert len(rounds) >= 3, rounds
    for line in rounds:
        share = re.search(r"(\d+)% of the sweep's", line)
        assert share is None or int(share.group(1)) <= 100 * SHARE, line


def test_the_readmes_journey_is_read_in_its_order() -> None:
    """What the walk runs, read from README.md: the first sweep, the answer and next: of the default path, the dev
    sweep, retime, the batch sweep and fleet, the demo climb to its final; what needs a GPU or a cluster says so."""
    steps, blocked = journey()
    commands = [s.command for s in steps]
    order = ["python -m render -m steps=4,8,16 cache=none,fbcache", "assess score", "prompts=dev", "assess retime",
             "batch=1,4,8", "assess fleet", "assess climb demo --apply --generations", "assess climb demo --final",
             "assess report demo"]
    at = [next(i for i, c in enumerate(commands) if o in c) for o in order]
    assert at == sorted(at), commands
    assert any(line.startswith("answer:") for s in steps for line in s.expected)
    assert any(line.startswith("next:") for s in steps for line in s.expected)
    assert blocked and all(re.search(r"GPU|cluster", b.why) for b in blocked), blocked
    for s in steps:
        with_sweep(s.command, "outputs/multirun/x/y")  # every sweep path the README names resolves


@pytest.mark.parametrize("line, matches", [
    ("answer: Fastest at parity: steps=4 cache=fbcache prompts=dev, 7.76× [7.17, 8.42] (side by side) faster than the "
     "anchor, shapes_fit within 0.01 of it on 60 prompts.", True),
    ("answer: Fastest at parity: steps=8 cache=none, 1.20× [0.90, 1.50] (timed apart) faster than the anchor, "
     "shapes_fit within 0.01 of it on 60 prompts.", False),  # the README promises side by side
    ("answer: No cell is at parity yet on 6 prompts.", False),
])
def test_a_transcript_line_matches_what_varies_and_not_what_does_not(line: str, matches: bool) -> None:
    readme = ("answer: Fastest at parity: steps=16 cache=none, 1.98× [1.84, 2.40] (side by side) faster than the "
              "anchor, shapes_fit within 0.01 of it on 6 prompts. 4 faster cell(s) undecided on 6 prompts.")
    pattern = expected(readme)
    assert pattern is not None and bool(pattern.search(line)) is matches
    assert shows(f"noise\n{line}\n", [readme]) == ([] if matches else [readme])


def _assess(walk: Walk, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYPERGRID_STATE": str(walk.cwd / "state"),
           "HYPERGRID_LOCK": str(walk.cwd / "lock" / "holdout-lock.jsonl"), "HYPERGRID_CACHE": str(walk.cwd / "cache")}
    env.pop("HYPERGRID_INDEX", None)
    return subprocess.run([sys.executable, "-m", "assess", *args], cwd=walk.cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_the_demos_generations_promote_and_stop_on_dev_only(walked: Walk) -> None:
    records = sorted((walked.cwd / "outputs/experiments/demo/generations").glob("g*.json"))
    generations = [json.loads(p.read_text()) for p in records]
    assert len(generations) >= 2
    kinds = {p["kind"] for g in generations for p in g["proposals"]}
    assert {"start", "neighbour"} <= kinds and kinds & {"promotion", "incumbent"}  # promotions happened
    assert generations[-1]["stop"] and not generations[-1]["proposals"]
    assert all("prompts=holdout" not in c for g in generations for c in g["commands"])  # dev only before the final


@pytest.mark.slow
def test_the_demos_final_is_timed_side_by_side_budgeted_and_shown_from_its_ledger_after(walked: Walk) -> None:
    """The final ran once (the walk's `assess climb demo --final`): asked again it is shown from the ledger and
    nothing is rendered; its headline is the incumbent and the anchor timed side by side on one device, that timing
    is in the spend log, one pre-planned test decides its verdict, the climb does not navigate after it, and the
    report names the winner."""
    again = _assess(walked, "climb", "demo", "--final", "--json")
    assert again.returncode == 0 and "nothing is rendered" in again.stderr, again.stderr[-2000:]
    result = json.loads(again.stdout)
    incumbent, control, anchor = result["arms"]
    assert (incumbent["role"], control["role"], anchor["role"]) == ("incumbent", "control", "anchor")
    assert incumbent["n_samples"] == 30 and anchor["n_samples"] == 30 and incumbent["quality"]["n"] == 30
    assert incumbent["timed"] == "side by side" and incumbent["speedup"]["note"].startswith("side by side: 20 ")
    assert incumbent["render_speedup"]["value"] > 0
    sessions = [json.loads(line) for f in (walked.cwd / "outputs").rglob("timings.jsonl")
                for line in f.read_text().splitlines()]
    finals = list({s["session"]: s for s in sessions if s["purpose"] == "final"}.values())  # kept in each arm's run
    assert len(finals) == 1 and finals[0]["experiment"] == "demo"
    from render.laws import Ledger
    from render.laws.spend import spend_lines

    timed = [line for line in spend_lines(Ledger("demo", walked.cwd / "outputs")) if line["what"] == "retime"]
    assert timed and sum(line["s"] for line in timed) >= finals[0]["device_s"] - 1e-3
    quality = incumbent["quality"]
    decided = "parity" if quality["tost_p"] < result["alpha"] else "out" if quality["out_p"] < result["alpha"] else "undecided"
    assert result["parity"] == quality["verdict"] == decided
    after = _assess(walked, "climb", "demo")
    assert after.returncode == 1 and "is over: its final was claimed on" in after.stderr
    (report,) = walked.of("assess report demo")
    html = Path(report.output.strip().splitlines()[-1]).read_text()
    assert f"Winner: <b>{result['incumbent_line']}</b>" in html
