"""Building a cell: the composed config turned into a validated `Job` (its cell, its anchor, what to
render and where).

`build_job` checks every value a schema cannot (ranges, seed lists, prompt files); the axes
(render.axes.AXES) turn their config nodes into the cell's axis values. It imports no torch unless
the device must be detected. `Cell` and `ModelSpec` themselves live in the leaf module render.compose.spec.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from render import axes
from render.axes.parallel import width_of  # re-exported: the launchers place a cell's width
from render.errors import ConfigError
from render.compose.limits import SEED_MAX, LimitError, check_image_size
from render.models.families import FamilyUnavailable, check_frames, check_pipeline
from render.compose.splits import Prompt, load_split
from render.rundir import RunExperiment, check_name, experiment_in
from render.compose.spec import Cell, DType, ModelSpec
from render.run.measure import TimingConf, check_timing

DTYPES = tuple(d.value for d in DType)  # the schema refuses others at composition; a config built by hand too


@dataclass(frozen=True)
class Job:
    """One cell plus what to render with it and where."""

    cell: Cell
    anchor: Cell
    anchor_overrides: list[str]  # renders the anchor cell exactly: `assess score` prints them as the anchor's command
    prompts_name: str
    split: str
    prompts_file: str
    prompts: list[Prompt]
    seeds: list[int]
    device: str  # torch device string, e.g. cpu or cuda:0
    out_root: Path
    tag: str = ""
    render_anchor: bool = True
    config: dict[str, Any] = field(default_factory=dict)
    warmup: int | None = None  # leading calls marked warm-up; None: what the cell needs (render.axes.default_warmups)
    timing: TimingConf = field(default_factory=TimingConf)  # repeated warm calls, the reference workload

    @property
    def is_anchor(self) -> bool:
        return self.cell.key == self.anchor.key

    @property
    def experiment(self) -> RunExperiment | None:
        """The experiment the job renders for (name, final, budget as composed); None outside any experiment."""
        return experiment_in(self.config)

    @property
    def gpus(self) -> int:
        """Devices the cell holds: its parallel width (render.axes.parallel), 1 for parallel=none."""
        return width_of(self.cell.axes["parallel"])

    @property
    def calibration_renders(self) -> int:
        """Renders of the cell's settings its axes make before its samples, output discarded (a cache's calibration)."""
        from render.axes.caches import calibration_renders

        return calibration_renders(self.cell.axes["cache"])

    @property
    def sample_ids(self) -> list[tuple[str, int]]:
        return [(p.id, s) for p in self.prompts for s in self.seeds]

    @property
    def samples(self) -> list[tuple[str, str, int]]:
        """Each sample's identity within the cell: (prompt id, prompt text, seed)."""
        return [(p.id, p.text, s) for p in self.prompts for s in self.seeds]


def resolve_device(device: str) -> tuple[str, str]:
    """(torch device, device kind). The kind is "cpu" or the GPU's name, which enters the cell key."""
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", device):  # cuda:x would otherwise reach int() below on a GPU host
        raise ConfigError(f"device={device!r}: valid values are auto, cpu, cuda, cuda:N")
    if device == "cpu" or (device == "auto" and not Path("/dev/nvidiactl").exists() and not Path("/dev/dxg").exists()):
        return "cpu", "cpu"  # no NVIDIA driver: decided without importing torch, so a re-run that renders nothing stays fast
    import torch

    if not torch.cuda.is_available():
        if device == "auto":
            return "cpu", "cpu"
        raise ConfigError(f"device={device}: no CUDA GPU is visible here (CUDA_VISIBLE_DEVICES, drivers); use device=cpu or auto")
    torch_device = "cuda:0" if device in ("auto", "cuda") else device
    index = int(torch_device.split(":")[1])
    if index >= torch.cuda.device_count():
        raise ConfigError(f"device={device}: only {torch.cuda.device_count()} CUDA device(s) visible")
    return torch_device, torch.cuda.get_device_name(index)


def parse_seeds(seed: Any) -> list[int]:
    values = list(seed) if isinstance(seed, (list, tuple, ListConfig)) else [seed]
    if not values:
        raise ConfigError("seed=[]: give at least one seed, e.g. seed=0 or seed=[0,1,2]")
    seeds = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SEED_MAX:
            raise ConfigError(f"seed={seed}: seeds must be non-negative integers up to {SEED_MAX} (what the generator "
                              "and the index both hold), e.g. seed=42 or seed=[0,1,2]")
        seeds.append(value)
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"seed={seed}: a seed is listed twice")
    return seeds


UNRESOLVED = "hub:unresolved"  # a hub revision that is neither cached nor reachable: no cell can render it


def weights_identity(model_id: str, revision: str | None) -> str:
    """The model's weights by content: a local (or built-in) folder's digest, a hub model's resolved commit.
    Two runs whose weights differ are different cells, whatever the model's name or path."""
    from render.run.loader import BUILTIN_PREFIX, ModelUnavailable, builtin_folder
    from render.rundir import model_identity

    if model_id.startswith(BUILTIN_PREFIX):
        from render.run.environment import check_builtin_model

        check_builtin_model(model_id[len(BUILTIN_PREFIX):])  # complete, or its cache writable to build it
        try:
            return model_identity(str(builtin_folder(model_id)), None)
        except (ModelUnavailable, OSError, RuntimeError) as error:
            raise ConfigError(f"model.id={model_id}: {error}") from None
    if model_id.startswith((".", "/", "~")):
        folder = Path(model_id).expanduser()
        if not (folder / "model_index.json").is_file():
            raise ConfigError(f"model.id={model_id}: no diffusers pipeline folder there (no model_index.json); "
                              "give a folder written by save_pretrained, or a hub id such as black-forest-labs/FLUX.1-dev")
        try:
            return model_identity(str(folder), None)
        except OSError as error:
            raise ConfigError(f"model.id={model_id}: its files cannot be read ({error})") from None
    try:
        return model_identity(model_id, revision)
    except ValueError:
        return UNRESOLVED  # preflight's model check refuses it, after the checks of the config itself


def _positive(name: str, value: Any) -> Any:
    if value is None or value <= 0:
        raise ConfigError(f"{name}={value}: must be positive")
    return value


def _size(name: str, value: Any, model: Any) -> int:
    """A height or width the model's pipeline renders as asked (it would round anything else silently)."""
    value, multiple = _positive(name, value), model.size_multiple
    if value % multiple:
        lower, upper = value // multiple * multiple, (value // multiple + 1) * multiple
        raise ConfigError(f"{name}={value}: model {model.name} renders sizes that are multiples of {multiple}; "
                          f"use {lower or upper} or {upper}")
    return int(value)


MAX_BATCH = 64  # samples per pipeline call: past it a batch is a queue, not a lever (and a typo's 1000 an OOM)


def check_batch(batch: Any, values: dict[str, Any]) -> int:
    """The batch a cell renders its samples in (docs/axes.md: batch); ConfigError, saying why, for a value out of
    range or an axis that cannot batch: a parallel cell (it splits one sample over its GPUs) or a cache whose skip
    is decided on the whole batch (render.axes.caches: a sample's pixels would depend on its neighbours)."""
    from render.axes.caches import cache_name, unbatchable

    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise ConfigError(f"batch={batch}: samples per pipeline call, an integer from 1 to {MAX_BATCH}, e.g. batch=4")
    if batch == 1:
        return 1
    if width_of(values.get("parallel")) > 1:
        raise ConfigError(f"batch={batch} with parallel={values['parallel']['name']}: a parallel cell splits one "
                          "sample's sequence over its GPUs, one sample per call; for throughput on N GPUs run N "
                          "replicas of a batched width-1 cell (assess fleet), or parallel=none")
    why = unbatchable(values["cache"])
    if why:
        raise ConfigError(f"batch={batch} with cache={cache_name(values['cache'])}: {why}; use batch=1 with this cache, "
                          "or a cache with a fixed schedule (taylorseer, pab, fastercache, magcache)")
    return batch


def _make_cell(cfg: DictConfig, model: ModelSpec, device_kind: str, *, steps: int, values: dict[str, Any],
               batch: int = 1) -> Cell:
    m = cfg.model
    height = _size("height", cfg.height if cfg.height is not None else m.height, m)
    width = _size("width", cfg.width if cfg.width is not None else m.width, m)
    guidance = cfg.guidance if cfg.guidance is not None else m.guidance
    if not math.isfinite(guidance) or guidance < 0:
        raise ConfigError(f"guidance={guidance}: must be >= 0 and finite")
    try:
        check_image_size(height, width)
    except LimitError as error:
        raise ConfigError(str(error)) from None
    return Cell(model, device_kind, _positive("steps", steps), float(guidance), int(height), int(width),
                axes=values, labels=axes.labels(values), batch=batch)


def anchor_overrides(cfg: DictConfig, anchor: Cell) -> list[str]:
    """The overrides whose composition is the anchor cell: everything that enters its key and is not the
    model's own (the size, guidance and dtype this job used, each axis at the anchor's value)."""
    return [f"model={cfg.model.name}", f"steps={anchor.steps}", *axes.overrides(anchor.axes),
            f"height={anchor.height}", f"width={anchor.width}", f"guidance={anchor.guidance}", f"dtype={anchor.model.dtype}"]


def cell_overrides(canonical: dict[str, Any]) -> list[str]:
    """Overrides that compose exactly this canonical cell (a run's `cell`, a winner's): the model by its config name,
    every key field of every axis written out (`cache=fbcache cache.threshold=0.1`), so nothing rests on a default
    that may change. A writer composes them back and compares keys (assess.winner)."""
    model = canonical["model"]
    out = [f"model={model['name']}", f"dtype={model['dtype']}", f"steps={canonical['steps']}",
           f"guidance={canonical['guidance']}", f"height={canonical['height']}", f"width={canonical['width']}"]
    for axis in axes.AXES:
        if canonical.get(axis.name) is None:  # an axis left out of the key at its default
            continue
        value = canonical[axis.name]
        if isinstance(value, dict):
            out += [f"{axis.name}={value['name']}",
                    *(f"{axis.name}.{k}={hydra_value(v)}" for k, v in value.items() if k != "name")]
        else:
            out.append(f"{axis.name}={hydra_value(value)}")
    return out + ([f"batch={canonical['batch']}"] if canonical.get("batch", 1) > 1 else [])


def hydra_value(value: Any) -> str:
    """A value as Hydra's override grammar reads it back (null, true, 0.1, [1,2], 'quoted text')."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = str(value)
    if re.fullmatch(r"[A-Za-z_][\w.\-/:]*", text) and text not in ("null", "true", "false"):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def check_prompts_fit(cfg: DictConfig) -> None:
    """A split written for some models only (the shapes captions) is refused for the others: a model fits by its
    name, or by the project id (`hypergrid:<name>`) a model of another name inherits (conf/model/my-tiny.yaml)."""
    from render.run.loader import BUILTIN_PREFIX

    fits = cfg.prompts.get("models")
    if fits and cfg.model.name not in fits and cfg.model.id not in [f"{BUILTIN_PREFIX}{name}" for name in fits]:
        written_for = f"model {fits[0]}" if len(fits) == 1 else f"the models {', '.join(fits)}"
        raise ConfigError(f"prompts={cfg.prompts.name} holds captions written for {written_for}, not "
                          f"model={cfg.model.name}: render the project suite (prompts=suite-dev) or a suite of your own "
                          "(docs/quality.md); prompts.models=null renders these anyway")


def check_parity(model: Any) -> None:
    """The model's default parity rule (model.parity) names a quality metric and a positive band."""
    from render.compose.metric_registry import quality_metric_names

    parity = model.get("parity")
    if parity is None:
        return
    if parity.metric is not None and parity.metric not in quality_metric_names():
        raise ConfigError(f"model.parity.metric={parity.metric}: not a quality metric; valid: "
                          f"{', '.join(quality_metric_names())}")
    if parity.band is not None and not (math.isfinite(parity.band) and parity.band > 0):
        raise ConfigError(f"model.parity.band={parity.band}: must be a positive number in the metric's units")


def build_job(cfg: DictConfig) -> Job:
    """Validate the composed config and build the job. Raises ConfigError / PromptError / AxisError."""
    m = cfg.model
    for what, value in (("model.name", m.name), ("prompts.name", cfg.prompts.name)):
        check_name(value, what)  # each can reach a folder name: refused before anything is written (the axes check theirs)
    try:
        check_pipeline(m.family, m.pipeline)  # the family's module says what it takes: it must exist and own the pipeline
        check_frames(m.family, m.name, m.num_frames, m.fps)  # clips only, and counts its VAE takes
    except FamilyUnavailable as error:
        raise ConfigError(str(error)) from None
    check_parity(m)
    device, device_kind = resolve_device(cfg.device)
    dtype = str(cfg.dtype or ("float32" if device_kind == "cpu" else m.dtype))  # the value, not the Enum member
    if dtype not in DTYPES:
        raise ConfigError(f"dtype={dtype}: valid values are {', '.join(DTYPES)}")
    model = ModelSpec(m.name, m.id, m.revision, m.pipeline, m.family, dtype, m.max_sequence_length,
                      num_frames=m.num_frames, fps=m.fps)
    steps = cfg.steps if cfg.steps is not None else m.steps
    values = axes.axis_values(cfg)
    cell = _make_cell(cfg, model, device_kind, steps=steps, values=values, batch=check_batch(cfg.get("batch", 1), values))
    if cfg.warmup is not None and cfg.warmup < 0:
        raise ConfigError(f"warmup={cfg.warmup}: must be >= 0 (or null: what the cell needs)")
    timing = check_timing(cfg.get("timing"))
    # the anchor renders one sample per call: the reference every batch is compared with
    anchor = _make_cell(cfg, model, device_kind, steps=m.anchor.steps, values=axes.anchor_values(m.anchor))
    check_prompts_fit(cfg)
    prompts = load_split(cfg.prompts)
    # the weights' identity last: a built-in model may have to be built for it, after every value was checked
    model = dataclasses.replace(model, weights=weights_identity(m.id, m.revision))
    cell, anchor = dataclasses.replace(cell, model=model), dataclasses.replace(anchor, model=model)
    return Job(
        cell=cell,
        anchor=anchor,
        anchor_overrides=anchor_overrides(cfg, anchor),
        prompts_name=cfg.prompts.name,
        split=str(cfg.prompts.split),
        prompts_file=cfg.prompts.file,
        prompts=prompts,
        seeds=parse_seeds(cfg.seed),
        device=device,
        out_root=Path(cfg.out_root).expanduser().resolve(),
        tag=cfg.tag,
        render_anchor=cfg.render_anchor,
        config=resolved_config(cfg),
        warmup=cfg.warmup,
        timing=timing,
    )


def single_device_job(job: Job) -> Job:
    """The same cell at width 1 (parallel=none) and batch 1, one sample per call on one device: what a parallel or a
    batched cell is measured and checked against."""
    values = {**job.cell.axes, "parallel": None}
    return replace(job, cell=replace(job.cell, axes=values, labels=axes.labels(values), batch=1))


def twin_job(job: Job) -> Job | None:
    """The job that renders a parallel or batched cell's single-call twin (docs/parallel.md and docs/axes.md: parity,
    the per-sample drift); None for a width-1 cell of batch 1."""
    return replace(single_device_job(job), render_anchor=False) if job.gpus > 1 or job.cell.batch > 1 else None


def companions(job: Job) -> list[Job]:
    """What the runner renders alongside a job: its anchor (unless it is the anchor or render_anchor is off) and a
    parallel cell's width-1 twin. A final's claim lists them with its cells (assess.climb.run_final.final_cells)."""
    anchor = [anchor_job(job)] if job.render_anchor and not job.is_anchor else []
    twin = twin_job(job)
    return anchor + ([twin] if twin is not None else [])


def twin_dir(job: Job) -> Path:
    """Where the runner renders a parallel cell's width-1 twin: one folder per twin cell, reused by every sweep."""
    twin = single_device_job(job).cell
    return job.out_root / "twins" / twin.model.name / twin.key


def anchor_job(job: Job) -> Job:
    """The job that renders the anchor's samples for the same prompts and seeds."""
    return Job(**{**job.__dict__, "cell": job.anchor, "render_anchor": False})


def anchor_dir(job: Job) -> Path:
    """Where the runner renders a model's anchor samples: one folder per anchor cell, reused by every sweep."""
    return job.out_root / "anchors" / job.anchor.model.name / job.anchor.key


def resolved_config(cfg: DictConfig) -> dict[str, Any]:
    """The whole config as plain values: a DictConfig's container is a dict keyed by its field names."""
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    return {str(k): v for k, v in container.items()}
