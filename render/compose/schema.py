"""Dataclass schemas for every config group, registered in Hydra's ConfigStore.

Each option file under ``render/conf/<group>/`` starts with ``defaults: [/schema/<group>@_here_, _self_]``
(a cache option: ``/schema/cache/<method>@_here_``), so a wrong type, an unknown key or a missing value fails at
composition, before anything is launched. The schemas live in a group of their own, `schema/`, not beside the
options they check: no listing of a group's options (Hydra's, `--help`'s, an error's "did you mean") shows them
as a choice, and no choice (`cache=fbcache_schema`) can land on one.
Importing this module registers the schemas and the resolvers; it must stay free of torch/diffusers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from render import axes
from render.axes import SCHEMA_GROUP
from render.laws.gpu_budget import Budget
from render.laws.rule import SPEED_CONFIDENCE, Objective
from render.run.live_metrics import MetricsConf
from render.compose.splits import Order, Split
from render.compose.spec import DType
from render.run.measure import TimingConf


@dataclass
class AnchorConf:
    """The model's frozen full-quality reference cell: what every comparison is made against."""

    steps: int = MISSING  # the model's full-quality step count
    attention: str = "native"  # attention option name (conf/attention/)
    cache: str = "none"  # cache option name (conf/cache/)
    scheduler: str = "default"  # scheduler option name (conf/scheduler/)


@dataclass
class ModelParityConf:
    """The model's default parity rule for a sweep's report, with where the band comes from (docs/quality.md): a
    measured lossless floor (`assess floor`) comes first, then this, then the metric's documented default."""

    metric: Optional[str] = None  # its quality metric (render/compose/metric_registry.py); None: the report's first available
    band: Optional[float] = None  # the parity band in the metric's units; None: the metric's documented default
    source: str = ""  # why this band: shown beside it on the report's first screen


@dataclass
class ModelConf:
    name: str = MISSING  # short name, used in folder names and reports
    id: str = MISSING  # hub id, local folder, or "hypergrid:<name>" for a model the project builds
    revision: Optional[str] = None  # hub revision (commit or tag); pin it for reproducible cells
    pipeline: str = MISSING  # diffusers pipeline class, e.g. FluxPipeline
    family: str = MISSING  # a module of render/models/families/ (flux, flux2, qwen-image, ...): the schedulers it takes
    dtype: DType = DType.bfloat16  # weights dtype: a bad value fails at composition, naming the valid ones
    steps: int = MISSING  # default number of inference steps
    guidance: float = MISSING  # default guidance scale
    height: int = MISSING  # default image height in pixels
    width: int = MISSING  # default image width in pixels
    max_sequence_length: Optional[int] = None  # text-encoder token budget, when the pipeline takes one
    size_multiple: int = 16  # height and width must be multiples of this (Flux/SD3: VAE factor 8 x 2x2 latent packing)
    num_frames: Optional[int] = None  # a clip family's frames per sample (Wan: 4k+1); None for an image model
    fps: Optional[int] = None  # a clip's playback rate, written into its file; None for an image model
    anchor: AnchorConf = field(default_factory=AnchorConf)
    parity: ModelParityConf = field(default_factory=ModelParityConf)  # the default metric and band of its reports


@dataclass
class PromptsConf:
    name: str = MISSING  # manifest name, e.g. smoke, dev, holdout
    split: Split = MISSING  # smoke | dev | holdout | custom: holdout renders are locked by the climb
    file: str = MISSING  # a suite file (relative: cwd, then the package's prompts/), or the file's path in `dataset`
    limit: Optional[int] = None  # render only the first N prompts of `order` (a rung of successive halving)
    order: Order = Order.stratified  # stratified: categories round-robin in order of first appearance | file: the file's order
    format: str = "auto"  # the file's reader: auto (by suffix) or a reader's name (render.suites.READERS)
    dataset: Optional[str] = None  # a hub dataset id holding `file`: downloaded once into the cache (docs/quality.md)
    revision: Optional[str] = None  # the dataset's revision (commit or tag); pin it for reproducible splits
    models: Optional[List[str]] = None  # the models the split was written for (the shapes captions: shapes, tiny); None: any


@dataclass
class ParityConf:
    metric: str = "ssim"  # the quality metric (an assess metric name) compared to the anchor
    band: float = 0.02  # parity: the cell is no worse than the anchor by more than band (or, equivalence, within +-band)
    alpha: float = 0.05  # significance level of the parity test per cell; Wilcoxon p-values Holm-corrected across a rung's cells
    # noninferiority (one-sided: no worse than -band) or equivalence (TOST, within +-band); unset: the frozen rule's
    # (a rule frozen before this key existed keeps equivalence), else noninferiority (docs/climb.md)
    test: Optional[str] = None
    per_category: bool = False  # parity also needs every category with enough prompts in band (docs/quality.md)
    category_min_prompts: int = 8  # prompts a category needs before it is flagged (or, per_category, can deny parity)


@dataclass
class SpeedConf:
    confidence: float = SPEED_CONFIDENCE  # a cell takes another's place on speed only when faster at this confidence (docs/climb.md)


@dataclass
class ExperimentConf:
    """A named climb (conf/experiment/<name>.yaml): what to search, on which prompts, within what budget."""

    name: str = MISSING  # the experiment's name: its runs, generations and final are recorded under it
    axes: Dict[str, List[Any]] = field(default_factory=dict)  # axis override key -> candidate values, e.g. steps: [4, 8, 16]
    start: Dict[str, Any] = field(default_factory=dict)  # the first incumbent's overrides (missing axes: the anchor's values)
    dev: str = "dev"  # prompts option navigated on
    holdout: str = "holdout"  # prompts option evaluated once, by `assess climb --final`
    seeds: List[int] = field(default_factory=lambda: [0])  # seeds rendered per prompt
    rungs: List[int] = field(default_factory=lambda: [8, 24, 60])  # dev prompt counts of successive halving
    eta: int = 3  # halving factor: the best 1/eta of a rung move to the next
    quality: ParityConf = field(default_factory=ParityConf)
    objective: Objective = Objective.latency  # minimised among cells at parity: latency (median warm s/image) | gpu_seconds (x width)
    speed: SpeedConf = field(default_factory=SpeedConf)  # how the objective's speed is compared under noise
    budget: Budget = field(default_factory=Budget)  # render.laws.gpu_budget: the schema is the validated type
    final: bool = False  # set only by `assess climb --final`: unlocks the holdout split and the reserve
    final_token: Optional[str] = None  # the token the final's claim issued: experiment.final works only with it


@dataclass
class RenderBaseConf:
    """The top-level config apart from the axes: the model, the prompts, and where and how to render."""

    model: ModelConf = MISSING
    prompts: PromptsConf = MISSING
    warmup: Optional[int] = None  # leading calls marked warm-up (not warm latency); None: what the cell needs (1; 2 with compile; 3 with compile + cache)
    steps: Optional[int] = None  # None: the model's default
    seed: Any = 0  # one seed or a list of seeds, e.g. seed=42 or seed=[0,1,2]
    height: Optional[int] = None  # None: the model's default
    width: Optional[int] = None  # None: the model's default
    guidance: Optional[float] = None  # None: the model's default
    batch: int = 1  # samples per pipeline call, each with its own seeded generator (docs/axes.md: batch)
    dtype: Optional[DType] = None  # None: the model's dtype (float32 on CPU)
    device: str = "auto"  # auto (CUDA when present) | cpu | cuda | cuda:N
    out_root: str = "outputs"  # output root: skip-if-done looks for finished samples anywhere under it
    tag: str = ""  # free label, kept in run.json; not part of the cell key
    render_anchor: bool = True  # render the anchor's missing samples for the same prompts and seeds too
    experiment: Optional[ExperimentConf] = None  # set by experiment=<name>: budget, holdout lock, frozen anchor
    metrics: MetricsConf = field(default_factory=MetricsConf)  # live Prometheus metrics of a sweep (render/run/live_metrics.py)
    timing: TimingConf = field(default_factory=TimingConf)  # how speed is measured: repeats, the reference workload (render/run/measure.py)


# The top-level config: one cell, plus where and how to render it. One field per axis (render.axes.AXES):
# a group's node (checked by its own option schema) or a knob's bool; every value enters the cell key.
RenderConf = dataclasses.make_dataclass(
    "RenderConf", [(a.name, a.field()[0], field(default=a.field()[1])) for a in axes.AXES], bases=(RenderBaseConf,))
RenderConf.__module__ = __name__  # so it pickles (submitit ships configs to jobs)


def _sanitise_subdir(num: Any, override_dirname: str) -> str:
    """A sweep subfolder name that cannot create subfolders or escape the sweep folder, nor show a credential."""
    from render.rundir.redact import redact

    name = re.sub(r"[^A-Za-z0-9=,._+-]", "_", redact(str(override_dirname))).replace("..", "__")
    name = name.lstrip(".") or "default"
    if len(name) > 120:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[:110]}-{digest}"
    return f"{int(num)}_{name}"


def register() -> None:
    """Register schemas and resolvers (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(group=SCHEMA_GROUP, name="render", node=RenderConf)
    cs.store(group=SCHEMA_GROUP, name="model", node=ModelConf)
    cs.store(group=SCHEMA_GROUP, name="prompts", node=PromptsConf)
    cs.store(group=SCHEMA_GROUP, name="experiment", node=ExperimentConf, package="experiment")
    axes.register(cs)
    # use_cache: Hydra copies the master config's resolver cache into every job's config, so all
    # jobs of one sweep (in-process or submitted) agree on the sweep folder.
    OmegaConf.register_new_resolver("hg_uniq", lambda: secrets.token_hex(2), use_cache=True, replace=True)
    OmegaConf.register_new_resolver("hg_subdir", _sanitise_subdir, replace=True)
    OmegaConf.register_new_resolver("hg_help_groups", _groups_help, replace=True)


def _groups_help() -> str:
    from render.compose.help import groups_help

    return groups_help()


register()
