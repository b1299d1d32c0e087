"""The records of a run directory, parsed: run.json, samples.jsonl, the terminal record, SWEEP.json.

One definition serves the writer (render) and every reader (assess, the launchers, the tests).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from render.rundir.errors import InvalidRunDirectory, NotARunDirectory
from render.rundir.states import Category, CellState
from render.rundir.identity import cell_key_of
from render.rundir.files import DONE, FAILED, MULTIRUN_YAML, RUN_JSON, SAMPLES, SWEEP_JSON
from render.rundir.run_record import RunRecord
from render.rundir.untrusted import UnsafePath, contained, relative_path

FAILURE_CATEGORIES = tuple(c.value for c in Category)
RUN_FIELDS = tuple(f.name for f in fields(RunRecord) if f.default is MISSING and f.default_factory is MISSING)  # required


@dataclass(frozen=True)
class SampleRecord:
    """One line of samples.jsonl: a finished sample, its image's content hash and its measurements."""

    cell_key: str
    prompt_id: str
    seed: int
    prompt: str | None
    image: str
    width: int | None
    height: int | None
    latency_s: float | None
    warmup: bool
    steps: int | None
    s_per_step: float | None
    peak_mem_bytes: int | None
    mem_kind: str | None
    load_s: float | None
    reused_from: str | None
    finished_at: str | None
    sha256: str | None = None  # of the image file; a file that does not match is not this sample
    bytes: int | None = None  # the image file's size
    prompt_sha: str | None = None  # render.rundir.identity.sample_text_hash of the exact prompt text: part of the identity
    compile_s: float | None = None  # time torch.compile spent inside this call (dynamo's counters; 0 when warm)
    compiled_frames: int | None = None  # frames dynamo compiled during this call
    recompiles: int | None = None  # frames compiled on a call after the cell's first: recompilations
    weights_bytes: int | None = None  # the pipeline's weights footprint as loaded (after quantization)
    category: str | None = None  # the prompt's category in its suite (DrawBench Category, GenEval tag, ...)
    challenge: str | None = None  # the prompt's challenge level (PartiPrompts Challenge)
    ref_s: float | None = None  # the job's reference workload at the start of this sample's cell (render.run.measure)
    latency_calls: tuple[float, ...] | None = None  # every call's latency when timing.repeats > 1 (latency_s: their median)
    # What the cache computed and reused in this call (render/axes/caches/_engagement.py); None: no cache
    steps_computed: int | None = None  # denoiser calls that computed every hooked unit
    steps_reused: int | None = None  # denoiser calls in which some unit returned a cached or predicted output
    blocks_computed: int | None = None  # hooked units (blocks, attention layers) that computed
    blocks_reused: int | None = None  # hooked units that returned a cached or predicted output
    compile_cache_hits: int | None = None  # inductor FX-graph cache hits during the call (artefacts on disk)
    compile_cache_misses: int | None = None  # inductor FX-graph cache misses: graphs compiled from nothing
    gpus: int | None = None  # devices the call held: a parallel cell's width (render.axes.parallel); None: one
    # A batched cell's sample (render.cell: batch > 1): latency_s is its call's, what a user of the batch waits for
    # the image; its share of the device time is latency_s / batch (device_s, the budget's and throughput's)
    batch: int | None = None  # samples in the pipeline call that rendered it; None: one
    share_s: float | None = None  # latency_s / batch: device seconds per image of the call
    # A clip sample (a clip family's model: render.run.apng); None for an image. The clip is one sample: latency_s is its
    # whole call, s_per_frame that over its frames
    frames: int | None = None  # frames in the clip file (the reader checks it)
    fps: int | None = None  # its playback rate
    s_per_frame: float | None = None  # latency_s / frames
    # Where the call's time went (render.run.stage_clock; device-synchronised, the median call's when timing.repeats > 1;
    # a batched call's, as latency_s): None in a record written before they were recorded
    text_s: float | None = None  # inside the pipeline's encode_prompt (every text encoder, the negative prompt's too)
    denoise_s: float | None = None  # from the text encoding's end to the VAE decode's start: the denoising loop
    vae_s: float | None = None  # inside vae.decode (0: a pixel-space model without a VAE)
    # the experiment's ledger in force when this record was written (render.laws.ledger.ledger_stamp, as run.json's
    # `ledger`): a run resumed by a launch under another ledger holds samples of two bodies of evidence
    ledger: dict[str, Any] | None = field(default=None, hash=False)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.cell_key, self.prompt_id, self.seed)

    @property
    def device_s(self) -> float:
        """Device seconds rendering this sample took: every call's latency (repeated warm calls included), times the
        devices each call held (a parallel cell's width: GPU-seconds are what a budget pays), shared by the samples of
        a batched call."""
        return (sum(self.latency_calls) if self.latency_calls else (self.latency_s or 0.0)) * (self.gpus or 1) / (self.batch or 1)

    @property
    def text_id(self) -> str:
        """The prompt's exact-text identity (render.rundir.identity.sample_text_hash), recomputed from the text when the record
        has it: records of older contract versions hashed a weaker normal form."""
        from render.rundir.identity import sample_text_id

        return sample_text_id(self.prompt, self.prompt_id) if self.prompt is not None or not self.prompt_sha \
            else self.prompt_sha

    @property
    def identity(self) -> tuple[str, str, int]:
        """The sample by content: (cell key, text identity, seed)."""
        return (self.cell_key, self.text_id, self.seed)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


SAMPLE_FIELDS = tuple(f.name for f in fields(SampleRecord))
_REQUIRED_SAMPLE = ("prompt_id", "seed", "image", "latency_s")


@dataclass(frozen=True)
class Terminal:
    """The run's terminal record: DONE.json or FAILED.json."""

    kind: CellState  # DONE or FAILED
    path: Path
    data: dict[str, Any]

    @property
    def category(self) -> str | None:
        return self.data.get("category") if self.kind == CellState.FAILED else None

    @property
    def finished_at(self) -> str | None:
        return self.data.get("finished_at") or self.data.get("failed_at")


@dataclass(frozen=True)
class RunExperiment:
    """The experiment a run was rendered for, as its run.json's config names it."""

    name: str
    final: bool  # rendered by the experiment's final (its holdout)
    budget: dict[str, Any]  # the experiment's budget block as the run was launched with it
    # the whole experiment node as composed (its holdout option, its rule's fields: render.laws.experiment_rule)
    node: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def experiment_of(run: RunRecord) -> RunExperiment | None:
    """The one reading of "which experiment does this run belong to": None for a run outside any experiment."""
    return experiment_in(run.config)


def experiment_in(config: dict[str, Any]) -> RunExperiment | None:
    """The experiment a resolved task config (a job's, a run's) renders for; None outside any experiment."""
    experiment = (config or {}).get("experiment") or {}
    if not isinstance(experiment, dict) or not experiment.get("name"):
        return None
    return RunExperiment(str(experiment["name"]), bool(experiment.get("final")), dict(experiment.get("budget") or {}),
                         node=dict(experiment))


@dataclass
class RunDir:
    """A parsed run directory."""

    path: Path
    run: RunRecord
    samples: list[SampleRecord]
    terminal: Terminal | None
    problems: list[str] = field(default_factory=list)  # lines of samples.jsonl that were skipped

    @property
    def cell_key(self) -> str:
        return self.run.cell_key

    @property
    def cell(self) -> dict[str, Any]:
        return self.run.cell

    @property
    def anchor_cell_key(self) -> str:
        return self.run.anchor.cell_key

    @property
    def experiment(self) -> RunExperiment | None:
        return experiment_of(self.run)

    @property
    def anchor_overrides(self) -> list[str]:
        return list(self.run.anchor.overrides)

    @property
    def is_anchor(self) -> bool:
        return self.run.is_anchor

    @property
    def prompt_ids(self) -> list[str]:
        return list(self.run.prompts.ids)

    @property
    def prompt_text_ids(self) -> list[str]:
        """The text identity of each of the run's prompts (in manifest order): from its samples' texts where it has
        them, else from run.json (whose hashes are of this contract version's normal form only from version 3)."""
        from render.rundir.files import CONTRACT_VERSION

        by_id = {s.prompt_id: s.text_id for s in self.samples}
        recorded = self.run.prompts.sha if self.run.schema == CONTRACT_VERSION else {}
        return [by_id.get(p) or recorded.get(p) or f"id:{p}" for p in self.prompt_ids]

    @property
    def prompts_name(self) -> str:
        return self.run.prompts.name

    @property
    def split(self) -> str:
        return self.run.prompts.split or self.prompts_name

    @property
    def seeds(self) -> list[int]:
        return list(self.run.seeds)

    @property
    def overrides(self) -> list[str]:
        return list(self.run.overrides)

    @property
    def n_expected(self) -> int:
        return len(self.prompt_ids) * len(self.seeds)

    @property
    def twin_key(self) -> str | None:
        """The cell key of a parallel cell's width-1 twin (assess.statistics.parity); None for a width-1 cell."""
        return twin_key(self.cell)

    @property
    def anchor_dir(self) -> Path | None:
        """Where the renderer keeps this cell's anchor runs (run.json anchor.dir under out_root), if named."""
        folder = self.run.anchor.dir
        if not folder:
            return None
        out_root = self.run.out_root
        if not out_root:
            return None
        try:  # recorded data: a folder under out_root, never one it leads out to (render.rundir.untrusted)
            if Path(str(folder)).is_absolute():
                return contained(out_root, Path(str(folder)).relative_to(Path(out_root)), "anchor.dir")
            return contained(out_root, relative_path(folder, "anchor.dir"), "anchor.dir")
        except (UnsafePath, ValueError):
            return None

    @property
    def describe(self) -> str | None:
        return self.run.describe

    @property
    def sweep(self) -> Path | None:
        parent = self.path.parent
        return parent if is_sweep_folder(parent) else None

    def image_path(self, sample: SampleRecord) -> Path:
        """The sample's image file, resolved; UnsafePath (an OSError) when it leads outside the run folder."""
        return contained(self.path, sample.image, "image")


def twin_key(cell: dict[str, Any]) -> str | None:
    """The cell key of a parallel or batched cell's single-call twin: its cell without `parallel` and `batch`
    (render.cell.single_device_job); None for a width-1 cell of batch 1."""
    if cell.get("parallel") is None and cell.get("batch") is None:
        return None
    return cell_key_of({k: v for k, v in cell.items() if k not in ("parallel", "batch")})


def load_json(path: Path) -> dict[str, Any]:
    """Read a JSON object from a contract file; a broken file raises InvalidRunDirectory."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidRunDirectory(f"{path}: not a readable JSON file ({exc})") from exc
    if not isinstance(data, dict):
        raise InvalidRunDirectory(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _require(data: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if k not in data]
    if missing:
        raise InvalidRunDirectory(f"{where}: missing key(s) {', '.join(missing)} (see docs/run-directory.md)")


def parse_sample(obj: dict[str, Any], cell_key: str) -> SampleRecord:
    """One samples.jsonl object -> SampleRecord; a missing required key raises KeyError."""
    for key in _REQUIRED_SAMPLE:
        obj[key]  # noqa: B018 - a parser that misses an expected key raises
    values: dict[str, Any] = {name: obj.get(name) for name in SAMPLE_FIELDS}
    values["cell_key"] = obj.get("cell_key") or cell_key
    values["prompt_id"], values["seed"] = str(obj["prompt_id"]), int(obj["seed"])
    values["image"] = relative_path(obj["image"], "image")
    values["warmup"] = bool(obj.get("warmup", False))
    for name in ("width", "height", "steps", "peak_mem_bytes", "bytes", "compiled_frames", "recompiles", "weights_bytes",
                 "steps_computed", "steps_reused", "blocks_computed", "blocks_reused", "compile_cache_hits",
                 "compile_cache_misses", "gpus", "frames", "fps", "batch"):
        values[name] = None if values[name] is None else int(values[name])
    for name in ("latency_s", "s_per_step", "load_s", "compile_s", "ref_s", "s_per_frame", "share_s"):
        values[name] = None if values[name] is None else float(values[name])
    if values["latency_calls"] is not None:
        values["latency_calls"] = tuple(float(x) for x in values["latency_calls"])
    values["ledger"] = dict(values["ledger"]) if isinstance(values["ledger"], dict) else None
    return SampleRecord(**values)


def read_samples(path: Path, cell_key: str) -> tuple[list[SampleRecord], list[str]]:
    """Parse a run directory's samples.jsonl: (samples, problems). A later line for the same sample wins.

    A line that does not parse (a torn write) is skipped and reported as a problem; a sample line
    that names another cell key breaks the contract and raises.
    """
    file = path / SAMPLES
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return [], []
    by_key: dict[tuple[str, str, int], SampleRecord] = {}
    problems: list[str] = []
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            sample = parse_sample(json.loads(line), cell_key)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, UnsafePath) as exc:
            what = "unfinished last line" if number == len(lines) else "unreadable line"
            problems.append(f"{file}:{number}: {what} skipped ({type(exc).__name__}: {exc})")
            continue
        if sample.cell_key != cell_key:
            raise InvalidRunDirectory(f"{file}:{number}: sample of cell {sample.cell_key} in a run of cell {cell_key}")
        by_key[sample.key] = sample
    return list(by_key.values()), problems


def read_terminal(path: Path) -> Terminal | None:
    done, failed = path / DONE, path / FAILED
    if done.exists() and failed.exists():
        raise InvalidRunDirectory(f"{path}: both DONE.json and FAILED.json (exactly one terminal record allowed)")
    if done.exists():
        return Terminal(CellState.DONE, done, load_json(done))
    if failed.exists():
        data = load_json(failed)
        _require(data, ("category",), str(failed))
        return Terminal(CellState.FAILED, failed, data)
    return None


def read_run_record(path: Path | str) -> RunRecord:
    """A run directory's run.json, parsed (InvalidRunDirectory when it breaks the contract)."""
    return RunRecord.parse(load_json(Path(path) / RUN_JSON), str(Path(path) / RUN_JSON))


def load_run(path: Path | str) -> RunDir:
    """Parse one run directory. Raises NotARunDirectory when it has no run.json."""
    path = Path(path).resolve()
    if not (path / RUN_JSON).is_file():
        raise NotARunDirectory(f"{path} is not a run directory: it has no {RUN_JSON}")
    run = read_run_record(path)
    samples, problems = read_samples(path, run.cell_key)
    return RunDir(path=path, run=run, samples=samples, terminal=read_terminal(path), problems=problems)


def is_sweep_folder(path: Path) -> bool:
    return (path / SWEEP_JSON).exists() or (path / MULTIRUN_YAML).exists()


def parse_time(value: str | None) -> datetime | None:
    """ISO-8601 time from a record; naive times are taken as UTC."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def parse_override(override: str) -> tuple[str, str] | None:
    """'steps=8' -> ('steps', '8'); '+a.b=1' -> ('a.b', '1'); no '=' -> None."""
    if "=" not in override:
        return None
    key, value = override.split("=", 1)
    return key.lstrip("+~"), value


# what a cell's overrides hold that does not name the cell: its prompts and seeds, where it writes, the launcher's
NOT_THE_CELL = ("seed", "prompts", "out_root", "tag", "render_anchor", "hydra", "timing", "metrics", "experiment")


def cell_label(overrides: Sequence[str], is_anchor: bool = False) -> str:
    """A cell named as the user wrote it: its own overrides (`steps=8 cache=fbcache`), without what does not make
    the cell (prompts, seeds, output folders); `anchor` for an anchor; `defaults` for a cell of no override."""
    if is_anchor:
        return "anchor"
    own = [o for o in overrides if (p := parse_override(o)) is not None
           and p[0].split(".")[0].split("/")[0] not in NOT_THE_CELL]
    return " ".join(own) or "defaults"
