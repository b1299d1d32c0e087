"""Loading an experiment (Hydra compose) and its checks; the commands the climb builds from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from assess.climb.commands import Command, RenderRefused, final_command, generation_commands, run_and_score
from assess.climb.decide import Plan, Proposal
from assess.climb.run_final import control_overrides
from assess.experiment import ExperimentError, Split, canon, cell_value, check_disjoint, load_experiment
from tests.assess.climb_fixtures import hydra_state_kept, restore_hydra  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("restore_hydra")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    # Module-scoped, so conftest's per-test private state is not in force yet: a state folder of its own, never the
    # user's (a tiny-demo ledger there, from a climb of the user's, would make this fixture refuse).
    with hydra_state_kept(), pytest.MonkeyPatch.context() as patch:
        patch.setenv("HYPERGRID_STATE", str(tmp_path_factory.mktemp("demo-state")))
        return load_experiment("tiny-demo")


def test_the_demo_composes_with_its_grid_splits_and_anchor(demo) -> None:
    assert demo.axes == {"steps": ("2", "4", "8", "12", "16"), "cache": ("none", "fbcache", "taylorseer"),
                         "scheduler": ("default", "dpmpp-2m")}
    assert demo.start == ("8", "none", "default")
    assert demo.anchor == {"steps": "16", "attention": "native", "cache": "none", "scheduler": "default"}
    assert (demo.dev.option, demo.dev.split, len(demo.dev.ids)) == ("dev", "dev", 60)
    assert (demo.holdout.split, len(demo.holdout.ids)) == ("holdout", 30)
    assert demo.rungs == (4, 12, 36) and demo.eta == 3 and demo.quality.identity == 1.0
    assert demo.budget.limit_s == pytest.approx(0.15 * 3600)


@pytest.mark.parametrize(("override", "message"), [
    ("experiment.rungs=[4,100]",
     "experiment.rungs=[4, 100]: the top rung needs 100 prompts, the dev split (dev) has 60"),
    ("experiment.rungs=[12,4]", "experiment.rungs=[12, 4]: give increasing prompt counts >= 1, e.g. [8, 24, 60]"),
    ("experiment.eta=1", "experiment.eta=1: the halving factor must be >= 2"),
    ("experiment.quality.metric=psnr",
     "experiment.quality.metric=psnr: parity is a band around the anchor's own value"),
    ("experiment.quality.metric=fid", "experiment.quality.metric=fid: valid metrics are ssim, lpips, clip_score, shapes, shapes_fit"),
    ("experiment.budget.reserve_gpu_hours=1", "experiment.budget.reserve_gpu_hours=1.0: must be >= 0 and below"),
    ("experiment.holdout=dev", "experiment.dev=dev and experiment.holdout=dev are both split 'dev'"),
    ("experiment.start.steps=3", "experiment tiny-demo: the start value steps=3 (from experiment.start) is not among"),
    ("experiment.objective=quality", "experiment=tiny-demo: experiment.objective=quality: Invalid value 'quality', expected one of [latency, gpu_seconds]"),
    ("+experiment.axes.seed=[0,1]", "experiment.axes.seed: seed is set by the climb, not an axis"),
])
@pytest.mark.slow
def test_a_bad_experiment_is_refused_with_the_key_and_the_fix(override: str, message: str) -> None:
    with pytest.raises(ExperimentError) as err:
        load_experiment("tiny-demo", [override])
    assert str(err.value).startswith(message)


def split(option: str, ids: list[str], texts: list[str]) -> Split:
    return Split(option, option, f"{option}.jsonl", tuple(ids), tuple(texts))


def test_dev_and_holdout_must_not_share_a_text_even_under_another_id() -> None:
    dev = split("dev", ["d0", "d1"], ["a red circle", "a blue square"])
    check_disjoint(dev, split("holdout", ["h0"], ["a green star"]))
    with pytest.raises(ExperimentError, match=r"share 1 text\(s\): d1 = h0 \('a blue square'\)"):
        check_disjoint(dev, split("holdout", ["h0"], ["  A Blue   square "]))
    with pytest.raises(ExperimentError, match="share id"):
        check_disjoint(dev, split("holdout", ["d0"], ["a green star"]))


def test_values_are_canonical_as_an_override_writes_them() -> None:
    assert [canon(v) for v in (8, 8.0, 0.30, "0.3", "fbcache", True, None)] == ["8", "8", "0.3", "0.3", "fbcache",
                                                                                 "true", "null"]
    cell = {"steps": 8, "cache": {"name": "fbcache", "threshold": 0.3}, "model": {"name": "tiny", "dtype": "float32"}}
    assert [cell_value(cell, a) for a in ("steps", "cache", "cache.threshold", "model", "dtype")] == [
        "8", "fbcache", "0.3", "tiny", "float32"]
    with pytest.raises(ExperimentError, match="axis 'guidance' is not part of the cell"):
        cell_value(cell, "guidance")


def test_commands_name_every_axis_and_group_one_factor_lines(demo) -> None:
    plan = Plan.from_experiment(demo)
    proposals = [Proposal(("4", "none", "default"), 12, "promotion", ""),
                 Proposal(("8", "none", "default"), 12, "promotion", ""),
                 Proposal(("8", "taylorseer", "dpmpp-2m"), 12, "promotion", "")]
    assert [c.text for c in generation_commands(demo, plan, proposals)] == [
        "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=12 steps=4,8 cache=none scheduler=default",
        "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=12 steps=8 cache=taylorseer scheduler=dpmpp-2m",
    ]


def test_the_final_renders_on_the_holdout_with_the_final_flag_and_a_steps_only_control(demo) -> None:
    cell = final_command(demo, demo.cell_overrides(("4", "fbcache", "default")), "0123abcd")
    assert cell.text == ("python -m render -m experiment=tiny-demo experiment.final=true experiment.final_token=0123abcd "
                         "prompts=holdout steps=4 cache=fbcache scheduler=default")
    assert control_overrides(demo, 4) == ["steps=4", "cache=none", "attention=native", "scheduler=default"]


def test_overrides_and_another_out_root_travel_with_the_commands(tmp_path: Path) -> None:
    exp = load_experiment("tiny-demo", ["experiment.eta=2", "seed=[0,1]", "experiment.seeds=[0,1]"], out_root=tmp_path)
    plan = Plan.from_experiment(exp)
    (command,) = generation_commands(exp, plan, [Proposal(exp.start, 4, "start", "")])
    assert command.words == ("experiment=tiny-demo", "experiment.eta=2", "seed=[0,1]", "experiment.seeds=[0,1]",
                             f"out_root={tmp_path}", "prompts=dev", "prompts.limit=4", "steps=8", "cache=none",
                             "scheduler=default")
    assert "'seed=[0,1]'" in command.text  # quoted for the shell


def test_a_refused_command_stops_the_rest_and_what_was_rendered_is_scored(demo, monkeypatch, tmp_path) -> None:
    import assess.climb.commands as commands
    import assess.scoring.ingest

    made = tmp_path / "sweep-1"
    calls: list[str] = []

    def fake_run(command: Command, out_root: Path, log) -> tuple[int, list[Path]]:
        calls.append(command.words[-1])
        if command.words[-1] == "second":
            raise RenderRefused("the renderer refused it")
        return 0, [made]

    scored: list[list[Path]] = []
    monkeypatch.setattr(commands, "run_command", fake_run)
    monkeypatch.setattr(assess.scoring.ingest, "score", lambda paths, db, metrics: scored.append(paths) or _Summary())
    sweeps, refused = run_and_score([Command(("first",)), Command(("second",)), Command(("third",))], demo,
                                    tmp_path / "i.db", lambda line: None)
    assert calls == ["first", "second"] and sweeps == [made] and scored == [[made]]
    assert str(refused) == "the renderer refused it"


class _Summary:
    def lines(self) -> list[str]:
        return ["scored"]


def test_the_shipped_demo_climbs_the_shapes_model_on_its_fit() -> None:
    """docs/shapes.md: 4 steps is at parity within 0.01 of fit, 2 steps (-0.021) is not."""
    demo = load_experiment("demo")
    assert demo.anchor["steps"] == "32" and demo.quality.metric == "shapes_fit" and demo.quality.band == 0.01
    assert {"2", "4"} <= set(demo.axes["steps"]) and demo.quality.needs_reference is False
