"""Preflight: every cell is composed and validated before anything is launched or written.

Checks what a schema cannot: value ranges, prompt files, an attention backend that cannot run here,
a cache the model cannot take, a scheduler the model family lacks, a local model folder that is
not there. Errors name the bad value and what would be valid. A cell is checked once per process:
the job that runs it (`checked_job`) is the one its preflight passed, when that was in this process.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from render import axes
from render.axes import load_options
from render.axes.parallel import check_divides
from render.run.environment import (check_builtin_model, check_hub_model, check_model_folder, check_text_file,
                                check_writable_folder)
from render.cell import UNRESOLVED, ConfigError, Job, anchor_job, build_job, resolved_config, single_device_job, twin_job
from render.errors import RenderError
from render.compose.introspect import pipeline_info
from render.laws import Ledger, check_experiment, experiment_rule, record_launch
from render.laws.evidence import check_evidence
from render.laws.gpu_budget import BudgetError
from render.laws.rule import budget_in_force
from render.laws.admission import (BudgetExceeded, History, adopt, admit_step, check_budget, estimate_jobs, final_estimate,
                                   inherited_reservation, outstanding_seconds, reserve, spent_gpu_seconds)
from render.compose.limits import check_numbers
from render.run.live_metrics import check_metrics
from render.run.loader import BUILTIN_PREFIX
from render.compose.splits import resolve_manifest
from render.rundir import sample_store
from render.compose.strict import check_known_keys, refuse_unused_cache_overrides, unused_cache_overrides

log = logging.getLogger("render")


class PreflightError(RenderError, ValueError):
    """One or more cells cannot run; nothing was launched or written."""


_PASSED: list[bool] = []  # set once this process's preflight has passed: an exit before it was the input's fault
# The jobs this process's preflight passed (a sweep's cells, a single run's cell), by what they were built from: a
# cell run in the same process takes its job from here instead of building and checking it a second time.
_PASSED_JOBS: dict[str, Job] = {}


def passed() -> bool:
    """Whether a preflight passed in this process (a failure after it is a cell's, exit 1; before it, the input's, exit 2)."""
    return bool(_PASSED)


def check_model(model: Any, *, resolve_pipeline: bool = True) -> None:
    """The model's folder or hub revision (its weights enter the cell key); `resolve_pipeline`: also its pipeline
    class, resolved as loading resolves it (an import of diffusers)."""
    if model.id.startswith(BUILTIN_PREFIX):
        check_builtin_model(model.id[len(BUILTIN_PREFIX):])
        return
    if model.id.startswith((".", "/", "~")):
        folder = Path(model.id).expanduser()
        if not (folder / "model_index.json").is_file():
            raise ConfigError(f"model.id={model.id}: no diffusers pipeline folder there (no model_index.json); "
                              "give a folder written by save_pretrained, or a hub id such as black-forest-labs/FLUX.1-dev")
        check_model_folder(folder, model.id)
    else:
        check_hub_model(model)
        if model.weights == UNRESOLVED:
            raise ConfigError(f"model.id={model.id}: revision {model.revision or 'main'} cannot be resolved to a commit "
                              "(not in the local Hugging Face cache's refs, and the hub did not answer for it); the "
                              "cell key needs the weights' identity. Download it (`hf download "
                              f"{model.id}`), or pin model.revision to a 40-hex commit")
    if resolve_pipeline:
        pipeline_info(model.pipeline)  # a diffusers class name or a dotted path, resolved as loading resolves it


def check_job(job: Job) -> None:
    """Environment checks for a built job: every axis of the cell and of its anchor, then the model; raises with a
    message naming the bad value. What this machine must offer (a device, an attention kernel, a pipeline that
    takes the cache, the pipeline class itself) is asked only of a cell or anchor with samples left to render:
    one whose every sample is finished and verified runs nothing, so a re-run of a finished sweep imports no
    diffusers. Its key, its values and the laws are checked all the same."""
    store = sample_store(job.out_root)
    rendering = [cell for cell in (job.cell, job.anchor) if store.pending(cell.key, job.samples)]
    for cell in rendering:
        axes.check_cell(cell, job.device)
    check_model(job.cell.model, resolve_pipeline=bool(rendering))
    if job.cell in rendering:
        from render.run.loader import model_source

        check_divides(job.cell, Path(model_source(job.cell.model)))  # the model's own heads and sequence


def preflight_config(cfg: DictConfig, overrides: list[str] | tuple[str, ...] = (), *, single: bool = False) -> Job:
    """Build and check one cell's job; every failure becomes a PreflightError. `single`: a run of one cell,
    where a cache parameter its cache does not take is refused here (a sweep decides across its cells)."""
    try:
        check_known_keys(cfg)
        check_writable_folder(cfg.out_root, "out_root")
        if cfg.prompts.get("dataset") is None:  # a hub dataset's file is checked by its reader, once downloaded
            check_text_file(resolve_manifest(cfg.prompts.file), "prompts.file", cfg.prompts.file)
        job = build_job(cfg)
        check_numbers(cfg)  # after build_job, whose messages say more for the values it knows (seeds, guidance)
        check_job(job)
        check_experiment(cfg, overrides, job)
        if single:
            check_metrics(cfg.get("metrics"), single=True)
            refuse_unused_cache_overrides(unused_cache_overrides(overrides, job.cell.axes["cache"]), 1)
    except RenderError as error:
        raise PreflightError(str(error)) from None
    except Exception as error:  # noqa: BLE001 - preflight is the only gate: whatever fails here stops the run
        raise unexpected(error) from error
    return job


def _fingerprint(config: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> str:
    return json.dumps([list(overrides), config], sort_keys=True, default=str)


def _passed(jobs: list[tuple[Job, list[str] | tuple[str, ...]]]) -> None:
    _PASSED_JOBS.clear()
    _PASSED_JOBS.update((_fingerprint(job.config, overrides), job) for job, overrides in jobs)
    _PASSED.append(True)


def checked_job(cfg: DictConfig, overrides: list[str] | tuple[str, ...] = ()) -> Job:
    """The job of a cell about to run: the one this process's preflight passed for the same config and overrides
    (taken once), else `preflight_config` (a job submitted to another process checks its cell there)."""
    try:
        key = _fingerprint(resolved_config(cfg), overrides)
    except Exception:  # noqa: BLE001 - a config that does not resolve: preflight_config says why
        return preflight_config(cfg, overrides)
    job = _PASSED_JOBS.pop(key, None)
    return job if job is not None else preflight_config(cfg, overrides)


def unexpected(error: BaseException) -> PreflightError:
    """A failure of no known kind while checking (a filesystem fault, a library's own error): still a refusal
    before anything is written, naming what failed; the traceback goes to the debug log."""
    log.debug("preflight failed", exc_info=error)
    return PreflightError(f"preflight could not check this cell ({type(error).__name__}: {error}); nothing was written. "
                          "Fix the file, folder or value it names, and run again")


def preflight_all(configs: list[tuple[list[str], DictConfig]]) -> list[Job]:
    """Check every cell of a sweep, then the sweep's cost against its experiment's budget; report all
    bad cells at once."""
    jobs, problems = [], []
    unused: set[str] | None = None
    _PASSED_JOBS.clear()
    for overrides, cfg in configs:
        try:
            job = preflight_config(cfg, overrides)
        except PreflightError as error:
            problems.append(f"  [{' '.join(overrides) or 'defaults'}] {error}")
            continue
        jobs.append(job)
        cell_unused = unused_cache_overrides(overrides, job.cell.axes["cache"])
        unused = cell_unused if unused is None else unused & cell_unused
    if problems:
        raise PreflightError(f"{len(problems)} of {len(configs)} cells cannot run; nothing was launched:\n" + "\n".join(problems))
    try:
        refuse_unused_cache_overrides(unused or set(), len(configs))
    except ConfigError as error:
        raise PreflightError(str(error)) from None
    try:
        check_metrics(configs[0][1].get("metrics") if configs else None)  # the sweep's exporter, checked once
    except RenderError as error:
        raise PreflightError(f"{error}; nothing was launched") from None
    preflight_budget(jobs)
    record_launch(jobs)
    _passed([(job, overrides) for job, (overrides, _) in zip(jobs, configs)])
    return jobs


def preflight_budget(jobs: list[Job]) -> None:
    """Refuse, before anything is written, a sweep whose estimated cost does not fit its experiment's budget."""
    from render.rundir import SampleStore

    by_experiment: dict[str, list[Job]] = {}
    for job in jobs:
        if job.experiment is not None:
            by_experiment.setdefault(job.experiment.name, []).append(job)
    for name, group in by_experiment.items():
        out_root = group[0].out_root
        ledger = Ledger(name, out_root)
        store, history = SampleStore(out_root), History.scan(ledger.out_roots())
        try:
            check_evidence(ledger, history, experiment_rule(group[0].experiment.node))  # type: ignore[union-attr]
        except RenderError as error:
            raise PreflightError(str(error)) from None
        pending: dict[str, set] = {}
        cells: dict[str, Job] = {}
        for job in group:
            twin = twin_job(job)  # a parallel cell's width-1 twin is rendered alongside: counted like the anchor
            for j in ([job, anchor_job(job)] if job.render_anchor and not job.is_anchor else [job]) + ([twin] if twin else []):
                cells.setdefault(j.cell.key, j)
                pending.setdefault(j.cell.key, set()).update(store.pending(j.cell.key, j.samples))
        experiment = group[0].experiment
        assert experiment is not None  # grouped by it

        def admit(what: str, next_s: float) -> None:  # each step of a measurement, admitted before it runs
            admit_step(ledger, experiment.budget, experiment.final, history, f"preflight's measurement ({what})", next_s)

        try:
            estimate = estimate_jobs(list(cells.values()), {k: len(v) for k, v in pending.items()}, history,
                                     measure=lambda job: measure_one_sample(job, admit))
            with ledger.lock():  # admission: concurrent launches, from any out_root, cannot pass together
                # a detached Ray sweep's driver is its launch's: it adopts the reservation it inherited, not a second
                inherited = inherited_reservation(ledger)
                spent = (spent_gpu_seconds(ledger, History.scan(ledger.out_roots()))
                         + outstanding_seconds(ledger, exclude=inherited))
                check_budget(name, budget_in_force(ledger, experiment.budget), experiment.final, spent, estimate,
                             final_estimate(ledger))
                if inherited:
                    adopt(ledger, inherited, estimate.seconds)
                else:
                    reserve(ledger, estimate.seconds)
        except (BudgetExceeded, BudgetError) as error:
            raise PreflightError(str(error)) from None
        log.info("experiment %s: estimated %.1f s for this sweep (%d cells measured in preflight)", name, estimate.seconds, estimate.measured_cells)


def measure_one_sample(job: Job, admit: Callable[[str, float], None] = lambda what, next_s: None
                       ) -> tuple[float, float]:
    """No history for this cell's model and setting: render one sample (after a warm-up) and time it; returns
    (seconds per sample, seconds the model took to load). In-process sweeps keep the loaded pipeline. Each step
    (the load, a cache's calibration render, each render) is device work before the sweep's admission: `admit(what,
    estimate)` admits it first (render.laws.admission.admit_step: its estimate is what the previous render took),
    and it is spent whether or not the sweep is admitted."""
    from render.laws.spend import Purpose, spend_load, spending
    from render.run.loader import PIPELINES, configure
    from render.run.runner import render_sample

    if job.gpus > 1:  # its ranks start with the render: its width-1 self is measured (estimate_jobs scales by width,
        job = single_device_job(job)  # so the estimate assumes no speed-up: never under the cost)
    name = job.cell.describe()
    admit(f"cell {name}: its model load", 0.0)
    loaded = PIPELINES.get(job.cell.model, job.device, load_options(job.cell))
    spend_load(job, loaded)
    prompt = job.prompts[0].text
    took = [0.0]  # what the last render took: the next one's estimate

    def timed(what: str, purpose: str) -> tuple[float, ...]:
        admit(f"cell {name}: {what}", took[0])
        start = time.perf_counter()
        with spending(job, purpose):
            _, calls, _, _ = render_sample(loaded, job, prompt, job.seeds[0])
        took[0] = (time.perf_counter() - start) * job.gpus
        return tuple(calls)

    def calibrate() -> None:
        timed("a calibration render", Purpose.CALIBRATE)

    configure(loaded, job.cell, calibrate=calibrate)
    timed("its warm-up render", Purpose.MEASURE)
    calls = timed("its timed render", Purpose.MEASURE)
    loaded.fresh = True  # what follows still counts as a warm-up for this configuration
    return calls[0], loaded.load_s


def exit_with(error: BaseException, code: int = 2) -> NoReturn:
    """End the command with the message alone: these are user errors, a traceback would bury them."""
    print(f"error: {error}", file=sys.stderr)
    raise SystemExit(code)


class PreflightCallback(Callback):
    """Hydra callback: a single run is checked before Hydra creates its run directory.

    Hydra turns exceptions raised by callbacks into warnings and carries on, so a failed check
    exits here (SystemExit is not an Exception) before the run folder exists.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """An experiment's sweep must pass the budget's admission, which hypergrid's sweeper runs: any other sweeper
        (hydra/sweeper=basic, optuna, ...) is refused for an experiment before anything is written."""
        target = str(config.hydra.sweeper.get("_target_", ""))
        if config.get("experiment") is not None and not target.startswith("hydra_plugins.hypergrid."):
            exit_with(PreflightError(
                f"experiment {config.experiment.name}: hydra/sweeper={target.rsplit('.', 1)[-1] or '?'} does not run "
                "hypergrid's preflight, so the sweep could not be admitted against the experiment's budget; nothing was "
                "launched. Drop the hydra/sweeper override (the default, hydra/sweeper=hypergrid, admits it)"))

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        from omegaconf import open_dict

        task = config.copy()
        with open_dict(task):
            del task["hydra"]
        try:
            overrides = list(config.hydra.overrides.task)
            job = preflight_config(task, overrides, single=True)
            check_writable_folder(config.hydra.run.dir, "hydra.run.dir")
            preflight_budget([job])
            record_launch([job])
            _passed([(job, overrides)])
        except PreflightError as error:
            exit_with(error)
        except RenderError as error:
            exit_with(PreflightError(str(error)))
        except Exception as error:  # noqa: BLE001 - Hydra would turn it into a warning and run the job
            exit_with(unexpected(error))
