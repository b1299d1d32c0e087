"""`hypergrid.apply(pipe, source)`: every lever of a cell applied to a diffusers pipeline the user built, by the
renderer's own code (render.axes.configure, in AXES order: the cache hooks before compile), and the call's arguments
as the renderer makes them (render.run.loader.call_kwargs).

`source` is a winner file (winner.yaml, or a folder holding one), a run folder (its run.json), or an override string
(`"model=flux-dev steps=4 cache=fbcache cache.threshold=0.1 compile=regional"`). Everything is checked before a lever
is applied, so a refusal (`WinnerRefused`, a ValueError) leaves the pipeline as it was: weights other than the
winner's (by content), a lever this pipeline cannot take (preflight's own checks, render.axes.check_cell), a lever
applied at load (quantization, layerwise casting: `hypergrid.load` loads with them), a winner file whose overrides no
longer compose to its recorded cell. Library versions that differ from the winner's are a warning naming them.
"""

from __future__ import annotations

import shlex
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from assess.errors import Refused
from render.cell import cell_overrides as written_out
from assess.winner.contract import WINNER, Winner, differing_versions, read_winner

SCHEDULER_CONFIG = "_hypergrid_scheduler_config"  # the pipeline's scheduler config before the first apply


class WinnerRefused(Refused, ValueError):
    """A cell that cannot be applied to this pipeline, with the reason; nothing was applied (the CLI exits 2)."""


class VersionWarning(UserWarning):
    """The installed torch, diffusers or torchao differ from the versions the winner was measured with."""


@dataclass
class Applied:
    """What `apply` applied: the cell, the overrides that compose it, what each axis derived, and the call."""

    cell: Any  # render.compose.spec.Cell
    overrides: list[str]
    device: str
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # each axis' derived values (the cache's)
    winner: Winner | None = None
    anchor_overrides: list[str] = field(default_factory=list)
    job: Any = field(default=None, repr=False)  # the renderer's job for the cell (render.cell.Job): verify times it

    def call_kwargs(self, prompt: str, seed: int) -> dict[str, Any]:
        """The pipeline call for one image, exactly as the renderer makes it (steps, guidance, size, the seeded CPU
        generator, output_type="np")."""
        from render.run.loader import call_kwargs

        return call_kwargs(self.cell, prompt, seed)

    def describe(self) -> str:
        return self.cell.describe()


@dataclass(frozen=True)
class Source:
    """What a source names: the overrides of a cell, and the winner file when it is one."""

    overrides: list[str]
    winner: Winner | None = None
    where: str = ""
    recorded: dict[str, Any] | None = None  # the canonical cell the source recorded (a winner's, a run's)


def read_source(source: Any) -> Source:
    """A winner file, a folder with winner.yaml or run.json, a Winner, or an override string."""
    if isinstance(source, Winner):
        return Source(list(source.overrides), source, "a winner", source.cell)
    if isinstance(source, Path) or (isinstance(source, str) and ("=" not in source or Path(source).expanduser().exists())):
        path = Path(source).expanduser()
        if path.is_file() or (path / WINNER).is_file():
            winner = read_winner(path)
            return Source(list(winner.overrides), winner, str(path), winner.cell)
        if path.is_dir():
            cell = run_cell(path)
            return Source(written_out(cell), None, str(path), cell)
        raise WinnerRefused(f"{source}: no such winner file or run folder; give a winner.yaml, a run folder, or an "
                            "override string such as \"model=flux-dev steps=4 cache=fbcache\"")
    if isinstance(source, str):
        return Source(shlex.split(source), None, "overrides")
    raise WinnerRefused(f"source={source!r}: give a winner file, a run folder or an override string")


def run_cell(folder: Path) -> dict[str, Any]:
    """A run folder's canonical cell (its run.json)."""
    from render.rundir import NotARunDirectory, RunDirError, load_run

    try:
        run = load_run(folder)
    except NotARunDirectory:
        raise WinnerRefused(f"{folder}: neither a winner file ({WINNER}) nor a run folder (run.json) is there") from None
    except RunDirError as error:
        raise WinnerRefused(f"{folder}: {error}") from None
    return run.cell


def compose_job(overrides: list[str], device: str, *, what: str = "the cell") -> Any:
    """The renderer's job for these overrides on `device` (render.cell.build_job); WinnerRefused naming the problem."""
    from assess.experiment import compose
    from render.cell import build_job
    from render.errors import RenderError

    try:
        return build_job(compose([*overrides, f"device={_device_override(device)}"]))
    except (RenderError, ValueError) as error:
        raise WinnerRefused(f"{what} ({' '.join(overrides)}): {error}") from None
    except Exception as error:  # noqa: BLE001 - Hydra's and OmegaConf's own errors: one line with the cause
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise WinnerRefused(f"{what} ({' '.join(overrides)}): {first}") from None


def _device_override(device: str) -> str:
    return "cuda:0" if device == "cuda" else device


def pipeline_device(pipe: Any) -> str:
    device = getattr(pipe, "device", None)
    return "cpu" if device is None else str(device)


def pipeline_weights(pipe: Any) -> str | None:
    """The identity of the weights a pipeline was loaded from (render.rundir.model_identity of its `name_or_path`:
    a folder's digest, a hub model's commit), None when it cannot be told."""
    from render.rundir import model_identity

    source = getattr(pipe, "name_or_path", None)
    if not source:
        return None
    try:
        return model_identity(str(source), None)
    except (ValueError, OSError):
        return None


def check_weights(pipe: Any, cell: Any, winner: Winner | None) -> None:
    """The pipeline holds the weights the cell was judged with (by content), or WinnerRefused saying what differs."""
    expected = winner.model.get("weights") if winner is not None else cell.model.weights
    if not expected or expected == "hub:unresolved":
        return
    found = pipeline_weights(pipe)
    source = getattr(pipe, "name_or_path", None)
    if found is None:
        raise WinnerRefused(f"cannot tell which weights this pipeline holds (it was loaded from {source!r}): the winner "
                            f"was judged on model {cell.model.name} ({expected}); load it with from_pretrained from its "
                            "folder or hub id, or use hypergrid.load")
    if found != expected:
        raise WinnerRefused(f"a winner for other weights: this pipeline was loaded from {source} ({found}), the winner "
                            f"was judged on model {cell.model.name} ({cell.model.id}, {expected}); its verdict does not "
                            "hold for these weights")


def check_class(pipe: Any, cell: Any) -> None:
    """The pipeline is of the class the cell's model names (its family's levers: schedulers, caches, blocks)."""
    from render.compose.introspect import pipeline_class

    wanted = pipeline_class(cell.model.pipeline)
    if not isinstance(pipe, wanted):
        raise WinnerRefused(f"this pipeline is a {type(pipe).__name__}, the cell's model {cell.model.name} is a "
                            f"{wanted.__name__} ({cell.model.family} family): its levers were judged on that pipeline")
    from render.run.loader import denoiser

    dtype = str(getattr(denoiser(pipe), "dtype", "")).removeprefix("torch.")
    if dtype and dtype != cell.model.dtype:
        raise WinnerRefused(f"this pipeline's {type(denoiser(pipe)).__name__} is {dtype}, the cell was judged in "
                            f"{cell.model.dtype}: load it with torch_dtype=torch.{cell.model.dtype}")


def check_levers(cell: Any, device: str) -> None:
    """Preflight's checks of every lever (render.axes.check_cell), and none applied at load."""
    from render import axes
    from render.errors import RenderError

    try:
        axes.check_cell(cell, device)
    except RenderError as error:
        raise WinnerRefused(f"a lever this pipeline cannot take: {error}") from None
    load = axes.load_options(cell)
    if load:
        raise WinnerRefused(f"the cell has levers applied when the weights load ({load}): a loaded pipeline cannot take "
                            "them; load it with them: pipe, applied = hypergrid.load(source, model=<folder or hub id>)")


def check_recorded(cell: Any, recorded: dict[str, Any]) -> None:
    """The source's overrides still compose to the cell it recorded (the device kind aside): a file whose levers were
    edited, or a config that changed since, would apply something other than what was judged."""
    from assess.statistics.floor import _flat  # a config's nested keys, dotted (one flattening, the floor's)
    from render.rundir import cell_key_of

    ours, theirs = _flat(cell.canonical()), _flat(recorded)
    ours.pop("device_kind", None)
    theirs.pop("device_kind", None)
    if ours == theirs and cell_key_of({**recorded, "device_kind": cell.device_kind}) == cell.key:
        return
    diff = [f"{k}: {theirs.get(k, '(absent)')!r} recorded, {ours.get(k, '(absent)')!r} composed"
            for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)]
    raise WinnerRefused(f"the winner's overrides compose to another cell than the one it recorded ({'; '.join(diff)}): "
                        "the file was edited, or the configs changed since it was judged")


def warn_versions(winner: Winner | None) -> list[str]:
    """A VersionWarning naming each library whose version differs from the winner's; the differences."""
    differ = differing_versions(winner.versions) if winner is not None else []
    if differ:
        warnings.warn(f"library versions differ from the winner's: {', '.join(differ)}; its samples may not be "
                      "reproduced bit for bit (assess verify says how far they are)", VersionWarning, stacklevel=3)
    return differ


def prepare(pipe: Any, source: Any, device: str | None = None) -> tuple[Any, Source]:
    """Every check of `apply`, nothing applied: the renderer's job for the source's cell on the pipeline's device."""
    found = read_source(source)
    device = device or pipeline_device(pipe)
    job = compose_job(found.overrides, device, what=found.where or "the cell")
    if found.recorded is not None:
        check_recorded(job.cell, found.recorded)
    check_class(pipe, job.cell)
    check_weights(pipe, job.cell, found.winner)
    check_levers(job.cell, device)
    return job, found


def apply(pipe: Any, source: Any, *, device: str | None = None) -> Applied:
    """Apply every lever of the source's cell to `pipe` (in place) with the renderer's code; what was applied.

    Checks first (WinnerRefused, nothing applied), warns on library versions that differ from a winner's. A second
    apply undoes the first's levers before applying its own (render.axes.configure)."""
    job, found = prepare(pipe, source, device)
    warn_versions(found.winner)
    return configure_pipeline(pipe, job, found)


def configure_pipeline(pipe: Any, job: Any, found: Source) -> Applied:
    from render import axes
    from render.run.loader import call_kwargs, denoiser

    cell = job.cell
    if not hasattr(pipe, SCHEDULER_CONFIG):  # the scheduler as the user loaded it: every reset returns to it
        setattr(pipe, SCHEDULER_CONFIG, dict(pipe.scheduler.config))
    text, seed = _calibration_sample(job, found.winner)

    def calibrate() -> None:  # MagCache without ratios: one render with the cell's settings (the renderer's first sample)
        pipe(**call_kwargs(cell, text, seed))

    target = axes.Target(pipe, denoiser(pipe), job.device, steps=cell.steps, calibrate=calibrate,
                         family=cell.model.family, scheduler_config=getattr(pipe, SCHEDULER_CONFIG))
    records = axes.configure(target, cell)
    anchor = found.winner.anchor.get("overrides", []) if found.winner is not None else job.anchor_overrides
    return Applied(cell, list(found.overrides), job.device, records, found.winner, list(anchor), job)


def _calibration_sample(job: Any, winner: Winner | None) -> tuple[str, int]:
    if winner is not None and winner.samples:
        first = winner.samples[0]
        return first.prompt, first.seed
    _, text, seed = job.samples[0]
    return text, seed


def load(source: Any, model: str | Path, device: str = "cpu") -> tuple[Any, Applied]:
    """Load the source's model from `model` (a folder or hub id holding the winner's weights) with the cell's
    load-time levers (quantization, layerwise casting), as the renderer loads it, then apply the rest: (pipe, Applied)."""
    from render import axes
    from render.run.loader import load_pipeline

    found = read_source(source)
    job = compose_job(found.overrides, device, what=found.where or "the cell")
    spec = replace(job.cell.model, id=_model_id(model))
    try:
        loaded = load_pipeline(spec, job.device, axes.load_options(job.cell))
    except (OSError, ValueError) as error:
        raise WinnerRefused(f"model {model}: cannot be loaded as {spec.pipeline} ({error})") from None
    pipe = loaded.pipe
    setattr(pipe, SCHEDULER_CONFIG, loaded.scheduler_config)
    if found.recorded is not None:
        check_recorded(job.cell, found.recorded)
    check_weights(pipe, job.cell, found.winner)
    from render.errors import RenderError

    try:
        axes.check_cell(job.cell, job.device)
    except RenderError as error:
        raise WinnerRefused(f"a lever this pipeline cannot take: {error}") from None
    warn_versions(found.winner)
    return pipe, configure_pipeline(pipe, job, found)


def _model_id(model: str | Path) -> str:
    """A folder as an absolute path (model_source reads a leading / as a folder), a hub id as it is."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else str(model)
