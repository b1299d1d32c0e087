"""The climb's laws against every route that broke them: the holdout by content, one final by evidence, a
frozen anchor, one budget admitted under a lock. Each test tries one route a careful but unlucky user took."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from render import rundir
from render.cell import build_job
from render.laws import ExperimentGuard, Ledger, check_anchor, claim_final, content_hash, option_prompts, record_anchor
from render.laws.admission import outstanding_seconds, reserve, spent_gpu_seconds
from tests.conftest import compose_cfg, run_render

HOLDOUT = Path(__file__).parents[1] / "render" / "prompts" / "holdout.jsonl"


def refused(tmp_path: Path, *args: str) -> str:
    result = run_render(*args, "model=tiny", cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert not (tmp_path / "outputs" / "runs").exists() and not (tmp_path / "outputs" / "multirun").exists()
    return result.stderr


def manifest(tmp_path: Path, lines: list[tuple[str, str]]) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in lines))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("route", ["plain option", "another option's file", "dev ids, holdout texts", "a trailing full stop"])
def test_no_route_renders_a_holdout_text(tmp_path: Path, route: str) -> None:
    texts = [json.loads(line)["text"] for line in HOLDOUT.read_text().splitlines()]
    if route == "plain option":
        args = ["prompts=holdout"]  # no experiment at all
    elif route == "another option's file":
        args = ["-m", "experiment=tiny-demo", "prompts=dev", f"prompts.file={HOLDOUT}"]
    elif route == "dev ids, holdout texts":
        args = ["-m", "experiment=tiny-demo", "prompts=dev", f"prompts.file={manifest(tmp_path, [('dev-000', texts[3])])}"]
    else:
        args = [f"prompts.file={manifest(tmp_path, [('mine-000', texts[5].upper() + '.')])}"]
    assert "a locked holdout" in refused(tmp_path, *args)


def test_a_registered_experiments_holdout_is_locked_for_every_render(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from render.laws import register_holdout, reserved

    conf = tmp_path / "conf" / "prompts"
    conf.mkdir(parents=True)
    secret = manifest(tmp_path, [("secret-000", "an orange hexagon in the corner")])
    (conf / "secret.yaml").write_text(f"defaults: [/schema/prompts@_here_, _self_]\nname: secret\nsplit: holdout\nfile: {secret}\n")
    monkeypatch.chdir(tmp_path)
    register_holdout(Ledger("mine", tmp_path / "outputs"), "secret")
    owner = reserved(tmp_path / "outputs").owner("An orange hexagon, in the corner!")
    assert owner == "experiment mine's holdout (secret)"
    other = manifest(tmp_path, [("x-000", "an orange hexagon in the corner")])
    assert "experiment mine's holdout (secret)" in refused(tmp_path, f"prompts.file={other}")


@pytest.mark.slow
def test_the_final_needs_its_claims_token_and_renders_only_its_cells(tmp_path: Path) -> None:
    _, holdout = option_prompts("holdout")
    out_root = tmp_path / "outputs"
    incumbent = build_job(compose_cfg("model=tiny", "experiment=tiny-demo", "prompts=holdout", "steps=4", out_root=out_root))
    claim = claim_final(Ledger("tiny-demo", out_root), {"cells": [incumbent.cell.key, incumbent.anchor.key]},
                        content_hash(holdout))
    base = ["experiment=tiny-demo", "prompts=holdout", "experiment.final=true", "prompts.limit=1", "render_anchor=false"]
    assert "only with the token of its claimed final" in refused(tmp_path, *base, "steps=4")
    assert "only with the token" in refused(tmp_path, *base, "experiment.final_token=0000", "steps=4")
    token = f"experiment.final_token={claim['token']}"
    assert "is not one of its final's cells" in refused(tmp_path, *base, token, "steps=2")
    ok = run_render(*base, token, "steps=4", "model=tiny", cwd=tmp_path, timeout=300)
    assert ok.returncode == 0, ok.stderr


def test_a_dev_sweep_cannot_spend_the_reserve_without_a_claim(tmp_path: Path) -> None:
    assert "without a claimed final" in refused(tmp_path, "experiment=tiny-demo", "prompts=dev", "experiment.final=true")


def test_the_anchor_is_frozen_by_content(tmp_path: Path) -> None:
    first = build_job(compose_cfg("model=tiny", "experiment=tiny-demo", out_root=tmp_path))
    record_anchor(Ledger("tiny-demo", tmp_path), first.anchor)
    check_anchor(Ledger("tiny-demo", tmp_path), first.anchor)
    edited = build_job(compose_cfg("model=tiny", "experiment=tiny-demo", "model.anchor.steps=2", out_root=tmp_path))
    (tmp_path / "experiments" / "tiny-demo" / "ledger.jsonl").unlink()  # one deleted copy does not unfreeze it
    with pytest.raises(ExperimentGuard) as error:
        check_anchor(Ledger("tiny-demo", tmp_path), edited.anchor)
    assert '"steps": 16' in str(error.value) and '"steps": 2' in str(error.value)


def test_concurrent_launches_are_admitted_under_one_lock(tmp_path: Path) -> None:
    ledger = Ledger("tiny-demo", tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from render.laws import Ledger; "
                               "from render.laws.admission import reserve; "
                               f"reserve(Ledger('tiny-demo', {str(tmp_path / 'other')!r}), 300.0); print('ok', flush=True); "
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ok"
        assert outstanding_seconds(ledger) == 300.0  # what another launch (another out_root) reserved counts here
    finally:
        holder.kill()
        holder.wait()
    assert outstanding_seconds(ledger) == 0.0  # a reservation ends with its process
    reserve(ledger, 5.0)
    assert outstanding_seconds(ledger) == 5.0


def test_spend_counts_every_sample_the_experiment_uses_wherever_it_was_rendered(tmp_path: Path) -> None:
    def run(name: str, experiment: str | None, reused: bool) -> None:
        path = tmp_path / name
        rundir.atomic_write_json(path / "run.json", {
            "schema": 2, "cell_key": "k", "cell": {}, "anchor": {"cell_key": "a"}, "is_anchor": False,
            "prompts": {"name": "dev", "ids": ["dev-000"]}, "seeds": [0],
            "config": {"experiment": {"name": experiment} if experiment else None}})
        record = rundir.SampleRecord(cell_key="k", prompt_id="dev-000", seed=0, prompt="a red circle", image="images/x.png",
                                     width=32, height=32, latency_s=0.0 if reused else 3.0, warmup=False, steps=2,
                                     s_per_step=1.0, peak_mem_bytes=1, mem_kind="cpu-rss-hwm", load_s=0.0 if reused else 1.0,
                                     reused_from="plain" if reused else None, finished_at=rundir.now_iso())
        rundir.append_record(path / "samples.jsonl", record.as_dict())

    run("plain", None, reused=False)  # rendered without experiment=
    run("climb", "tiny-demo", reused=True)  # the climb linked it
    run("climb-again", "tiny-demo", reused=True)  # and used it twice
    assert spent_gpu_seconds(Ledger("tiny-demo", tmp_path)) == 4.0


@pytest.mark.slow
def test_a_final_that_did_not_finish_is_resumed_not_repeated(tiny_cache: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim exists, its renders never ran (killed, refused): `--final` runs the claim's own commands once
    (same token), records the result, and a later `--final` is refused."""
    from assess.climb.commands import final_command
    from assess.climb.run_final import RESULT, control_overrides, final_cells, run_final
    from assess.experiment import load_experiment

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out_root = (tmp_path / "outputs").resolve()
    exp = load_experiment("tiny-demo", ["experiment.seeds=[0]"], out_root=out_root)
    _, holdout = option_prompts("holdout")
    inc = ("2", "none", "default")
    cells = [exp.cell_overrides(inc), control_overrides(exp, 2)]
    token = "feedc0de"
    commands = [final_command(exp, cell, token) for cell in cells]
    claim_final(Ledger("tiny-demo", out_root), {
        "incumbent": {"cell": exp.as_dict(inc), "overrides": exp.cell_overrides(inc), "steps": 2, "cell_key": None},
        "control": {"overrides": control_overrides(exp, 2)},
        "anchor": {"overrides": [f"{k}={v}" for k, v in exp.anchor.items()]},
        "token": token, "commands": [c.text for c in commands], "words": [list(c.words) for c in commands],
        "cells": final_cells(exp, [[f"prompts={exp.holdout.option}", *cell] for cell in cells]),
    }, content_hash(holdout))
    db = tmp_path / "index.db"
    result = run_final("tiny-demo", db=db, out_root=out_root, log=lambda line: None)
    assert result.sweeps and (out_root / "experiments" / "tiny-demo" / RESULT).exists()
    assert result.arm("incumbent").n_samples == len(holdout)
    # a finished final is shown, from this folder or any other that shares the user's state: nothing is rendered
    elsewhere = tmp_path / "second-folder"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    lines: list[str] = []
    again = run_final("tiny-demo", db=elsewhere / "index.db", out_root=elsewhere / "outputs", log=lines.append)
    assert json.loads(json.dumps(again.as_dict())) == json.loads(json.dumps(result.as_dict()))  # as recorded
    assert any("is complete" in line for line in lines) and not (elsewhere / "outputs" / "multirun").exists()
    # its token is spent: the holdout cannot be rendered with it any more
    monkeypatch.chdir(tmp_path)
    spent = run_render(*commands[0].words, "model=tiny", cwd=tmp_path, timeout=120)
    assert spent.returncode == 2 and "token is spent" in spent.stderr


@pytest.mark.slow
def test_a_parallel_incumbents_twin_is_part_of_its_final_and_nothing_else_gets_in(tmp_path: Path) -> None:
    """The final's claim names every cell it renders on the holdout: a parallel incumbent's width-1 twin, rendered
    alongside it for parity (render.run.runner), is claimed with it (before, the claim left it out and the holdout law
    passed it unseen). A cell whose twin is the final's is still refused: only the claimed cells and their
    companions are rendered on the holdout."""
    from assess.climb.run_final import final_cells
    from assess.experiment import load_experiment
    from render.cell import twin_job
    from render.laws import HoldoutLocked, check_holdout
    from tests.assess.climb_fixtures import hydra_state_kept

    out_root = tmp_path / "outputs"
    incumbent = ["steps=8", "cache=none", "scheduler=default", "parallel=ulysses"]
    with hydra_state_kept():
        exp = load_experiment("tiny-demo", ["+experiment.axes.parallel=[none,ulysses]"], out_root=out_root)
        cells = final_cells(exp, [["prompts=holdout", *incumbent]])
    _, holdout = option_prompts("holdout")
    claim = claim_final(Ledger("tiny-demo", out_root), {"cells": cells}, content_hash(holdout))

    def final_job(*overrides: str) -> tuple[Any, Any]:
        cfg = compose_cfg("model=tiny", "experiment=tiny-demo", "prompts=holdout", "experiment.final=true",
                          f"experiment.final_token={claim['token']}", *overrides, out_root=out_root)
        return build_job(cfg), cfg

    job, cfg = final_job(*incumbent)
    twin = twin_job(job)
    assert twin is not None and sorted({job.cell.key, job.anchor.key, twin.cell.key}) == cells
    check_holdout(job, cfg)  # the incumbent, with its anchor and its twin alongside
    check_holdout(*final_job("steps=8", "parallel=none"))  # the twin as a cell of its own (the steps-only control)
    for other in (["steps=8", "parallel=ring"], ["steps=4", "parallel=ulysses"]):  # its twin is the final's; a neighbour
        with pytest.raises(HoldoutLocked, match="is not one of its final's cells"):
            check_holdout(*final_job(*other))
