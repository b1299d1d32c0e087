"""What the index says about an experiment's cells on its dev split, as decide's `CellData` tables.

A run belongs to an experiment when its run.json says so (`config.experiment.name`); the index
learns that once per run (`run_experiments`, read from the files). A grid cell is found by its
coordinates, read from the run's cell (run.json "cell"), so it does not matter which overrides
(or which defaults) produced it. Its samples are the cell key's samples on the dev split wherever
they were rendered (skip-if-done may have linked them from another run). Only the dev split is
read: holdout samples never reach the navigation.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assess.climb.decide import CellData, Coords
from assess.experiment import Experiment
from assess.index.database import Index, now_iso
from assess.statistics.noise import noisy_reason
from assess.statistics.parity import drifting
from assess.statistics.compare import per_prompt_deltas, reference_drift
from assess.statistics.width import cell_batch, cell_width
from render.laws.anchor import frozen_anchor
from render.rundir import Category, CellState, InvalidRunDirectory, experiment_of, read_run_record



@dataclass
class Observed:
    cells: dict[Coords, CellData]
    keys: dict[Coords, str]  # cell key per grid cell
    anchor_key: str | None
    anchor_rendered: frozenset[str]  # dev prompts the anchor has (every seed)
    anchor_latencies: dict[str, list[float]]  # dev prompt -> the anchor's warm latencies
    to_score: list[Path]  # sweeps (or runs) holding samples without a quality score
    ignored: list[str]  # runs of the experiment that are not cells of its grid, and why
    holdout_runs: list[str]  # runs of the experiment on the holdout split
    device_kind: str | None  # of the latest dev run: what the cost estimate assumes
    height: int | None
    width: int | None
    notes: list[str] = field(default_factory=list)
    strangers: list[Any] = field(default_factory=list)  # runs compared with another anchor, not adopted (refused)
    run_paths: list[str] = field(default_factory=list)  # every run of the experiment the index knows under its ledger
    # the dev samples the climb decides on (its cells' and its anchor's: cell key, text identity, seed), whoever
    # rendered them, and the runs that rendered them: the budget's evidence (render.laws.spend.record_evidence)
    evidence: list[tuple[str, str, int]] = field(default_factory=list)
    evidence_runs: list[str] = field(default_factory=list)


def sync_run_experiments(index: Index) -> None:
    """Learn, from their run.json, which experiment the runs not seen yet belong to."""
    rows = index.query("SELECT path FROM runs WHERE path NOT IN (SELECT path FROM run_experiments)")
    found = []
    for row in rows:
        try:
            experiment = experiment_of(read_run_record(row["path"]))
        except (OSError, InvalidRunDirectory):
            continue  # moved or unreadable since it was indexed: `assess score` reports it
        found.append({"path": row["path"], "experiment": experiment and experiment.name,
                      "final": int(bool(experiment and experiment.final)), "read_at": now_iso()})
    if found:
        with index.write():
            index.table("run_experiments").insert_all(found, replace=True, alter=False)


def unindexed_runs(index: Index, exp: Experiment) -> list[Path]:
    """Run directories of the experiment's dev split under the output root that the index does not have
    (rendered but never scored): their sweep folders, or the runs themselves outside a sweep."""
    from render.rundir import is_sweep_folder
    from render.rundir import iter_run_dirs, read_run_record

    known = {r["path"] for r in index.query("SELECT path FROM runs")}
    found: set[Path] = set()
    anchors: set[Path] = set()
    for run_dir in iter_run_dirs(Path(exp.out_root)):
        path = run_dir.resolve()
        if str(path) in known:
            continue
        try:
            meta = read_run_record(path)
        except (OSError, InvalidRunDirectory):
            continue
        if (mine := experiment_of(meta)) is not None and mine.name == exp.name and meta.prompts.split == exp.dev.split:
            (anchors if meta.is_anchor else found).add(path.parent if is_sweep_folder(path.parent) else path)
    return sorted(found or anchors)  # scoring a sweep scores the anchor runs it names


def experiment_runs(index: Index, name: str) -> list[dict[str, Any]]:
    return index.query("SELECT r.*, e.final FROM runs r JOIN run_experiments e ON e.path = r.path "
                       "WHERE e.experiment = ? ORDER BY r.started_at, r.path", (name,))


def split_ids(exp: Experiment, split: str) -> dict[str, str]:
    """text identity -> the experiment's prompt id, for its dev or holdout split: samples are matched to the
    split's prompts by content (the exact text's hash, as the index's `prompt_sha`), so a sample of another text
    under the same id is not one of them."""
    from render.rundir import sample_text_hash

    chosen = exp.dev if split == exp.dev.split else exp.holdout
    return {sample_text_hash(t): i for i, t in zip(chosen.ids, chosen.texts, strict=True)}


Held = frozenset[tuple[str, str, int]] | None  # the samples the experiment's runs hold under its ledger; None: any


def _held(held: Held, cell_key: str, row: dict[str, Any]) -> bool:
    return held is None or (cell_key, row["prompt_sha"], int(row["seed"])) in held


def _scores(index: Index, exp: Experiment, cell_key: str, metric: str, split: str, held: Held = None
            ) -> dict[tuple[str, int], dict[str, Any]]:
    """The metric's scores of a cell at the registry's current version only: a score of another version is
    not a score yet (the cell reads as partially scored until it is re-scored). Keyed (split's prompt id, seed);
    with `held`, only the samples it holds."""
    from assess.metrics import SPECS

    ids = split_ids(exp, split)
    rows = index.query("SELECT s.prompt_sha, s.seed, s.value, s.unavailable_reason, s.config FROM scores s "
                       "JOIN samples p USING (cell_key, prompt_sha, seed) "
                       "WHERE s.cell_key = ? AND s.metric = ? AND s.metric_version = ?",
                       (cell_key, metric, SPECS[metric].version))  # the split's texts, whatever run rendered them
    return {(ids[r["prompt_sha"]], r["seed"]): _under_rule(exp, metric, r) for r in rows
            if r["prompt_sha"] in ids and _held(held, cell_key, r)}


def _under_rule(exp: Experiment, metric: str, row: dict[str, Any]) -> dict[str, Any]:
    """A score as the decision may read it: checked against the model the rule in force names for its metric (not
    only against the anchor's score beside it); one of another model is set apart, unavailable with the reason."""
    from assess.metrics.model_identity import rule_model

    model = rule_model(exp.rule, metric) if row["value"] is not None else None
    why = model.why_not(row["config"]) if model is not None else None
    return row if why is None else {**row, "value": None, "unavailable_reason": why}


def typical_reference(index: Index, split: str) -> float | None:
    """The median reference workload time over the split's samples: the scale that keeps paired latencies in seconds."""
    rows = index.query("SELECT ref_s FROM samples WHERE split = ? AND ref_s > 0 ORDER BY ref_s", (split,))
    return float(rows[len(rows) // 2]["ref_s"]) if rows else None


def sample_table(index: Index, exp: Experiment, cell_key: str, split: str, reference: float | None = None,
                 held: Held = None) -> tuple[frozenset[str], dict[str, list[float]], dict[str, list[int]]]:
    """(prompts whose every seed is rendered, prompt -> warm latencies) of a cell on a split, its samples matched
    to the split's prompts by text identity. With `reference` (typical_reference) and a reference timing on every
    warm sample of the cell, each latency is paired with its own job's: latency x reference / ref_s, so cells timed
    in different jobs, nodes or hours compare on one device speed (docs/timing.md). With `held`, only the samples
    it holds (the experiment's evidence: observe)."""
    ids = split_ids(exp, split)
    # by text identity alone: a sample counts in every split that holds its text (rendered under smoke, it is dev's too)
    rows = [r for r in index.query("SELECT prompt_sha, seed, latency_s, ref_s, warmup, batch FROM samples "
                                   "WHERE cell_key = ?", (cell_key,)) if _held(held, cell_key, r)]
    warm = [r for r in rows if not r["warmup"] and r["latency_s"] is not None]
    paired = reference is not None and bool(warm) and all(r["ref_s"] for r in warm)
    seeds: dict[str, set[int]] = defaultdict(set)
    latencies: dict[str, list[float]] = defaultdict(list)
    sizes: dict[str, list[int]] = defaultdict(list)  # the size of the call behind each latency (its record's batch)
    for r in rows:
        prompt = ids.get(r["prompt_sha"])
        if prompt is not None and r["seed"] in exp.seeds:
            seeds[prompt].add(r["seed"])
            if not r["warmup"] and r["latency_s"] is not None:
                scale = reference / r["ref_s"] if paired and reference is not None else 1.0
                latencies[prompt].append(float(r["latency_s"]) * scale)
                sizes[prompt].append(int(r["batch"] or 0))  # 0: the record does not say (the cell's batch)
    rendered = frozenset(p for p, s in seeds.items() if s >= set(exp.seeds))
    return rendered, dict(latencies), dict(sizes)


def with_same_work(index: Index, exp: Experiment, cells: dict[Coords, CellData]) -> dict[Coords, CellData]:
    """The cells with the earlier cell (grid order) whose dev images each reproduces byte for byte, if any: the same
    work, one result (assess.statistics.side_by_side.same_work: never a parallel cell), never ranked apart."""
    from dataclasses import replace

    from assess.climb.plan import Plan
    from assess.statistics.side_by_side import same_work

    order = sorted((c for c in cells if cells[c].cell_key and not cells[c].is_anchor),
                   key=Plan.from_experiment(exp).grid_index)
    by_key = {str(cells[c].cell_key): c for c in order}
    twins = same_work(index, list(by_key), exp.dev.split)
    return {c: replace(d, same_work_as=by_key[twins[d.cell_key]]) if d.cell_key in twins else d for c, d in cells.items()}


def with_side_by_side(index: Index, cells: dict[Coords, CellData]) -> dict[Coords, CellData]:
    """The cells with the latency ratios of every two of them that a session timed side by side (assess retime,
    the climb's own timing of a choice within noise): what decides between those two on speed."""
    from dataclasses import replace

    from assess.statistics.side_by_side import latency_ratios

    ratios = latency_ratios(index, [c.cell_key for c in cells.values() if c.cell_key])
    if not ratios:
        return cells
    return {coords: replace(c, side_by_side={b: figure for (a, b), figure in ratios.items() if a == c.cell_key})
            for coords, c in cells.items()}


def speed_noise(index: Index, cell_key: str, split: str) -> tuple[float | None, str | None]:
    """(the reference's largest drift over a run that rendered the cell's samples, why its speed is too noisy to rank
    it or None): the climb's CellData.noise and noisy (docs/timing.md)."""
    flag = index.query("SELECT value, detail FROM cell_scores WHERE cell_key = ? AND split = ? AND metric = 'speed_noise' "
                       "ORDER BY metric_version DESC LIMIT 1", (cell_key, split))
    return reference_drift(index, cell_key), (noisy_reason(flag[0]["value"], flag[0]["detail"]) if flag else None)


def quality_deltas(index: Index, exp: Experiment, cell_key: str, anchor_key: str | None, split: str,
                   rendered: frozenset[str], held: Held = None) -> tuple[dict[str, float], frozenset[str], dict[str, str]]:
    """(prompt -> delta to the anchor, prompts not scored yet, prompt -> why unavailable); with `held`, the cell's
    scores of the samples it holds only (the anchor's are the frozen reference's, wherever rendered)."""
    q = exp.quality
    if cell_key == anchor_key:
        return {p: 0.0 for p in rendered}, frozenset(), {}
    mine = _scores(index, exp, cell_key, q.metric, split, held)
    reference = {} if q.needs_reference or anchor_key is None else _scores(index, exp, anchor_key, q.metric, split)
    values: dict[tuple[str, int], float] = {}
    anchor_values: dict[tuple[str, int], float] = {}
    unscored: set[str] = set()
    unavailable: dict[str, str] = {}
    for prompt in rendered:
        for seed in exp.seeds:
            row = mine.get((prompt, seed))
            if row is None:
                unscored.add(prompt)
            elif row["value"] is None:
                unavailable.setdefault(prompt, row["unavailable_reason"])
            elif q.needs_reference:
                values[(prompt, seed)] = row["value"]
            elif (other := reference.get((prompt, seed))) is None or other["value"] is None:
                unavailable.setdefault(prompt, f"the anchor has no {q.metric} score for ({prompt}, seed {seed})")
            elif other["config"] != row["config"]:
                unavailable.setdefault(prompt, f"{q.metric} of the cell ({row['config'] or 'default'}) and of the anchor "
                                               f"({other['config'] or 'default'}) were scored differently: re-score "
                                               "both with the same model (assess score --force ...)")
            else:
                values[(prompt, seed)], anchor_values[(prompt, seed)] = row["value"], other["value"]
    deltas = per_prompt_deltas(values, q.identity if q.needs_reference else anchor_values)  # type: ignore[arg-type]
    return deltas, frozenset(unscored), {p: r for p, r in unavailable.items() if p not in deltas}


def idle_cache(index: Index, run: dict[str, Any], split: str) -> str | None:
    """The engagement line of a cache cell whose samples on the split never reused a step, else None."""
    from assess.report.speed_notes import cache_engagement, engagement_note

    samples = index.samples_of(run["cell_key"], split)
    found = cache_engagement(samples)
    if found is None or found.engaged:
        return None
    return engagement_note(json.loads(run["cell"]), samples)


def _failures(runs: list[dict[str, Any]]) -> tuple[str | None, int | None]:
    failed = [r for r in runs if r["status"] == CellState.FAILED]
    if not failed:
        return None, None
    last = failed[-1]
    # a transient failure (cancelled, out of time) is proposed again: it says nothing of the cell
    lasting = [len(json.loads(r["prompt_ids"])) for r in failed if not Category.is_transient(r["category"])]
    return f"{last['category']}: {last['message']}", (min(lasting) if lasting else None)


def observe(index: Index, exp: Experiment) -> Observed:
    """The experiment's cells on its dev split, from the index (sync_run_experiments first)."""
    runs, apart = _under_this_ledger(exp, experiment_runs(index, exp.name))
    held = _held_by(exp, runs)
    counted = [r["path"] for r in runs]  # the budget's: strangers too (adopted: counted, never ranked)
    runs, strangers, adopted_notes = _accountable(exp, runs)
    dev_runs = [r for r in runs if r["prompts_name"] == exp.dev.option and r["split"] == exp.dev.split]
    holdout = [r["path"] for r in runs if r["split"] == exp.holdout.split]
    by_coords: dict[Coords, list[dict[str, Any]]] = defaultdict(list)
    ignored = [*apart, *adopted_notes]
    for run in dev_runs:
        cell = json.loads(run["cell"])
        coords = exp.coords_of_cell(cell)
        if (cell.get("model") or {}).get("name") != exp.model:
            ignored.append(f"{run['path']}: model {cell.get('model', {}).get('name')}, the experiment's is {exp.model}")
        elif not exp.in_grid(coords):
            ignored.append(f"{run['path']}: {exp.label(coords)} is outside the grid")
        else:
            by_coords[coords].append(run)
    anchors = Counter(r["anchor_cell_key"] for r in dev_runs)
    frozen = frozen_anchor(exp.ledger)  # the reference is the ledger's, never the runs' majority
    anchor_key = frozen["cell_key"] if frozen else anchors.most_common(1)[0][0] if anchors else None
    notes = []
    if len(anchors) > 1 and not frozen:
        notes.append(f"runs compare with {len(anchors)} anchors (device kinds?); using {anchor_key}")
    cells: dict[Coords, CellData] = {}
    keys: dict[Coords, str] = {}
    to_score: set[Path] = set()
    reference = typical_reference(index, exp.dev.split)
    for coords, group in by_coords.items():
        counts = Counter(r["cell_key"] for r in group)
        key = max(counts, key=lambda k: (sum(r["n_samples"] for r in group if r["cell_key"] == k), k))
        if len(counts) > 1:
            notes.append(f"{exp.label(coords)}: {len(counts)} cell keys; using {key} (most samples)")
        mine = [r for r in group if r["cell_key"] == key]
        mine_held = None if key == anchor_key else held  # the frozen anchor's samples are its, wherever rendered
        rendered, latencies, sizes = sample_table(index, exp, key, exp.dev.split, reference, mine_held)
        deltas, unscored, unavailable = quality_deltas(index, exp, key, anchor_key, exp.dev.split, rendered, mine_held)
        if unscored:
            to_score |= {Path(r["sweep"] or r["path"]) for r in mine}
        failed, blocked = _failures(mine)
        keys[coords] = key
        noise, noisy = speed_noise(index, key, exp.dev.split)
        cells[coords] = CellData(coords, key, rendered, deltas, latencies, unscored, unavailable, failed, blocked,
                                 is_anchor=key == anchor_key, idle_cache=idle_cache(index, mine[-1], exp.dev.split),
                                 noise=noise, noisy=noisy, drift=drifting(index.parity(key)), width=cell_width(index, key),
                                 batch=cell_batch(index, key), call_sizes=sizes)
    cells = with_side_by_side(index, with_same_work(index, exp, cells))
    anchor_rendered, anchor_latencies, _ = (sample_table(index, exp, anchor_key, exp.dev.split, reference)
                                            if anchor_key else (frozenset(), {}, {}))
    latest = dev_runs[-1] if dev_runs else None
    to_score |= set(unindexed_runs(index, exp))
    evidence, evidence_runs = evidence_samples(index, exp, [*keys.values(), *([anchor_key] if anchor_key else [])],
                                               held, anchor_key)
    return Observed(cells, keys, anchor_key, anchor_rendered, anchor_latencies, sorted(to_score), ignored, holdout,
                    latest["device_kind"] if latest else None, latest["height"] if latest else None,
                    latest["width"] if latest else None, notes, strangers, counted, evidence, evidence_runs)


def evidence_samples(index: Index, exp: Experiment, cell_keys: list[str], held: Held = None, anchor_key: str | None = None
                     ) -> tuple[list[tuple[str, str, int]], list[str]]:
    """(the dev samples of these cells the climb reads: cell key, text identity, seed; the runs that rendered them),
    matched to the dev split's prompts and the experiment's seeds, and to `held` but for the anchor's, as
    sample_table matches them."""
    if not cell_keys:
        return [], []
    ids = split_ids(exp, exp.dev.split)
    marks = ", ".join("?" * len(set(cell_keys)))
    rows = index.query(f"SELECT cell_key, prompt_sha, seed, run_path FROM samples WHERE cell_key IN ({marks})",
                       sorted(set(cell_keys)))  # matched to the dev split's texts below, whatever run rendered them
    used = [r for r in rows if r["prompt_sha"] in ids and r["seed"] in exp.seeds
            and (r["cell_key"] == anchor_key or _held(held, r["cell_key"], r))]
    return ([(r["cell_key"], r["prompt_sha"], int(r["seed"])) for r in used],
            sorted({str(r["run_path"]) for r in used}))


def _under_this_ledger(exp: Experiment, runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the runs gathered under this experiment's ledger, a line per run kept apart): a run whose run.json names a
    ledger head this ledger's chain never had (launched from another state folder, under another rule, or after the
    ledger was restarted), or names none though launched after the chain began, is another body of evidence
    (render.laws.evidence.Gathered): it is listed, never ranked and not counted in the budget. A run launched before
    the chain began that names no head (an older version's) is taken as before, on its anchor."""
    from render.laws.evidence import Gathered

    gathered = Gathered.of(exp.ledger)
    if not gathered.heads:
        return runs, []
    kept, apart = [], []
    for run in runs:
        try:
            record = read_run_record(run["path"])
            why = gathered.why_apart(record.ledger, record.started_at)
        except (OSError, InvalidRunDirectory):
            why = None  # unreadable since it was indexed: `assess score` reports it
        if why is None:
            kept.append(run)
        else:
            apart.append(f"{run['path']}: {why} of {exp.name}: kept apart, never ranked, not counted in the budget")
    return kept, apart


def _held_by(exp: Experiment, runs: list[dict[str, Any]]) -> Held:
    """The samples the experiment's runs (those under its ledger) hold under its ledger, rendered or linked: its
    evidence. A sample another body of evidence rendered is the experiment's once one of its runs links it (and
    the budget pays its recorded cost); until then the climb does not read it. None before the ledger's chain."""
    from render.laws.evidence import Gathered, held_samples
    from render.rundir import load_runs

    gathered = Gathered.of(exp.ledger)
    if not gathered.heads:
        return None
    if not runs:
        return frozenset()
    return frozenset(held_samples(gathered, exp.name, load_runs([Path(r["path"]) for r in runs], problems=[])))


def _accountable(exp: Experiment, runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any], list[str]]:
    """(the runs the ledger accounts for, the strangers it does not, a line per adopted one): a run compared with
    another anchor than the frozen one (render.laws.evidence) never reaches the ranking; adopted, it is listed."""
    from render.laws.evidence import adopted, strangers

    ledger = exp.ledger
    every = strangers(ledger, [(r["path"], r["cell_key"], r["anchor_cell_key"]) for r in runs], include_adopted=True)
    if not every:
        return runs, [], []
    taken = adopted(ledger)
    out = {s.path for s in every}
    notes = [f"{s.path}: adopted on {taken[(s.path, s.cell_key)].get('at', '?')} "
             f"({taken[(s.path, s.cell_key)].get('reason')}): {s.why}; counted in the budget, never ranked"
             for s in every if (s.path, s.cell_key) in taken]
    kept = [r for r in runs if str(Path(r["path"]).resolve()) not in out]
    return kept, [s for s in every if (s.path, s.cell_key) not in taken], notes
