"""A named climb (render/conf/experiment/<name>.yaml), composed with Hydra and checked.

`load_experiment("demo")` composes `config` with `experiment=demo` exactly as `python -m render`
would, then checks what a schema cannot, before the climb reads anything: every candidate value of
every axis composes, the start cell lies in the grid, the rungs fit the dev manifest, the quality
metric can express parity, the budget leaves room for the final, and the dev and holdout splits
share no prompt (by id nor by text). Errors name the key, the value and what would be valid.

Cells of the grid are `Coords`: one canonical value per axis, in the experiment's axis order.

Longer than the house's ~300 lines: composing an experiment and each of its checks (axes, splits,
metric, budget) share the composed config; every check is its own function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assess.errors import AssessError
from render.laws import canon
from render.laws.gpu_budget import Budget
from render.laws.rule import BadRule, Objective, check_quality_metric, check_search, rule_test
from render.rundir import shared_texts

Coords = tuple[str, ...]  # one canonical value per axis, in the experiment's axis order

# Override keys that are not knobs of a cell, or that the climb sets itself.
RESERVED_AXES = ("experiment", "prompts", "seed", "out_root", "tag", "render_anchor", "device", "hydra")
# Override key -> where the cell (run.json "cell") keeps it, when not at the same dotted path.
CELL_PATHS = {"dtype": "model.dtype", "model": "model.name"}
LEFT_OUT = {"parallel": "none", "batch": "1"}  # axes a cell leaves out at their default (render.compose.spec.Cell.canonical)


class ExperimentError(AssessError):
    """An experiment that cannot be climbed as configured; the message names the key and the fix."""


def cell_value(cell: dict[str, Any], axis: str) -> str:
    """The canonical value of `axis` in a run's cell (run.json "cell"); a group's value is its name."""
    node: Any = cell
    for part in CELL_PATHS.get(axis, axis).split("."):
        if not isinstance(node, dict) or part not in node:
            if node is cell and axis in LEFT_OUT:
                return LEFT_OUT[axis]
            raise ExperimentError(f"axis {axis!r} is not part of the cell (run.json 'cell' has no {axis!r}): "
                                  "an axis must change pixels or timing")
        node = node[part]
    if isinstance(node, dict):
        node = node.get("name")
    return canon(node)


@dataclass(frozen=True)
class Split:
    option: str  # the prompts option, e.g. dev
    split: str  # its split name (prompts.split), e.g. dev
    file: str
    ids: tuple[str, ...]  # in manifest order: rung r is ids[:r]
    texts: tuple[str, ...]


@dataclass(frozen=True)
class Quality:
    metric: str
    direction: str  # "higher" | "lower": which way is better
    needs_reference: bool  # the score already compares with the anchor
    identity: float | None  # a reference metric's value for the anchor itself
    band: float
    alpha: float
    test: str = "noninferiority"  # the parity test in the rule in force (assess.statistics.compare.ParityTest)


@dataclass(frozen=True)
class Experiment:
    name: str
    model: str
    axes: dict[str, tuple[str, ...]]  # axis override key -> candidate values (canonical), in config order
    start: Coords
    anchor: dict[str, str]  # steps, attention, cache, scheduler of the model's anchor (canonical)
    dev: Split
    holdout: Split
    seeds: tuple[int, ...]
    default_seeds: tuple[int, ...]  # what the composed config renders without seed=...
    rungs: tuple[int, ...]
    eta: int
    quality: Quality
    objective: Objective
    budget: Budget
    out_root: Path
    default_steps: int  # the model's default steps (cells without a steps axis)
    overrides: tuple[str, ...] = ()  # extra overrides the experiment was composed with (passed on to render)
    out_root_is_default: bool = True  # out_root is the composed config's: commands need not name it
    conf: dict[str, Any] = field(default_factory=dict)  # the resolved experiment node
    rule: dict[str, Any] = field(default_factory=dict)  # the decision rule (render.laws.rule), as composed
    amendments: tuple[dict[str, Any], ...] = ()  # the rule's recorded amendments (ledger), oldest first
    rule_problem: str | None = None  # when not checked strictly: how the composed rule differs from the one in force

    @property
    def ledger(self) -> Any:
        from render.laws import Ledger

        return Ledger(self.name, self.out_root)

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(self.axes)

    def coords_of(self, values: dict[str, Any]) -> Coords:
        return tuple(canon(values[a]) for a in self.axes)

    def as_dict(self, coords: Coords) -> dict[str, str]:
        return dict(zip(self.axes, coords, strict=True))

    def cell_overrides(self, coords: Coords) -> list[str]:
        return [f"{a}={v}" for a, v in zip(self.axes, coords, strict=True)]

    def label(self, coords: Coords) -> str:
        return " ".join(self.cell_overrides(coords))

    def coords_of_cell(self, cell: dict[str, Any]) -> Coords:
        return tuple(cell_value(cell, a) for a in self.axes)

    def steps_of(self, coords: Coords) -> int:
        values = self.as_dict(coords)
        return int(values["steps"]) if "steps" in values else self.default_steps

    def in_grid(self, coords: Coords) -> bool:
        return all(v in self.axes[a] for a, v in zip(self.axes, coords, strict=True))

    def seed_overrides(self) -> list[str]:
        if self.seeds == self.default_seeds:
            return []
        seeds = list(self.seeds)
        return [f"seed={seeds[0]}" if len(seeds) == 1 else f"seed=[{','.join(map(str, seeds))}]"]

    def base_overrides(self) -> list[str]:
        """What every render command of the climb starts with."""
        out_root = [] if self.out_root_is_default else [f"out_root={self.out_root}"]
        return [f"experiment={self.name}", *self.overrides, *out_root]


# -- composition ----------------------------------------------------------------------------


def conf_dir() -> Path:
    import render.compose.schema  # noqa: F401  registers the schemas and resolvers
    from render.compose.confpath import PACKAGE_CONF

    return PACKAGE_CONF


def compose(overrides: Sequence[str]) -> Any:
    """The task config `python -m render <overrides>` would run (Hydra's compose API)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    import render.compose.schema  # noqa: F401  registers the schemas and resolvers
    from render.compose.mistakes import CompositionMistake, explain

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        try:
            return hydra_compose(config_name="config", overrides=list(overrides))
        except Exception as error:  # an option or a key that does not exist: the line `python -m render` prints
            message = explain(error)
            if message is None:
                raise
            raise CompositionMistake(message) from error


def experiment_names() -> list[str]:
    from render.compose.confpath import group_options  # the package's experiments and those in ./conf/experiment

    return group_options("experiment")


def _compose_or_raise(overrides: Sequence[str], what: str) -> Any:
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from render.compose.mistakes import CompositionMistake

    try:
        return compose(overrides)
    except CompositionMistake as exc:  # its one line names the override, the closest real one and the valid ones
        raise ExperimentError(f"{what}: {exc}") from None
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        cause = str(exc.__cause__ or "").strip().splitlines()  # Hydra's "Error merging override" hides the why
        why = f" ({cause[0]})" if cause and cause[0] not in first else ""
        raise ExperimentError(f"{what}: {first}{why}") from None


# -- checks ---------------------------------------------------------------------------------


def check_disjoint(dev: Split, holdout: Split) -> None:
    """Dev and holdout share no prompt: neither an id nor a text (render.rundir.text_identity: NFKC, invisible
    characters, punctuation, spacing and case folded)."""
    shared_ids = sorted(set(dev.ids) & set(holdout.ids))
    if shared_ids:
        raise ExperimentError(f"the dev ({dev.option}) and holdout ({holdout.option}) prompts share id(s) "
                              f"{', '.join(shared_ids[:5])}: the holdout must be disjoint from what the climb "
                              "navigates on")
    shared = shared_texts(zip(dev.ids, dev.texts, strict=True), zip(holdout.ids, holdout.texts, strict=True))
    if shared:
        pairs = "; ".join(f"{d} = {h} ({t!r})" for d, h, t in shared[:3])
        raise ExperimentError(f"the dev ({dev.option}) and holdout ({holdout.option}) prompts share {len(shared)} "
                              f"text(s): {pairs}. Remove them from one manifest: the holdout must be unseen")


def _split(cfg: Any, option: str, key: str) -> Split:
    from render.compose.splits import PromptError, load_prompts

    p = cfg.prompts
    try:  # the whole split (its file, format or hub dataset), never its limit: rungs take the first N
        prompts = load_prompts(p.file, None, p.get("format", "auto"), p.get("dataset"), p.get("revision"),
                               str(p.get("order") or "stratified"))
    except PromptError as exc:
        raise ExperimentError(f"experiment.{key}={option}: {exc}") from None
    return Split(option, str(cfg.prompts.split), str(cfg.prompts.file),
                 tuple(p.id for p in prompts), tuple(p.text for p in prompts))


def _check_value(cfg: Any, axis: str, value: str) -> None:
    """A group axis names an option file of its group; any other axis takes the value under its schema."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from render.compose.confpath import group_options

    options = group_options(axis)
    if options:
        if value not in options:
            raise ExperimentError(f"experiment.axes.{axis}: {value}: no such option; valid options are "
                                  f"{', '.join(options)}")
        return
    try:
        OmegaConf.update(cfg.copy(), axis, value, merge=False)
    except OmegaConfBaseException as exc:
        first = str(exc).strip().splitlines()[0]
        raise ExperimentError(f"experiment.axes.{axis}: {value}: {first}") from None


def _axes(exp: Any, cfg: Any, name: str) -> dict[str, tuple[str, ...]]:
    raw = dict(exp.axes)
    if not raw:
        raise ExperimentError(f"experiment {name}: experiment.axes is empty; give at least one axis, "
                              "e.g. axes: {steps: [4, 8, 16]}")
    axes: dict[str, tuple[str, ...]] = {}
    for axis, values in raw.items():
        root = axis.lstrip("+~").split(".")[0]
        if axis.startswith("model.anchor"):
            raise ExperimentError(f"experiment.axes.{axis}: the anchor is frozen; an experiment cannot move it")
        if root in RESERVED_AXES:
            raise ExperimentError(f"experiment.axes.{axis}: {root} is set by the climb, not an axis "
                                  f"(reserved: {', '.join(RESERVED_AXES)})")
        canonical = tuple(canon(v) for v in values)
        if not canonical:
            raise ExperimentError(f"experiment.axes.{axis}: no candidate values")
        if len(set(canonical)) != len(canonical):
            raise ExperimentError(f"experiment.axes.{axis}: a value is listed twice ({list(canonical)})")
        for value in canonical:
            _check_value(cfg, axis, value)
        axes[axis] = canonical
    return axes


def _start(exp: Any, axes: dict[str, tuple[str, ...]], anchor: dict[str, str], cfg: Any, name: str) -> Coords:
    start = {str(k): canon(v) for k, v in dict(exp.start).items()}
    unknown = sorted(set(start) - set(axes))
    if unknown:
        raise ExperimentError(f"experiment.start: {', '.join(unknown)} is not an axis; axes are {', '.join(axes)}")
    coords = []
    for axis, values in axes.items():
        if axis in start:
            value, source = start[axis], "experiment.start"
        elif axis in anchor:
            value, source = anchor[axis], "the anchor (model.anchor)"
        else:
            from omegaconf import OmegaConf

            node = OmegaConf.select(cfg, axis)
            value, source = canon(node.name if hasattr(node, "name") else node), "the composed config"
        if value not in values:
            raise ExperimentError(f"experiment {name}: the start value {axis}={value} (from {source}) is not among "
                                  f"experiment.axes.{axis}: {', '.join(values)}")
        coords.append(value)
    return tuple(coords)


def _refuse_non_finite(node: Any, where: str) -> None:
    """Every number of the experiment is finite: a NaN band passes `band <= 0` and every other comparison."""
    import math

    from omegaconf import OmegaConf

    def walk(value: Any, name: str) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise ExperimentError(f"{name}={value}: must be a finite number")
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{name}.{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{name}[{i}]")

    walk(OmegaConf.to_container(node, resolve=False), where)


def _quality(exp: Any, test: str) -> Quality:
    from render.compose.metric_registry import SPECS

    metric = str(exp.quality.metric)
    try:
        check_quality_metric(metric)
    except BadRule as error:
        raise ExperimentError(str(error)) from None
    spec = SPECS[metric]
    identity = spec.identity
    band, alpha = float(exp.quality.band), float(exp.quality.alpha)
    if band <= 0:
        raise ExperimentError(f"experiment.quality.band={band}: must be > 0 (in {metric} units)")
    if not 0 < alpha < 0.5:
        raise ExperimentError(f"experiment.quality.alpha={alpha}: must be in (0, 0.5), e.g. 0.05")
    return Quality(metric, spec.direction, spec.needs_reference, identity, band, alpha, test)


def _rungs(exp: Any, dev: Split) -> tuple[int, ...]:
    rungs = tuple(int(r) for r in exp.rungs)
    if not rungs or any(r < 1 for r in rungs) or list(rungs) != sorted(set(rungs)):
        raise ExperimentError(f"experiment.rungs={list(rungs)}: give increasing prompt counts >= 1, e.g. [8, 24, 60]")
    if rungs[-1] > len(dev.ids):
        raise ExperimentError(f"experiment.rungs={list(rungs)}: the top rung needs {rungs[-1]} prompts, the dev split "
                              f"({dev.option}) has {len(dev.ids)}")
    return rungs


def _seeds(value: Any) -> tuple[int, ...]:
    from omegaconf import ListConfig

    values = list(value) if isinstance(value, list | tuple | ListConfig) else [value]
    return tuple(int(v) for v in values)


def exp_ledger(name: str, out_root: Path) -> Any:
    from render.laws import Ledger

    return Ledger(name, out_root)


def _rule(exp: Any, dev: Split, holdout: Split, out_root: Path, name: str, strict: bool, amend: str | None,
          restart: str | None = None) -> tuple[dict[str, Any], tuple[dict[str, Any], ...], str | None]:
    """(the composed rule, the ledger's amendments, the difference to the rule in force when not strict). With
    `amend`, a differing rule is recorded as an amendment; strictly, it is refused with both versions shown."""
    from render.laws import RuleChanged, amend_rule, check_rule, content_hash, rule_in_force, rule_of
    from render.laws.rule import BadRule
    from render.compose.splits import Prompt

    def content(split: Split) -> str:
        return content_hash([Prompt(i, t) for i, t in zip(split.ids, split.texts, strict=True)])

    ledger = exp_ledger(name, out_root)
    try:
        rule = rule_of(exp, content(dev), content(holdout), rule_in_force(ledger)[0])
    except BadRule as error:
        raise ExperimentError(str(error)) from None
    if restart is not None:
        restart_ledger(ledger, restart)
    check_held(ledger, rule)
    problem = None
    try:
        if amend is not None:
            amend_rule(ledger, rule, amend)
        check_rule(ledger, rule)
    except RuleChanged as error:
        if strict or amend is not None:
            raise ExperimentError(str(error)) from None
        problem = str(error).split("\n  in force:")[0]
    return rule, tuple(rule_in_force(ledger)[1]), problem


def restart_ledger(ledger: Any, reason: str) -> None:
    """`--restart`: start the experiment over, recorded, over the evidence of its lost ledger (render.laws.restart)."""
    from render.errors import RenderError
    from render.laws.evidence import run_records, traces
    from render.laws.restart import restart

    try:
        restart(ledger, reason, traces(ledger, run_records(ledger)))
    except RenderError as error:
        raise ExperimentError(str(error)) from None


def check_held(ledger: Any, rule: dict[str, Any]) -> None:
    """Refuse, before anything is decided or recorded, an experiment whose evidence (its runs under every out_root
    its ledger knows, its generation records, spend logs, replaced copies, final) shows a ledger this one is not:
    lost, fresh, or one whose quality rule was changed without an amendment (render.laws.evidence)."""
    from render.errors import RenderError
    from render.laws.evidence import check_ledger_held, run_records, traces

    try:
        check_ledger_held(ledger, traces(ledger, run_records(ledger)), rule)
    except RenderError as error:
        raise ExperimentError(str(error)) from None


def load_experiment(name: str, overrides: Sequence[str] = (), out_root: Path | str | None = None, *,
                    strict: bool = True, amend: str | None = None, restart: str | None = None) -> Experiment:
    """Compose `experiment=<name>` (plus overrides) and check it, its decision rule against the one in force in its
    ledger (`strict`: refused when it differs; else kept in `rule_problem`; `amend`: recorded as an amendment);
    raises ExperimentError."""
    from omegaconf import OmegaConf

    from render.compose.confpath import shadowed_message, shadowing

    files = shadowing("experiment", name)
    if files is not None:  # Hydra would compose the shipped file: the user's rule would never be the one climbed
        raise ExperimentError(shadowed_message("experiment", name, files))
    names = experiment_names()
    if name not in names and not overrides:
        raise ExperimentError(f"no experiment {name!r}: valid experiments are {', '.join(names) or '(none)'} "
                              f"(render/conf/experiment/<name>.yaml, or conf/experiment/<name>.yaml here)")
    extra = tuple(overrides)
    cfg = _compose_or_raise([f"experiment={name}", *extra], f"experiment={name}")
    exp = cfg.experiment
    _refuse_non_finite(exp, "experiment")
    if exp is None:
        raise ExperimentError(f"experiment={name}: the file sets no `experiment:` node")
    dev_cfg = _compose_or_raise([f"experiment={name}", *extra, f"prompts={exp.dev}"], f"experiment.dev={exp.dev}")
    holdout_cfg = _compose_or_raise([f"experiment={name}", *extra, f"prompts={exp.holdout}"],
                                    f"experiment.holdout={exp.holdout}")
    if str(exp.name) != name:
        raise ExperimentError(f"experiment={name}: its experiment.name is {exp.name!r}; make them equal "
                              "(runs are recorded under the name)")
    try:
        check_search(OmegaConf.to_container(exp, resolve=True))  # type: ignore[arg-type]
    except BadRule as error:
        raise ExperimentError(str(error)) from None
    dev = _split(dev_cfg, str(exp.dev), "dev")
    holdout = _split(holdout_cfg, str(exp.holdout), "holdout")
    if dev.split == holdout.split:
        raise ExperimentError(f"experiment.dev={dev.option} and experiment.holdout={holdout.option} are both split "
                              f"{dev.split!r}: the holdout must be a split of its own")
    check_disjoint(dev, holdout)
    a = cfg.model.anchor
    anchor = {"steps": canon(a.steps), "attention": canon(a.attention), "cache": canon(a.cache),
              "scheduler": canon(a.scheduler)}
    axes = _axes(exp, dev_cfg, name)
    root = Path(out_root if out_root is not None else cfg.out_root)
    seeds = _seeds(exp.seeds)
    rule, amendments, problem = _rule(exp, dev, holdout, root, name, strict, amend, restart)
    quality, budget, rungs, eta = _quality(exp, rule_test(rule)), Budget.of(rule["budget"]), _rungs(exp, dev), int(exp.eta)
    from render.laws import rule_in_force

    force = rule_in_force(exp_ledger(name, root))[0] or rule
    if problem or force != rule:  # the rule in force is the ledger's (an amendment holds without its --set)
        q, b = force["quality"], force["budget"]
        quality = Quality(q["metric"], quality.direction, quality.needs_reference, quality.identity, q["band"], q["alpha"],
                          rule_test(force))
        budget = Budget.of(b)
        rungs, eta, rule = tuple(force["rungs"]), int(force["eta"]), force
        # the grid and the seeds are part of the frozen decision too: the amended ones hold without their --set
        axes = {axis: tuple(values) for axis, values in force.get("axes", {}).items()} or axes
        seeds = tuple(int(s) for s in force.get("seeds") or seeds)
    return Experiment(
        name=name,
        model=str(cfg.model.name),
        axes=axes,
        start=_start(exp, axes, anchor, cfg, name),
        anchor=anchor,
        dev=dev,
        holdout=holdout,
        seeds=seeds,
        default_seeds=_seeds(cfg.seed),
        rungs=rungs,
        eta=eta,
        quality=quality,
        objective=Objective(str(rule.get("objective", exp.objective))),  # the rule in force's
        budget=budget,
        out_root=root,
        out_root_is_default=out_root is None or Path(out_root) == Path(cfg.out_root),
        default_steps=int(cfg.steps if cfg.steps is not None else cfg.model.steps),
        overrides=extra,
        conf=OmegaConf.to_container(exp, resolve=True),  # type: ignore[arg-type]
        rule=rule,
        amendments=amendments,
        rule_problem=problem,
    )
