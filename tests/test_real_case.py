"""The README's real case (issue 63, item 3): each copy-and-paste block for FLUX.1-dev (one GPU, an 8-GPU box, SLURM,
Ray) is complete and composes. No GPU or gated weights here, so each block is checked as far as this machine can:
every cell of its sweep composed (the launcher's options included) and built into its job, as the sweeper does before
it loads a weight, and every `assess` line parsed by the real CLI. A block that stops composing fails here."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import click
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

from tests.conftest import CONF_DIR
from tests.journey import BLOCK, README, SWEEP_PATH, _commands

LAUNCHERS = ("inprocess", "gpus", "slurm", "ray")  # one GPU, an 8-GPU box, SLURM, Ray


def real_case_blocks() -> list[tuple[str, list[str]]]:
    """(why the journey cannot run it, its commands) of each block under the README's real-case heading."""
    text = README.read_text()
    start = text.index("## The real case")
    section = text[start:text.index("\n## ", start + 1)]
    return [(b.group("why"), _commands(b.group("body"))) for b in BLOCK.finditer(section)]


def _render(commands: list[str]) -> list[str]:
    (line,) = [c for c in commands if c.startswith("python -m render ")]
    return shlex.split(line)[3:]


def _launcher(commands: list[str]) -> str:
    return next((a.split("=", 1)[1] for a in _render(commands) if a.startswith("hydra/launcher=")), "inprocess")


BLOCKS = real_case_blocks()
IDS = [_launcher(commands) for _, commands in BLOCKS]


def test_there_is_a_block_for_one_gpu_eight_gpus_slurm_and_ray() -> None:
    assert sorted(IDS) == sorted(LAUNCHERS), IDS
    assert all(why and ("GPU" in why or "cluster" in why) for why, _ in BLOCKS), \
        "each says why the journey cannot run it (a GPU, a cluster)"


@pytest.mark.parametrize("commands", [c for _, c in BLOCKS], ids=IDS)
def test_each_block_is_complete_from_a_fresh_machine_to_a_report(commands: list[str]) -> None:
    text = "\n".join(commands)
    assert re.search(r"pip install torch==[\d.]+ --index-url https://download\.pytorch\.org/whl/cu\d+", text), \
        "the torch build for a CUDA version"
    assert "hf auth login" in text or re.search(r"export .*HF_TOKEN=", text), "the hub login or the token"
    args = _render(commands)
    assert "-m" in args and any(a.startswith("model=") for a in args) and any(a.startswith("prompts=") for a in args), \
        f"the model and the prompts named: {args}"
    score = [c for c in commands if c.startswith("assess score ")]
    assert score and all("--metric-model" in c for c in score), "the metric models named"
    assert any(c.startswith("assess report ") for c in commands), "it ends in a report"


def _cells(args: list[str]) -> list[list[str]]:
    """Every cell of a `python -m render -m ...` sweep: its sweep overrides expanded as Hydra's sweeper does."""
    overrides = OverridesParser.create().parse_overrides([a for a in args if a != "-m"])
    choices = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
               else [str(o.input_line)] for o in overrides]
    return [list(cell) for cell in itertools.product(*choices)]


@pytest.mark.long("every cell of a real sweep (6-8) composed by Hydra and built into its job: 1-4 s on 2 busy cores")
@pytest.mark.parametrize("commands", [c for _, c in BLOCKS], ids=IDS)
def test_every_cell_of_each_blocks_sweep_composes_and_builds_its_job(commands: list[str]) -> None:
    from render.cell import build_job
    from render.compose.composition import composed_once

    cells = _cells(_render(commands))
    assert len(cells) >= 6, cells
    with composed_once(), initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        launched = compose(config_name="config", overrides=cells[0], return_hydra_config=True)  # the launcher's options
        assert launched.hydra.runtime.choices["hydra/launcher"] == _launcher(commands), cells[0]
        for cell in cells:
            job = build_job(compose(config_name="config", overrides=cell))  # the task's config, as its job sees it
            assert job.cell.model.id == "black-forest-labs/FLUX.1-dev", cell


def _assess_line(command: str) -> list[str] | None:
    words = shlex.split(command)
    return words[words.index("assess") + 1:] if "assess" in words else None


@pytest.mark.parametrize("commands", [c for _, c in BLOCKS], ids=IDS)
def test_each_assess_line_parses_with_metric_models_the_metrics_take(commands: list[str], tmp_path: Path) -> None:
    from assess.cli import cli
    from assess.metrics.alignment import CLIP
    from assess.metrics.distribution import CMMD_MODEL
    from assess.metrics.imagereward import IMAGEREWARD_MODEL
    from assess.metrics.preference import PICKSCORE_MODEL

    defaults = {m.metric: m.default for m in (CLIP, CMMD_MODEL, IMAGEREWARD_MODEL, PICKSCORE_MODEL)}
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    lines = [args for args in map(_assess_line, commands) if args]
    assert lines
    for args in lines:
        args = [SWEEP_PATH.sub(str(sweep), a) for a in args]
        with cli.make_context("assess", list(args), resilient_parsing=False) as ctx:
            name, command, rest = cli.resolve_command(ctx, list(args))
            assert command is not None, args
            sub = command.make_context(name, rest, parent=ctx)
        for item in sub.params.get("metric_models") or ():
            metric, _, model = item.partition("=")
            assert metric in defaults, f"{metric}: not a metric that takes a model ({sorted(defaults)})"
            assert model == defaults[metric] or model.startswith("/"), \
                f"{item}: the field's hub id ({defaults[metric]}) or a local folder"
        clip = sub.params.get("clip_model")
        assert clip in (None, defaults["clip_score"]) or clip.startswith("/"), clip


def test_a_block_whose_sweep_does_not_compose_is_caught() -> None:
    """The check above can fail: a mistyped launcher option is refused at composition."""
    from hydra.errors import ConfigCompositionException

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"), pytest.raises(ConfigCompositionException):
        compose(config_name="config", overrides=["model=flux-dev", "hydra/launcher=slurm", "hydra.launcher.partiton=gpu"],
                return_hydra_config=True)
    with pytest.raises(click.UsageError):
        from assess.cli import cli

        with cli.make_context("assess", ["score", "--metric-modle", "x=y"], resilient_parsing=False) as ctx:
            name, command, rest = cli.resolve_command(ctx, ["score", "--metric-modle", "x=y"])
            command.make_context(name, rest, parent=ctx)  # type: ignore[union-attr]
