"""A cell: one resolved, validated configuration, and its cell key.

`build_job` turns the composed Hydra config into typed objects and checks every value a schema
cannot (ranges, seed lists, prompt files). It imports no torch unless the device must be detected.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from render.axes import axes_key_params
from render.caches import CACHES, cache_key_params
from render.errors import RenderError
from render.prompts import Prompt, load_prompts
from render.rundir import cell_key_of, check_name

DTYPES = ("float32", "float16", "bfloat16")


class ConfigError(RenderError, ValueError):
    """A config value that composes but cannot be rendered."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    id: str
    revision: str | None
    pipeline: str
    family: str
    dtype: str
    max_sequence_length: int | None
    weights: str = ""  # what the weights are, by content (render.rundir.identity.model_identity): in the cell key


@dataclass(frozen=True)
class Cell:
    """Exactly what changes pixels or timing; `key` hashes nothing else."""

    model: ModelSpec
    device_kind: str
    attention: str
    cache: dict[str, Any]
    scheduler: str
    steps: int
    guidance: float
    height: int
    width: int
    # speed axes (render/axes/); an anchor keeps the defaults: no compile, quantization or offload
    compile: dict[str, Any] = field(default_factory=lambda: {"name": "none"})
    quant: dict[str, Any] = field(default_factory=lambda: {"name": "none"})
    offload: dict[str, Any] = field(default_factory=lambda: {"name": "none"})
    vae_tiling: bool = False
    vae_slicing: bool = False
    fuse_qkv: bool = False
    channels_last: bool = False

    def canonical(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def key(self) -> str:
        return cell_key_of(self.canonical())

    def describe(self) -> str:
        cache = ",".join(f"{k}={v}" for k, v in self.cache.items() if k != "name")
        cache = f"{self.cache['name']}({cache})" if cache else self.cache["name"]
        speed = [f"{g}={getattr(self, g)['name']}" for g in ("compile", "quant", "offload") if getattr(self, g)["name"] != "none"]
        speed += [t for t in ("vae_tiling", "vae_slicing", "fuse_qkv", "channels_last") if getattr(self, t)]
        return (f"{self.model.name} {self.attention} {cache} {self.scheduler} {self.steps} steps {self.height}x{self.width}"
                + "".join(f" {s}" for s in speed))


@dataclass(frozen=True)
class Job:
    """One cell plus what to render with it and where."""

    cell: Cell
    anchor: Cell
    anchor_overrides: list[str]
    cache_conf: Any  # the cache config node, for apply_cache
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

    @property
    def is_anchor(self) -> bool:
        return self.cell.key == self.anchor.key

    @property
    def sample_ids(self) -> list[tuple[str, int]]:
        return [(p.id, s) for p in self.prompts for s in self.seeds]

    @property
    def samples(self) -> list[tuple[str, str, int]]:
        """Each sample's identity within the cell: (prompt id, prompt text, seed)."""
        return [(p.id, p.text, s) for p in self.prompts for s in self.seeds]


def resolve_device(device: str) -> tuple[str, str]:
    """(torch device, device kind). The kind is "cpu" or the GPU's name, which enters the cell key."""
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
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
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"seed={seed}: seeds must be non-negative integers, e.g. seed=42 or seed=[0,1,2]")
        seeds.append(value)
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"seed={seed}: a seed is listed twice")
    return seeds


UNRESOLVED = "hub:unresolved"  # a hub revision that is neither cached nor reachable: no cell can render it


def weights_identity(model_id: str, revision: str | None) -> str:
    """The model's weights by content: a local (or built-in) folder's digest, a hub model's resolved commit.
    Two runs whose weights differ are different cells, whatever the model's name or path."""
    from render.loading import BUILTIN_PREFIX, ModelUnavailable, builtin_folder
    from render.rundir import model_identity

    if model_id.startswith(BUILTIN_PREFIX):
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


def _make_cell(cfg: DictConfig, model: ModelSpec, device_kind: str, *, steps: int, attention: str, cache: dict, scheduler: str) -> Cell:
    m = cfg.model
    height = _size("height", cfg.height if cfg.height is not None else m.height, m)
    width = _size("width", cfg.width if cfg.width is not None else m.width, m)
    guidance = cfg.guidance if cfg.guidance is not None else m.guidance
    if guidance < 0:
        raise ConfigError(f"guidance={guidance}: must be >= 0")
    return Cell(model, device_kind, attention, cache, scheduler, _positive("steps", steps), float(guidance), int(height), int(width))


def build_job(cfg: DictConfig) -> Job:
    """Validate the composed config and build the job. Raises ConfigError / PromptError."""
    m = cfg.model
    for what, value in (("model.name", m.name), ("attention", cfg.attention.name), ("cache", cfg.cache.name),
                        ("scheduler", cfg.scheduler.name), ("prompts.name", cfg.prompts.name),
                        ("model.anchor.attention", m.anchor.attention), ("model.anchor.cache", m.anchor.cache),
                        ("model.anchor.scheduler", m.anchor.scheduler)):
        check_name(value, what)  # each can reach a folder name: refused before anything is written
    device, device_kind = resolve_device(cfg.device)
    dtype = cfg.dtype or ("float32" if device_kind == "cpu" else m.dtype)
    if dtype not in DTYPES:
        raise ConfigError(f"dtype={dtype}: valid values are {', '.join(DTYPES)}")
    model = ModelSpec(m.name, m.id, m.revision, m.pipeline, m.family, dtype, m.max_sequence_length,
                      weights_identity(m.id, m.revision))
    steps = cfg.steps if cfg.steps is not None else m.steps
    cell = _make_cell(cfg, model, device_kind, steps=steps, attention=cfg.attention.name,
                      cache=cache_key_params(cfg.cache), scheduler=cfg.scheduler.name)
    try:
        cell = dataclasses.replace(cell, **axes_key_params(cfg))
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if cfg.warmup is not None and cfg.warmup < 0:
        raise ConfigError(f"warmup={cfg.warmup}: must be >= 0 (or null: what the cell needs)")
    a = m.anchor
    if a.cache not in CACHES:
        raise ConfigError(f"model.anchor.cache={a.cache}: valid values are {', '.join(CACHES)}")
    anchor = _make_cell(cfg, model, device_kind, steps=a.steps, attention=a.attention,
                        cache=cache_key_params(CACHES[a.cache][0]()), scheduler=a.scheduler)
    anchor_overrides = [f"model={m.name}", f"steps={a.steps}", f"attention={a.attention}", f"cache={a.cache}", f"scheduler={a.scheduler}"]
    prompts = load_prompts(cfg.prompts.file, cfg.prompts.limit)
    return Job(
        cell=cell,
        anchor=anchor,
        anchor_overrides=anchor_overrides,
        cache_conf=cfg.cache,
        prompts_name=cfg.prompts.name,
        split=cfg.prompts.split,
        prompts_file=cfg.prompts.file,
        prompts=prompts,
        seeds=parse_seeds(cfg.seed),
        device=device,
        out_root=Path(cfg.out_root).expanduser().resolve(),
        tag=cfg.tag,
        render_anchor=cfg.render_anchor,
        config=OmegaConf.to_container(cfg, resolve=True),
        warmup=cfg.warmup,
    )


def anchor_job(job: Job) -> Job:
    """The job that renders the anchor's samples for the same prompts and seeds."""
    cache_conf = CACHES[job.anchor.cache["name"]][0]()
    return Job(**{**job.__dict__, "cell": job.anchor, "cache_conf": cache_conf, "render_anchor": False})


def anchor_dir(job: Job) -> Path:
    """Where the runner renders a model's anchor samples: one folder per anchor cell, reused by every sweep."""
    return job.out_root / "anchors" / job.anchor.model.name / job.anchor.key
