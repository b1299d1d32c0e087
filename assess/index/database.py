"""The sqlite index: schema (a contract the hill climb reads), migrations, writes and queries.

Derived from run directories only; `assess score --rebuild outputs/` rebuilds it (assess/scoring/rebuild.py).
Safe for many concurrent writers: WAL, a long busy timeout, and every write in a short
`BEGIN IMMEDIATE` transaction (a deferred transaction that later wants to write can fail with
"database is locked" whatever the timeout).

Tables (see SCHEMA below for every column):
  meta         key/value: schema_version
  migrations   name, applied_at — one row per migration applied
  metrics      name, version, family, level, direction, needs_reference, unit, description
  runs         one row per run directory (pk path)
  samples      one row per sample (pk cell_key, prompt_sha, seed: the sample by content; prompt_id is a label)
  scores       one row per sample and metric (pk cell_key, prompt_sha, seed, metric, metric_version):
               value REAL or NULL with unavailable_reason
  cell_scores  per (cell_key, split, metric, metric_version): sample metrics averaged over the
               cell's samples, and the cell-level speed metrics
  cell_summary per (cell_key, split): status, counts and the main metrics as columns (what the
               `cells` view shows; kept in step with cell_scores in the same transactions)
  run_experiments, generations, generation_cells, finals: the hill climb (migration 0002_climb)
  samples.category, samples.challenge: the prompt's labels in its suite; set_scores: set-level metrics of a
               cell against its anchor (CMMD) per split (migration 0004_quality)
  samples.steps_computed ... compile_cache_misses: cache engagement and compile per sample (0006_engagement)
  samples.frames, fps, s_per_frame: a clip sample's (0009_clips); NULL for an image
  samples.text_s, denoise_s, vae_s: where the sample's time went (0014_stages); NULL when not recorded
  parity       per sample of a parallel cell: its drift against its width-1 twin's sample (0010_parity, assess.statistics.parity)
  timing_sessions, timing_cells: side-by-side timing sessions and their contenders' rounds (0007_side_by_side)
  run_files    per run directory: its content stamp when last scored and what that scoring left, so that a rescore
               skips an unchanged folder without reading it (0011_run_identity, assess.scoring.ingest)
Views: cells (one row per cell and split, main metrics as columns), leaderboard (cells vs
their anchor: deltas and speed-up), failures (failed runs), cache_engagement (steps and units a cache
cell computed and reused), compile_break_even (compile time cold and warm, images until it pays).

Writes go through sqlite-utils (`Index.table`, list-mode insert_all/upsert_all, delete_where, add_column,
create_view), on tables that keep what the library would redo on every call (assess/index/writer.py). The
conditional upserts (a reuse never replaces the rendering run's sample; an "unavailable" score never undoes a value
of the same version and config) are decided in Python from the rows read in the same BEGIN IMMEDIATE transaction.
SQL stays for the migration scripts (history) and one set-based fill (sync_metric_columns).
`python benchmarks/index.py` times these writes against the hand-written SQL they replaced (benchmarks/index_baseline.py).

Longer than the house's ~300 lines on purpose: the schema, its migrations and the SQL that reads it
change together; split apart, a column added in one place would be missed in another.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from assess.errors import IndexDamaged, IndexSchemaError, IndexUnwritable, NotScored
from assess.metrics import SPECS, MetricSpec, Outcome
from render.compose.metric_registry import SPEED_SPECS, delta_metric_names
from assess.metrics.speed import cell_speed
from render.rundir import now_iso  # one clock format for every record; assess modules import it from here too
from render.rundir.redact import redact
from render.rundir.files import create_empty
from render.rundir.identity import sample_text_id

if TYPE_CHECKING:
    import sqlite_utils

    from assess.index.writer import IndexTable

INDEX_ENV = "HYPERGRID_INDEX"
DEFAULT_INDEX = Path("outputs") / "index.db"
BUSY_TIMEOUT_S = 120.0

# The metric columns of cell_summary and the `cells` view (cell_scores pivoted): every registered metric.
# An index made before a metric was registered gains its column when opened (`Index.sync_metric_columns`).
PIVOT_METRICS = tuple(SPECS)


# The columns the index's writes give, in list mode (sqlite-utils: the first record names the columns).
SCORE_COLUMNS = ("cell_key", "prompt_sha", "prompt_id", "seed", "metric", "metric_version", "value",
                 "unavailable_reason", "direction", "config", "reference_cell_key", "detail", "scored_at")
CELL_SCORE_COLUMNS = ("cell_key", "split", "metric", "metric_version", "direction", "value", "unavailable_reason",
                      "n", "n_unavailable", "detail", "low", "high", "updated_at")
PARITY_COLUMNS = ("cell_key", "prompt_sha", "seed", "twin_cell_key", "max_levels", "ssim", "unavailable_reason",
                  "computed_at")
METRIC_COLUMNS = ("name", "version", "family", "level", "direction", "needs_reference", "unit", "description")
# Rows per multi-row insert (sqlite-utils caps it at 999 variables per statement): one statement for a cell's scores.
WRITE_BATCH = 1000

SCHEMA_0001 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL);
CREATE TABLE metrics (
  name TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  family TEXT NOT NULL,
  level TEXT NOT NULL CHECK (level IN ('sample', 'cell')),
  direction TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
  needs_reference INTEGER NOT NULL,
  unit TEXT NOT NULL,
  description TEXT NOT NULL
);
CREATE TABLE runs (
  path TEXT PRIMARY KEY,              -- absolute path of the run directory
  sweep TEXT,                         -- the sweep folder holding it (SWEEP.json/multirun.yaml), or NULL
  cell_key TEXT NOT NULL,
  describe TEXT,                      -- run.json describe: a human label of the cell
  anchor_cell_key TEXT NOT NULL,
  is_anchor INTEGER NOT NULL,
  split TEXT NOT NULL,
  prompts_name TEXT NOT NULL,
  n_expected INTEGER NOT NULL,        -- len(prompt ids) x len(seeds)
  n_samples INTEGER NOT NULL,         -- samples.jsonl lines
  n_rendered INTEGER NOT NULL,
  n_reused INTEGER NOT NULL,
  -- incomplete: no terminal record when indexed (`assess status` tells running from crashed)
  status TEXT NOT NULL CHECK (status IN ('done', 'failed', 'incomplete')),
  category TEXT,                      -- FAILED.json category
  message TEXT,                       -- FAILED.json message
  failed_record TEXT,                 -- path of FAILED.json (holds the traceback)
  model TEXT, attention TEXT, cache TEXT, scheduler TEXT, steps INTEGER, guidance REAL,
  height INTEGER, width INTEGER, device_kind TEXT,
  cell TEXT NOT NULL,                 -- JSON: run.json["cell"]
  overrides TEXT NOT NULL,            -- JSON list
  anchor_overrides TEXT NOT NULL,     -- JSON list: what renders the anchor
  prompt_ids TEXT NOT NULL,           -- JSON list
  seeds TEXT NOT NULL,                -- JSON list
  host TEXT, pid INTEGER, launcher TEXT, slurm_job_id TEXT,
  started_at TEXT, finished_at TEXT,
  wall_s REAL,                        -- DONE.json wall_s
  gpu_s REAL NOT NULL,                -- spent by this run: rendered latency + load (reused cost 0)
  git_revision TEXT, git_dirty INTEGER,
  versions TEXT,                      -- JSON
  problems TEXT,                      -- JSON list: skipped samples.jsonl lines
  indexed_at TEXT NOT NULL
);
CREATE INDEX runs_cell ON runs (cell_key, split);
CREATE INDEX runs_sweep ON runs (sweep);
CREATE INDEX runs_anchor ON runs (anchor_cell_key);
CREATE TABLE samples (
  cell_key TEXT NOT NULL,
  prompt_id TEXT NOT NULL,
  seed INTEGER NOT NULL,
  split TEXT NOT NULL,
  run_path TEXT NOT NULL,             -- the run directory holding the image (a rendering run wins over a reusing one)
  image TEXT NOT NULL,                -- relative to run_path
  prompt TEXT,
  width INTEGER, height INTEGER,
  latency_s REAL, warmup INTEGER NOT NULL, steps INTEGER, s_per_step REAL,
  peak_mem_bytes INTEGER, mem_kind TEXT, load_s REAL,
  reused_from TEXT, finished_at TEXT,
  problem TEXT,                       -- NULL, or why the sample is flagged (image missing, unreadable)
  PRIMARY KEY (cell_key, prompt_id, seed)
);
CREATE INDEX samples_run ON samples (run_path);
CREATE TABLE scores (
  cell_key TEXT NOT NULL,
  prompt_id TEXT NOT NULL,
  seed INTEGER NOT NULL,
  metric TEXT NOT NULL,
  metric_version INTEGER NOT NULL,
  value REAL,
  unavailable_reason TEXT,
  direction TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
  config TEXT NOT NULL DEFAULT '',    -- what else fixes the value (e.g. model=<CLIP model>)
  reference_cell_key TEXT,            -- the anchor compared against, for reference metrics
  detail TEXT,                        -- e.g. 'identical' for PSNR of identical images
  scored_at TEXT NOT NULL,
  PRIMARY KEY (cell_key, prompt_id, seed, metric, metric_version),
  CHECK ((value IS NULL) <> (unavailable_reason IS NULL))
);
CREATE INDEX scores_metric ON scores (metric, cell_key);
CREATE TABLE cell_scores (
  cell_key TEXT NOT NULL,
  split TEXT NOT NULL,
  metric TEXT NOT NULL,
  metric_version INTEGER NOT NULL,
  direction TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
  value REAL,                         -- sample metrics: mean over available samples; speed: the statistic
  unavailable_reason TEXT,            -- when no sample has a value: the most common reason
  n INTEGER NOT NULL,                 -- samples with a value
  n_unavailable INTEGER NOT NULL,
  detail TEXT,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (cell_key, split, metric, metric_version),
  CHECK ((value IS NULL) <> (unavailable_reason IS NULL))
);
CREATE INDEX cell_scores_metric ON cell_scores (metric, split);
"""


def _cell_summary_sql() -> str:
    metric_columns = "\n".join(f"  {m} REAL," for m in PIVOT_METRICS)
    return f"""
CREATE TABLE cell_summary (           -- maintained with cell_scores, in the same transactions
  cell_key TEXT NOT NULL,
  split TEXT NOT NULL,
  anchor_cell_key TEXT NOT NULL,
  is_anchor INTEGER NOT NULL,
  status TEXT NOT NULL,               -- done if any run is done, else incomplete if any is, else failed
  n_runs INTEGER NOT NULL,
  n_samples INTEGER NOT NULL,
  n_flagged INTEGER NOT NULL,         -- samples with a problem
  n_expected INTEGER NOT NULL,
  latest_run TEXT NOT NULL,           -- runs.path of the latest started run
{metric_columns}
  updated_at TEXT NOT NULL,
  PRIMARY KEY (cell_key, split)
)"""


def cells_view_sql(metrics: Iterable[str] = PIVOT_METRICS) -> str:
    return f"\nCREATE VIEW cells AS\n{cells_select_sql(metrics)}"


def cells_select_sql(metrics: Iterable[str] = PIVOT_METRICS) -> str:
    return f"""SELECT s.cell_key, s.split, r.describe, s.anchor_cell_key, s.is_anchor, s.status, s.n_runs, s.n_samples,
  s.n_flagged, s.n_expected, r.model, r.attention, r.cache, r.scheduler, r.steps, r.guidance, r.height, r.width, r.device_kind,
  r.overrides, r.sweep, s.latest_run,
  {", ".join("s." + m for m in metrics)}
FROM cell_summary s JOIN runs r ON r.path = s.latest_run
"""


def leaderboard_view_sql(metrics: Iterable[str] = PIVOT_METRICS) -> str:
    return f"\nCREATE VIEW leaderboard AS\n{leaderboard_select_sql(metrics)}"


def leaderboard_select_sql(metrics: Iterable[str] = PIVOT_METRICS) -> str:
    """Cells vs their anchor: sample metrics (and, for those without a reference, the difference to the
    anchor), speed-up, and the speed columns of the registry's leaderboard."""
    sample = [m for m in metrics if SPECS[m].level == "sample"]
    deltas = [m for m in delta_metric_names() if m in sample]
    speed = [m for m in metrics if SPECS[m].level == "cell" and SPECS[m].leaderboard and m != "latency_median_s"]
    columns = [f"c.{m}" for m in sample] + [f"c.{m} - a.{m} AS {m}_delta" for m in deltas]
    columns += ["c.latency_median_s", "a.latency_median_s / c.latency_median_s AS speedup"]
    columns += [f"c.{m}" for m in speed]
    return f"""SELECT c.cell_key, c.split, c.describe, c.is_anchor, c.status, c.overrides, c.n_samples, c.n_expected,
  {", ".join(columns)},
  c.anchor_cell_key, a.latency_median_s AS anchor_latency_median_s
FROM cells c
LEFT JOIN cell_summary a ON a.cell_key = c.anchor_cell_key AND a.split = c.split
"""


FAILURES_VIEW = """
CREATE VIEW failures AS
SELECT cell_key, split, category, message, failed_record, path, overrides, started_at, finished_at
FROM runs WHERE status = 'failed'
"""

# The hill climb (assess climb): which experiment each run belongs to (read from its run.json), the
# generations and the final. Generations and the final are files under <out_root>/experiments/<name>/
# (the source of truth); these tables mirror them, so the index stays rebuildable.
SCHEMA_0002_CLIMB = """
CREATE TABLE run_experiments (
  path TEXT PRIMARY KEY,              -- runs.path
  experiment TEXT,                    -- run.json config.experiment.name, NULL when the run is not part of one
  final INTEGER NOT NULL,             -- config.experiment.final: rendered by `assess climb --final`
  read_at TEXT NOT NULL
);
CREATE INDEX run_experiments_name ON run_experiments (experiment);
CREATE TABLE generations (
  experiment TEXT NOT NULL,
  number INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  state TEXT NOT NULL,                -- fingerprint of the cells' tables the decision was made from
  incumbent TEXT NOT NULL,            -- JSON {axis: value}
  incumbent_status TEXT NOT NULL,     -- confirmed | parity | provisional | start
  stop TEXT,                          -- why the climb stopped, or NULL
  note TEXT NOT NULL,                 -- the one-line design note
  commands TEXT NOT NULL,             -- JSON list: the render commands it proposed
  record TEXT NOT NULL,               -- path of the generation's JSON file (the whole decision)
  PRIMARY KEY (experiment, number)
);
CREATE TABLE generation_cells (
  experiment TEXT NOT NULL,
  number INTEGER NOT NULL,
  cell TEXT NOT NULL,                 -- JSON {axis: value}
  rung INTEGER NOT NULL,              -- prompts.limit
  kind TEXT NOT NULL,                 -- start | incumbent | promotion | neighbour
  reason TEXT NOT NULL,
  est_s REAL,                         -- estimated device seconds, NULL without history
  PRIMARY KEY (experiment, number, cell, rung)
);
CREATE TABLE finals (
  experiment TEXT PRIMARY KEY,
  claimed_at TEXT NOT NULL,
  incumbent TEXT NOT NULL,            -- JSON {axis: value}
  record TEXT NOT NULL                -- where the claim is kept (the ledger)
)
"""

# A sample is known by its text identity (render.rundir.identity.sample_text_id), not its prompt id: a manifest that keeps
# an id for another text makes another sample. `hg_text_id` (registered on every connection) fills the column.
SCHEMA_0003_TEXT_IDENTITY = """
DROP VIEW IF EXISTS leaderboard;
DROP VIEW IF EXISTS cells;
CREATE TABLE samples_v3 (
  cell_key TEXT NOT NULL,
  prompt_sha TEXT NOT NULL,           -- the prompt's text identity: with cell_key and seed, the sample
  prompt_id TEXT NOT NULL,            -- the manifest's label for it
  seed INTEGER NOT NULL,
  split TEXT NOT NULL,
  run_path TEXT NOT NULL,
  image TEXT NOT NULL,
  prompt TEXT,
  width INTEGER, height INTEGER,
  latency_s REAL, warmup INTEGER NOT NULL, steps INTEGER, s_per_step REAL,
  peak_mem_bytes INTEGER, mem_kind TEXT, load_s REAL,
  reused_from TEXT, finished_at TEXT,
  problem TEXT,
  PRIMARY KEY (cell_key, prompt_sha, seed)
);
INSERT OR REPLACE INTO samples_v3 SELECT cell_key, hg_text_id(prompt, prompt_id), prompt_id, seed, split, run_path, image,
  prompt, width, height, latency_s, warmup, steps, s_per_step, peak_mem_bytes, mem_kind, load_s, reused_from,
  finished_at, problem FROM samples;
CREATE TABLE scores_v3 (
  cell_key TEXT NOT NULL,
  prompt_sha TEXT NOT NULL,
  prompt_id TEXT NOT NULL,
  seed INTEGER NOT NULL,
  metric TEXT NOT NULL,
  metric_version INTEGER NOT NULL,
  value REAL,
  unavailable_reason TEXT,
  direction TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
  config TEXT NOT NULL DEFAULT '',    -- what else fixes the value: the metric model's name and content digest
  reference_cell_key TEXT,
  detail TEXT,
  scored_at TEXT NOT NULL,
  PRIMARY KEY (cell_key, prompt_sha, seed, metric, metric_version),
  CHECK ((value IS NULL) <> (unavailable_reason IS NULL))
);
INSERT OR REPLACE INTO scores_v3 SELECT s.cell_key, hg_text_id(p.prompt, s.prompt_id), s.prompt_id, s.seed, s.metric,
  s.metric_version, s.value, s.unavailable_reason, s.direction, s.config, s.reference_cell_key, s.detail, s.scored_at
  FROM scores s LEFT JOIN samples p USING (cell_key, prompt_id, seed);
DROP TABLE scores;
DROP TABLE samples;
ALTER TABLE samples_v3 RENAME TO samples;
ALTER TABLE scores_v3 RENAME TO scores;
-- runs.prompt_shas: JSON list, the text identity of each of prompt_ids (filled by _fill_prompt_shas)
ALTER TABLE runs ADD COLUMN prompt_shas TEXT;
CREATE INDEX samples_run ON samples (run_path);
CREATE INDEX scores_metric ON scores (metric, cell_key);
"""

# A prompt's labels in its suite (samples.jsonl category, challenge): the per-category answers group by them.
# Set metrics (CMMD): one score per (cell, split) of its images against the anchor's; refresh_cell copies them
# into cell_scores (n = the pairs), where the cells view shows them.
SCHEMA_0004_QUALITY = """
ALTER TABLE samples ADD COLUMN category TEXT;
ALTER TABLE samples ADD COLUMN challenge TEXT;
CREATE TABLE set_scores (
  cell_key TEXT NOT NULL,
  split TEXT NOT NULL,
  metric TEXT NOT NULL,
  metric_version INTEGER NOT NULL,
  value REAL,
  unavailable_reason TEXT,
  direction TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
  n INTEGER NOT NULL,                 -- samples paired with the anchor's (same prompt text and seed)
  config TEXT NOT NULL DEFAULT '',    -- the metric's model by its identity
  reference_cell_key TEXT NOT NULL,   -- the anchor compared against
  pairs TEXT NOT NULL,                -- digest of the paired samples: a changed set is scored again
  detail TEXT,
  scored_at TEXT NOT NULL,
  PRIMARY KEY (cell_key, split, metric, metric_version),
  CHECK ((value IS NULL) <> (unavailable_reason IS NULL))
)
"""

# Speed under noise (render/run/measure.py, docs/timing.md): each sample's reference workload time and repeated calls,
# each run's reference drift, and the interval of a cell's speed figures.
SCHEMA_0005_TIMING = [
    "ALTER TABLE samples ADD COLUMN ref_s REAL",  # the job's reference workload at the start of the sample's cell
    "ALTER TABLE samples ADD COLUMN latency_calls TEXT",  # JSON list: every call when timing.repeats > 1
    "ALTER TABLE samples ADD COLUMN device_s REAL",  # device seconds the sample took (every call)
    "ALTER TABLE runs ADD COLUMN ref_drift REAL",  # DONE.json timing.drift: the reference's change over the run
    "ALTER TABLE runs ADD COLUMN repeats INTEGER",  # timing.repeats
    "ALTER TABLE cell_scores ADD COLUMN low REAL",  # the 95 % interval of a speed figure
    "ALTER TABLE cell_scores ADD COLUMN high REAL",
]
# What each sample's cache computed and reused, and its compile (samples.jsonl); two views over them
# (assess/report/speed_notes.py words them): cache_engagement per cell, compile_break_even per compiled cell
# against its eager twin (the same run.json cell with compile none). A compile whose graphs all came from
# inductor's artefact cache (hits, no misses) is warm; any other is cold.
SCHEMA_0006_ENGAGEMENT = """
ALTER TABLE samples ADD COLUMN steps_computed INTEGER;
ALTER TABLE samples ADD COLUMN steps_reused INTEGER;
ALTER TABLE samples ADD COLUMN blocks_computed INTEGER;
ALTER TABLE samples ADD COLUMN blocks_reused INTEGER;
ALTER TABLE samples ADD COLUMN compile_s REAL;
ALTER TABLE samples ADD COLUMN compiled_frames INTEGER;
ALTER TABLE samples ADD COLUMN compile_cache_hits INTEGER;
ALTER TABLE samples ADD COLUMN compile_cache_misses INTEGER;
CREATE VIEW cache_engagement AS
SELECT cell_key, split, COUNT(*) AS n_counted, SUM(steps_computed) AS steps_computed, SUM(steps_reused) AS steps_reused,
  SUM(blocks_computed) AS blocks_computed, SUM(blocks_reused) AS blocks_reused,
  SUM(steps_reused) = 0 AND SUM(blocks_reused) = 0 AS never_engaged
FROM samples WHERE steps_computed IS NOT NULL AND reused_from IS NULL GROUP BY cell_key, split;
CREATE VIEW compile_break_even AS
WITH compiled AS (
  SELECT cell_key, split,
    MAX(CASE WHEN IFNULL(compile_cache_hits, 0) = 0 OR compile_cache_misses > 0 THEN compile_s END) AS compile_cold_s,
    MAX(CASE WHEN compile_cache_hits > 0 AND IFNULL(compile_cache_misses, 0) = 0 THEN compile_s END) AS compile_warm_s
  FROM samples WHERE compile_s > 0 AND reused_from IS NULL GROUP BY cell_key, split),
shapes AS (SELECT DISTINCT cell_key, split, json_remove(cell, '$.compile') AS rest,
  json_extract(cell, '$.compile.name') AS compile FROM runs),
pairs AS (
  SELECT c.*, (SELECT e.cell_key FROM shapes k JOIN shapes e ON e.rest = k.rest AND e.split = k.split AND e.compile = 'none'
               WHERE k.cell_key = c.cell_key AND k.split = c.split LIMIT 1) AS eager_cell_key
  FROM compiled c)
SELECT p.cell_key, p.split, p.compile_cold_s, p.compile_warm_s, m.latency_median_s AS compiled_latency_s,
  p.eager_cell_key, e.latency_median_s AS eager_latency_s,
  CASE WHEN e.latency_median_s > m.latency_median_s THEN p.compile_cold_s / (e.latency_median_s - m.latency_median_s) END
    AS break_even_cold_images,
  CASE WHEN e.latency_median_s > m.latency_median_s THEN p.compile_warm_s / (e.latency_median_s - m.latency_median_s) END
    AS break_even_warm_images
FROM pairs p
LEFT JOIN cell_summary m ON m.cell_key = p.cell_key AND m.split = p.split
LEFT JOIN cell_summary e ON e.cell_key = p.eager_cell_key AND e.split = p.split
"""

# Side-by-side timing (render.rundir.session_log, `assess retime`): one row per session, one per contender of it with
# its per-round latencies; the rounds' samples and orders in the session row. Speed-ups are computed from these
# (assess.statistics.side_by_side), never stored: a session's rows are its run directories' record, as read. samples.sha256, the
# image's content hash, tells cells that did the same work (assess.statistics.side_by_side.same_work).
SCHEMA_0007_SIDE_BY_SIDE = """
CREATE TABLE timing_sessions (
  session TEXT PRIMARY KEY,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  device TEXT NOT NULL,               -- the one torch device every contender ran on
  device_name TEXT,
  host TEXT,
  pid INTEGER,                        -- the one process that timed every contender
  rounds INTEGER NOT NULL,
  samples TEXT NOT NULL,              -- JSON list of [text identity, seed], one per round
  orders TEXT NOT NULL,               -- JSON list, per round the contenders' indices in timed order
  device_s REAL NOT NULL,             -- every second of device work the session did
  complete INTEGER NOT NULL,
  purpose TEXT NOT NULL,              -- retime | climb | final
  experiment TEXT
);
CREATE TABLE timing_cells (
  session TEXT NOT NULL,
  cell_key TEXT NOT NULL,
  position INTEGER NOT NULL,          -- the contender's index in the session
  run_path TEXT NOT NULL,             -- the run directory whose samples were timed
  latencies TEXT NOT NULL,            -- JSON list of seconds, one per round
  warmup_calls INTEGER NOT NULL,
  load_s REAL,
  matched INTEGER NOT NULL,           -- timed outputs byte-identical to the recorded image
  differed INTEGER NOT NULL,
  unchecked INTEGER NOT NULL,
  PRIMARY KEY (session, cell_key)
);
CREATE INDEX timing_cells_cell ON timing_cells (cell_key);
ALTER TABLE samples ADD COLUMN sha256 TEXT
"""

# A sample's text identity became the exact text the model receives (issue 28: the tokenizers keep case and
# punctuation): every row's prompt_sha is recomputed from its text (scores through their sample), runs' lists refilled.
SCHEMA_0008_EXACT_TEXT = """
UPDATE scores SET prompt_sha = COALESCE((SELECT hg_text_id(p.prompt, p.prompt_id) FROM samples p
  WHERE p.cell_key = scores.cell_key AND p.prompt_sha = scores.prompt_sha AND p.seed = scores.seed), prompt_sha);
UPDATE samples SET prompt_sha = hg_text_id(prompt, prompt_id) WHERE prompt IS NOT NULL
"""

# A clip sample (render.run.apng): its frame count, rate and seconds per frame (samples.jsonl); NULL for an image.
SCHEMA_0009_CLIPS = """
ALTER TABLE samples ADD COLUMN frames INTEGER;
ALTER TABLE samples ADD COLUMN fps INTEGER;
ALTER TABLE samples ADD COLUMN s_per_frame REAL
"""

# A batched cell's sample (render.cell: batch > 1): the samples in its pipeline call (latency_s is the call's) and
# its share of the device time, latency_s / batch; NULL for one sample a call.
SCHEMA_0013_BATCH = """
ALTER TABLE samples ADD COLUMN batch INTEGER;
ALTER TABLE samples ADD COLUMN share_s REAL
"""

# Where a sample's time went (render.run.stage_clock): its seconds of text encoding, denoising loop and VAE decode;
# NULL for a sample recorded before they were (the report shows "—").
SCHEMA_0014_STAGES = """
ALTER TABLE samples ADD COLUMN text_s REAL;
ALTER TABLE samples ADD COLUMN denoise_s REAL;
ALTER TABLE samples ADD COLUMN vae_s REAL
"""

# A parallel cell's samples against its width-1 twin's (assess.statistics.parity): largest pixel difference in 8-bit levels and
# SSIM, or why they could not be compared (the twin's sample missing).
SCHEMA_0010_PARITY = """
CREATE TABLE parity (
    cell_key TEXT NOT NULL,
    prompt_sha TEXT NOT NULL,
    seed INTEGER NOT NULL,
    twin_cell_key TEXT NOT NULL,
    max_levels INTEGER,
    ssim REAL,
    unavailable_reason TEXT,
    computed_at TEXT NOT NULL,
    PRIMARY KEY (cell_key, prompt_sha, seed)
)
"""

# History: these scripts stay SQL as they were applied. A new migration is a function of the sqlite-utils Database
# (table.transform, add_column, create_view), as POST_MIGRATION's steps are.
MIGRATIONS: list[tuple[str, list[str]]] = [
    ("0001_initial", [SCHEMA_0001, _cell_summary_sql(), cells_view_sql(), leaderboard_view_sql(), FAILURES_VIEW]),
    ("0002_climb", [SCHEMA_0002_CLIMB]),
    ("0003_text_identity", [SCHEMA_0003_TEXT_IDENTITY, cells_view_sql(), leaderboard_view_sql()]),
    ("0004_quality", [SCHEMA_0004_QUALITY]),
    ("0005_timing", SCHEMA_0005_TIMING),
    ("0006_engagement", [SCHEMA_0006_ENGAGEMENT]),
    ("0007_side_by_side", [SCHEMA_0007_SIDE_BY_SIDE]),
    ("0008_exact_text", [SCHEMA_0008_EXACT_TEXT]),
    ("0009_clips", [SCHEMA_0009_CLIPS]),
    ("0010_parity", [SCHEMA_0010_PARITY]),
    ("0011_run_identity", []),  # _run_identity
    # a final's holdout by content (JSON list of its texts' render.rundir.holdout_identity): a final of any name on
    # one of those texts is found in the index (assess.climb.run_final.holdout_evidence)
    ("0012_final_content", ["ALTER TABLE finals ADD COLUMN holdout TEXT"]),
    ("0013_batch", [SCHEMA_0013_BATCH]),
    ("0014_stages", [SCHEMA_0014_STAGES]),
]
SCHEMA_VERSION = len(MIGRATIONS)


def cell_status(run_statuses: Iterable[str]) -> str:
    """A cell's status over its runs (each done, incomplete or failed): done when any run finished it."""
    statuses = set(run_statuses)
    return "done" if "done" in statuses else "incomplete" if "incomplete" in statuses else "failed"


def _fill_prompt_shas(db: sqlite_utils.Database) -> None:
    """0003: each run's prompts by text identity, read from its folder (its indexed samples when it is gone)."""
    from render.rundir import RunDirError, load_run

    conn = db.conn
    for (path,) in conn.execute("SELECT path FROM runs").fetchall():
        try:
            shas = load_run(Path(path)).prompt_text_ids
        except (RunDirError, OSError):
            by_id = dict(conn.execute("SELECT prompt_id, prompt_sha FROM samples WHERE run_path = ?", (path,)).fetchall())
            ids = json.loads(conn.execute("SELECT prompt_ids FROM runs WHERE path = ?", (path,)).fetchone()[0])
            shas = [by_id.get(p, f"id:{p}") for p in ids]
        db.table("runs").update(path, {"prompt_shas": json.dumps(shas)})


RUN_FILE_COLUMNS = ("path", "stamp", "plan", "complete", "n_samples", "n_scores", "anchor_dir", "scored_at")


def _run_identity(db: sqlite_utils.Database) -> None:
    """0011: `run_files`, what the last `assess score` of each run folder saw and left (assess.scoring.ingest.skippable):
    the folder's content stamp (render.rundir.walk.content_stamp), the digest of the metrics it scored (plan),
    whether every score it left has a value (complete: nothing to retry), and its counts for the summary line.
    `status` and `report` filter runs by sweep and cell, samples by run: the indexes that answer them."""
    db.create_table("run_files", {"path": str, "stamp": str, "plan": str, "complete": int, "n_samples": int,
                                  "n_scores": int, "anchor_dir": str, "scored_at": str}, pk="path",
                    not_null={"stamp", "plan", "complete", "n_samples", "n_scores", "scored_at"})


POST_MIGRATION = {"0003_text_identity": _fill_prompt_shas, "0008_exact_text": _fill_prompt_shas,
                  "0011_run_identity": _run_identity}


def default_index_path() -> Path:
    """$HYPERGRID_INDEX, else outputs/index.db."""
    return Path(os.environ.get(INDEX_ENV) or DEFAULT_INDEX)


def remove_if_empty(path: Path) -> bool:
    """Remove the index at `path` (with its -wal and -shm) when it holds no run and no timing session: a command
    that created it and could index nothing leaves no index behind. Whether it was removed."""
    try:
        with Index.open(path, create=False) as index:
            held = index.query("SELECT (SELECT count(*) FROM runs) + (SELECT count(*) FROM timing_sessions) AS n")[0]["n"]
    except (sqlite3.Error, OSError, NotScored):
        return False
    if held:
        return False  # another scorer filled it meanwhile
    for name in (f"{path}-wal", f"{path}-shm", str(path)):
        Path(name).unlink(missing_ok=True)
    return True


REBUILD_HINT = "rebuild it from the run directories with `assess score --rebuild <out_root>`"


def damaged(path: Path, exc: BaseException) -> IndexDamaged:
    """The one-line message for an index file sqlite cannot read (truncated, overwritten, another kind of file)."""
    return IndexDamaged(f"{path} is not a readable assess index ({exc}): {REBUILD_HINT}, or pass another --db")


def is_damage(exc: BaseException) -> bool:
    """sqlite's own word for a file it cannot read as a database ("file is not a database", "database disk image
    is malformed"): a plain DatabaseError, not one of its subclasses (locked, constraint, ...)."""
    return type(exc) is sqlite3.DatabaseError


def _split_statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";\n") if s.strip()]


@dataclass(frozen=True)
class ScoreRow:
    cell_key: str
    prompt_sha: str
    prompt_id: str
    seed: int
    spec: MetricSpec
    outcome: Outcome
    config: str = ""
    reference_cell_key: str | None = None


class Index:
    """A handle on the index database. Use `Index.open()`; close it (or use `with`)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self._tables: dict[str, IndexTable] = {}
        self._schema = -1  # PRAGMA schema_version the cached tables were read at

    @cached_property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils over the connection, for writes and migrations: made when first written through, since
        importing sqlite-utils imports pandas (0.3 s) and a report or a status only reads."""
        import sqlite_utils

        return sqlite_utils.Database(self.conn)

    def table(self, name: str) -> sqlite_utils.db.Table:
        """The sqlite-utils table every write of this transaction goes through (assess/index/writer.py)."""
        from assess.index.writer import IndexTable

        if name not in self._tables:
            self._tables[name] = IndexTable(self.db, name)
        return self._tables[name]

    @classmethod
    def open(cls, path: Path | str | None = None, create: bool = True) -> Index:
        """Open (and create or migrate) the index; create=False raises NotScored if it is missing, and opens an
        index this user cannot write read-only (for status and reports). A file that is no sqlite database,
        or a damaged one, raises IndexDamaged naming the command that rebuilds it."""
        path = Path(path) if path is not None else default_index_path()
        if not path.exists():
            if not create:
                raise NotScored(f"no index at {path}: run `assess score <sweep>` first (or pass --db)")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                create_empty(path)
            except OSError as exc:
                raise IndexUnwritable(f"{path}: the index cannot be created there ({exc.strerror or exc}); pass --db a "
                                      "path in a folder you can write (or set $HYPERGRID_INDEX)") from exc
        readonly = not create and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK))
        try:
            return cls._connect(path, readonly)
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise damaged(path, exc) from exc
            raise

    @classmethod
    def _connect(cls, path: Path, readonly: bool) -> Index:
        if readonly:  # immutable: no -wal/-shm files are needed (or made) in a folder this user cannot write
            uri = f"file:{quote(str(path.absolute()))}?mode=ro&immutable=1"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.create_function("hg_text_id", 2, sample_text_id, deterministic=True)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        index = cls(conn, path)
        if readonly:
            if index._check_version() != SCHEMA_VERSION or set(PIVOT_METRICS) - index._summary_columns():
                raise IndexSchemaError(f"{path} was written by an older assess and is read-only here: run `assess "
                                       "score` once where it can be written, to migrate it")
            return index
        index._retry_locked(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
        conn.execute("PRAGMA synchronous = NORMAL")
        # sqlite-utils writes multi-row INSERTs; into a table with a secondary index, sqlite opens a temporary file
        # for one (strace: an etilqs_* file every other statement) unless temp storage is in memory, which halves
        # their time: 13 rows of cell_scores, 176 -> 89 us (issue 31 item 5, benchmarks/index.py)
        conn.execute("PRAGMA temp_store = MEMORY")
        index.migrate()
        return index

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _retry_locked(fn: Any, deadline_s: float = BUSY_TIMEOUT_S) -> Any:
        """Retry what the busy handler does not cover (journal-mode switch on a fresh file)."""
        start = time.monotonic()
        delay = 0.01
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() - start > deadline_s:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A short write transaction, taken with BEGIN IMMEDIATE."""
        self._retry_locked(lambda: self.conn.execute("BEGIN IMMEDIATE"))
        schema = self.conn.execute("PRAGMA schema_version").fetchone()[0]  # sqlite bumps it on every schema change
        if schema != self._schema:  # another process (or this one) changed the schema since: look tables up afresh
            self._tables.clear()
            self._schema = schema
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    # -- schema -----------------------------------------------------------------------------

    def schema_version(self) -> int:
        exists = self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        if not exists:
            if self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise IndexSchemaError(f"{self.path} is not an assess index (it has tables but no 'meta' table): "
                                       f"pass the index's path with --db, or {REBUILD_HINT}")
            return 0
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def migrate(self) -> None:
        if self._check_version() == SCHEMA_VERSION:
            self.sync_metric_columns()
            return
        with self.write() as conn:
            current = self._check_version()  # again, under the write lock: another process may have migrated
            for name, statements in MIGRATIONS[current:]:
                for script in statements:
                    for statement in _split_statements(script):
                        conn.execute(statement)
                if name in POST_MIGRATION:
                    POST_MIGRATION[name](self.db)
                self.table("migrations").insert({"name": name, "applied_at": now_iso()}, alter=False)
            self.table("meta").upsert({"key": "schema_version", "value": str(SCHEMA_VERSION)}, pk="key", alter=False)
            self._write_metric_catalogue()
        self.sync_metric_columns()

    def _check_version(self) -> int:
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise IndexSchemaError(
                f"{self.path} has schema version {version}, this assess knows up to {SCHEMA_VERSION}: upgrade hypergrid"
            )
        return version

    def _write_metric_catalogue(self) -> None:
        self._insert("metrics", METRIC_COLUMNS, [
            (m.name, m.version, m.family, m.level, m.direction, int(m.needs_reference), m.unit, m.description)
            for m in SPECS.values()], pk="name")

    def sync_metric_catalogue(self) -> None:
        """Keep the `metrics` table equal to the registry (cheap; done by every `assess score`)."""
        rows = {r["name"]: r["version"] for r in self.conn.execute("SELECT name, version FROM metrics")}
        if rows != {s.name: s.version for s in SPECS.values()}:
            with self.write():
                self._write_metric_catalogue()

    def _summary_columns(self) -> set[str]:
        return {r["name"] for r in self.conn.execute("PRAGMA table_info(cell_summary)")}

    def sync_metric_columns(self) -> None:
        """Give cell_summary a column for every registered metric (filled from cell_scores) and rebuild the
        `cells` and `leaderboard` views over them: an index made before a metric existed shows it too."""
        if not set(PIVOT_METRICS) - self._summary_columns():
            return
        with self.write() as conn:
            missing = [m for m in PIVOT_METRICS if m not in self._summary_columns()]  # again, under the lock
            if not missing:
                return
            summary = self.table("cell_summary")
            for metric in missing:
                summary.add_column(metric, "REAL")
                self._tables.pop("cell_summary", None)  # its columns changed
                # a set-based fill from another table: sqlite-utils' update() is one row by primary key
                conn.execute(
                    f"UPDATE cell_summary SET {metric} = (SELECT c.value FROM cell_scores c WHERE c.cell_key = "
                    "cell_summary.cell_key AND c.split = cell_summary.split AND c.metric = ? "
                    "ORDER BY c.metric_version DESC LIMIT 1)", (metric,))
            self.db.create_view("cells", cells_select_sql(), replace=True)
            self.db.create_view("leaderboard", leaderboard_select_sql(), replace=True)

    # -- writes -----------------------------------------------------------------------------

    def _insert(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
                pk: str | tuple[str, ...] | None = None, replace: bool = False) -> None:
        """Write rows through sqlite-utils in list mode (column names once, then value lists: no dict per row),
        as an upsert on pk, or an insert (or replace); alter=False: the schema is the migrations', never the rows'.
        Runs inside the caller's BEGIN IMMEDIATE transaction (sqlite-utils nests a savepoint in it); its values
        are redacted on their way in, as every write's (assess.index.writer.redacted)."""
        records = chain([list(columns)], rows)
        if pk is not None:
            self.table(table).upsert_all(records, pk=pk, alter=False, batch_size=WRITE_BATCH)
        else:
            self.table(table).insert_all(records, replace=replace, alter=False, batch_size=WRITE_BATCH)

    def _stored(self, conn: sqlite3.Connection, sql: str, cell_keys: Iterable[str]) -> list[sqlite3.Row]:
        """Rows of `sql` (one `cell_key = ?` parameter) for each cell: what a conditional upsert decides from,
        read in the same write transaction as the write."""
        return [row for key in sorted(set(cell_keys)) for row in conn.execute(sql, (key,))]

    def run_files(self, paths: Sequence[str]) -> dict[str, dict[str, Any]]:
        """path -> its `run_files` row and its `runs` row's cell (cell_key, split, anchor_cell_key, is_anchor,
        problems), for the paths that have both: by primary key, 500 paths a query."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(paths), 500):
            chunk = list(paths[start : start + 500])
            found.update((r["path"], r) for r in self.query(
                "SELECT f.*, r.cell_key, r.split, r.anchor_cell_key, r.is_anchor, r.problems FROM run_files f "
                f"JOIN runs r ON r.path = f.path WHERE f.path IN ({','.join('?' * len(chunk))})", chunk))
        return found

    def compared_with(self, anchor_samples: dict[str, set[tuple[str, int]]]) -> dict[Path, set[tuple[str, int]]]:
        """The run folders holding a cell's sample scored against one of these anchor samples (anchor cell key -> its
        (text identity, seed)), each with those samples: whose reference scores read that anchor image."""
        found: dict[Path, set[tuple[str, int]]] = {}
        for anchor, keys in anchor_samples.items():
            for row in self.conn.execute(
                    "SELECT DISTINCT s.run_path, s.prompt_sha, s.seed FROM scores c JOIN samples s "
                    "USING (cell_key, prompt_sha, seed) WHERE c.reference_cell_key = ?", (anchor,)):
                if (row["prompt_sha"], row["seed"]) in keys:
                    found.setdefault(Path(row["run_path"]), set()).add((row["prompt_sha"], row["seed"]))
        return found

    def cells_of_runs(self, paths: Sequence[str]) -> set[tuple[str, str, str]]:
        """(cell key, split, anchor cell key) of the cells' runs among `paths` (anchors left out)."""
        found: set[tuple[str, str, str]] = set()
        for start in range(0, len(paths), 500):
            chunk = list(paths[start : start + 500])
            found.update((r["cell_key"], r["split"], r["anchor_cell_key"]) for r in self.query(
                "SELECT cell_key, split, anchor_cell_key FROM runs WHERE is_anchor = 0 AND "
                f"path IN ({','.join('?' * len(chunk))})", chunk))
        return found

    def sets_against(self, anchors: set[str]) -> set[tuple[str, str, str]]:
        """(cell key, split, anchor cell key) of every set score against one of these anchor cells."""
        return {(r["cell_key"], r["split"], r["reference_cell_key"]) for anchor in sorted(anchors) for r in self.query(
            "SELECT DISTINCT cell_key, split, reference_cell_key FROM set_scores WHERE reference_cell_key = ?", (anchor,))}

    def unchanged_runs(self, paths: Sequence[str]) -> set[str]:
        """The run folders among `paths` whose content is as their last scoring indexed it (the same content stamp:
        render.rundir.walk.content_stamp): their `runs` rows are current, and nothing needs to read them again."""
        from render.rundir.walk import content_stamp

        return {path for path, row in self.run_files(paths).items() if row["stamp"] == content_stamp(Path(path))}

    def record_run_file(self, conn: sqlite3.Connection, row: dict[str, Any]) -> None:
        """What this scoring of a run folder saw and left (columns: RUN_FILE_COLUMNS; scored_at: when the scoring took
        the folder's stamp, so a file written after it is known to be newer than what was scored)."""
        self._insert("run_files", RUN_FILE_COLUMNS, [[row.get(c) or now_iso() if c == "scored_at" else row[c]
                                                      for c in RUN_FILE_COLUMNS]], replace=True)

    def upsert_run(self, conn: sqlite3.Connection, row: dict[str, Any]) -> None:
        self._insert("runs", list(row), [list(row.values())], pk="path")

    def upsert_samples(self, conn: sqlite3.Connection, rows: list[dict[str, Any]]) -> None:
        """Insert samples; a sample rendered by a run is never replaced by another run's reuse of it, and a sample
        written again by the run that holds it keeps its problem unless the new row has one."""
        if not rows:
            return
        stored = {(r["cell_key"], r["prompt_sha"], r["seed"]): (r["run_path"], r["reused_from"], r["problem"])
                  for r in self._stored(conn, "SELECT cell_key, prompt_sha, seed, run_path, reused_from, problem "
                                              "FROM samples WHERE cell_key = ?", (r["cell_key"] for r in rows))}
        columns = [*rows[0]] if "problem" in rows[0] else [*rows[0], "problem"]
        at_problem = columns.index("problem")
        chosen: dict[tuple[str, str, int], list[Any]] = {}
        for row in rows:
            key = (row["cell_key"], row["prompt_sha"], row["seed"])
            problem = row.get("problem")
            if key in stored:
                run_path, reused_from, old_problem = stored[key]
                same_run = run_path == row["run_path"]
                if row["reused_from"] is not None and reused_from is None and not same_run:
                    continue  # a reuse never replaces the rendering run's sample
                if same_run and problem is None:
                    problem = old_problem
            stored[key] = (row["run_path"], row["reused_from"], problem)
            chosen[key] = values = list(map(row.get, columns))
            values[at_problem] = problem
        self._insert("samples", columns, chosen.values(), pk=("cell_key", "prompt_sha", "seed"))

    def upsert_timing(self, session: Any) -> None:
        """A side-by-side timing session (render.rundir.session_log.TimingSession): its row and its contenders' rows."""
        with self.write():
            self.table("timing_sessions").upsert({
                "session": session.session, "started_at": session.started_at, "finished_at": session.finished_at,
                "device": session.device, "device_name": session.device_name, "host": session.host, "pid": session.pid,
                "rounds": session.rounds, "samples": json_dumps(session.samples), "orders": json_dumps(session.orders),
                "device_s": session.device_s, "complete": int(session.complete), "purpose": session.purpose,
                "experiment": session.experiment}, pk="session", alter=False)
            self.table("timing_cells").upsert_all([{
                "session": session.session, "cell_key": c.cell_key, "position": i, "run_path": c.run_dir,
                "latencies": json_dumps(c.latencies), "warmup_calls": c.warmup_calls, "load_s": c.load_s,
                "matched": c.matched, "differed": c.differed, "unchecked": c.unchecked}
                for i, c in enumerate(session.contenders)], pk=("session", "cell_key"), alter=False)

    def write_parity(self, conn: sqlite3.Connection, rows: list[dict[str, Any]]) -> None:
        """Upsert a parallel cell's `parity` rows (assess.statistics.parity.parity_rows)."""
        stamp = now_iso()
        self._insert("parity", PARITY_COLUMNS, ([*(r[c] for c in PARITY_COLUMNS[:-1]), stamp] for r in rows),
                     replace=True)

    def parity(self, cell_key: str) -> list[sqlite3.Row]:
        """A parallel cell's `parity` rows (none for a width-1 cell, or one not scored since it was rendered)."""
        return self.conn.execute("SELECT * FROM parity WHERE cell_key = ?", (cell_key,)).fetchall()

    def flag_samples(self, conn: sqlite3.Connection, flags: dict[tuple[str, str, int], str | None]) -> None:
        """(cell key, text identity, seed) -> the sample's problem, or None (a sample not indexed is skipped)."""
        samples = self.table("samples")
        stored = {(r["cell_key"], r["prompt_sha"], r["seed"]): r["problem"] for r in self._stored(
            conn, "SELECT cell_key, prompt_sha, seed, problem FROM samples WHERE cell_key = ?", (k[0] for k in flags))}
        for key, problem in flags.items():
            wanted = None if problem is None else redact(problem)
            if key in stored and stored[key] != wanted:  # most samples are as they were: no write for them
                samples.update(key, {"problem": wanted})

    def write_scores(self, conn: sqlite3.Connection, rows: list[ScoreRow], force: bool = False) -> None:
        """Upsert scores; other versions of the same (sample, metric) are replaced.

        An "unavailable" outcome never replaces a value of the same version and configuration
        (unless force): a concurrent scorer that did not see the anchor yet must not undo one
        that did. Decided here from the rows stored, read in the same transaction.
        """
        stamp = now_iso()
        stored: dict[tuple[str, str, int, str], dict[int, tuple[float | None, str]]] = {}
        for s in self._stored(conn, "SELECT cell_key, prompt_sha, seed, metric, metric_version, value, config "
                                    "FROM scores WHERE cell_key = ?", (r.cell_key for r in rows)):
            stored.setdefault((s["cell_key"], s["prompt_sha"], s["seed"], s["metric"]), {})[s["metric_version"]] = (
                s["value"], s["config"])
        stale: set[tuple[str, str, int, str, int]] = set()
        chosen: dict[tuple[str, str, int, str, int], tuple[Any, ...]] = {}
        for r in rows:
            spec, outcome = r.spec, r.outcome
            key = (r.cell_key, r.prompt_sha, r.seed, spec.name)
            versions = stored.get(key)
            if versions is None:  # the common case: nothing stored for the sample and metric
                stored[key] = {spec.version: (outcome.value, r.config)}
            else:
                for version in [v for v in versions if v != spec.version]:
                    del versions[version]
                    stale.add((*key, version))
                    chosen.pop((*key, version), None)
                old = versions.get(spec.version)
                if (old is not None and not force and outcome.value is None and old[0] is not None
                        and old[1] == r.config):
                    continue  # unavailable never undoes a value of the same version and configuration
                versions[spec.version] = (outcome.value, r.config)
            chosen[(*key, spec.version)] = (
                r.cell_key, r.prompt_sha, r.prompt_id, r.seed, spec.name, spec.version, outcome.value,
                outcome.unavailable_reason, spec.direction, r.config, r.reference_cell_key, outcome.detail, stamp)
        scores = self.table("scores")
        for old_key in sorted(stale):  # rare: a metric's version changed
            scores.delete_where("cell_key = ? AND prompt_sha = ? AND seed = ? AND metric = ? AND metric_version = ?",
                                old_key)
        self._insert("scores", SCORE_COLUMNS, chosen.values(), replace=True)  # every column given: replace = upsert

    def drop_scores(self, conn: sqlite3.Connection, cell_key: str, metrics: Sequence[str]) -> None:
        """Remove the cell's scores of these metrics: metrics that do not apply to its model (MetricSpec.applies_to),
        left by a scoring from before they said so; the cell's refresh then drops their derived rows too."""
        if metrics:
            marks = ", ".join("?" for _ in metrics)
            self.table("scores").delete_where(f"cell_key = ? AND metric IN ({marks})", (cell_key, *metrics))

    def write_set_score(self, conn: sqlite3.Connection, row: dict[str, Any]) -> None:
        """Upsert one set score (other versions of the metric for the cell and split are replaced)."""
        self.table("set_scores").delete_where(
            "cell_key = ? AND split = ? AND metric = ? AND metric_version <> ?",
            (row["cell_key"], row["split"], row["metric"], row["metric_version"]))
        self._insert("set_scores", [*row, "scored_at"], [[*row.values(), now_iso()]], replace=True)

    def set_score(self, cell_key: str, split: str, metric: str) -> dict[str, Any] | None:
        found = self.query("SELECT * FROM set_scores WHERE cell_key = ? AND split = ? AND metric = ? "
                           "ORDER BY metric_version DESC LIMIT 1", (cell_key, split, metric))
        return found[0] if found else None

    def refresh_cell(self, conn: sqlite3.Connection, cell_key: str) -> None:
        """Recompute the cell's `cell_scores` and `cell_summary` rows from its runs, samples and scores."""
        samples = conn.execute("SELECT * FROM samples WHERE cell_key = ?", (cell_key,)).fetchall()
        scored = conn.execute(
            "SELECT s.prompt_sha, s.seed, s.metric, s.metric_version, s.direction, s.value, s.unavailable_reason "
            "FROM scores s JOIN samples p USING (cell_key, prompt_sha, seed) WHERE s.cell_key = ?",
            (cell_key,),
        ).fetchall()
        runs = conn.execute("SELECT * FROM runs WHERE cell_key = ?", (cell_key,)).fetchall()
        runs_by_split: dict[str, list[sqlite3.Row]] = defaultdict(list)
        for run in runs:
            runs_by_split[run["split"]].append(run)
        # a sample (and its scores) counts in every split whose runs of the cell asked for its text (in_split)
        samples_by_split = {split: in_split(samples, runs, split) for split in runs_by_split}
        members = {split: {(m["prompt_sha"], m["seed"]) for m in rows} for split, rows in samples_by_split.items()}
        scores = [{**dict(r), "split": split} for r in scored for split, keys in members.items()
                  if (r["prompt_sha"], r["seed"]) in keys]
        rows = self._aggregate_scores(cell_key, scores)
        rows += [(cell_key, r["split"], r["metric"], r["metric_version"], r["direction"], r["value"],
                  r["unavailable_reason"], r["n"], 0, r["detail"], None, None)
                 for r in conn.execute("SELECT * FROM set_scores WHERE cell_key = ?", (cell_key,))]
        # the reference's drift over every run that rendered some of the cell's samples (any split: the store is by cell)
        drifts = [r["ref_drift"] for r in runs if r["n_rendered"]]
        for split, split_runs in runs_by_split.items():
            gpu_s = sum(r["gpu_s"] for r in split_runs)
            speed = cell_speed(samples_by_split.get(split, []), gpu_s, drifts)
            for spec in SPEED_SPECS:
                outcome = speed[spec.name]
                rows.append((cell_key, split, spec.name, spec.version, spec.direction, outcome.value,
                             outcome.unavailable_reason, len(samples_by_split.get(split, [])), 0, outcome.detail,
                             outcome.low, outcome.high))
        summaries = [self._summary(cell_key, split, split_runs, samples_by_split.get(split, []), rows)
                     for split, split_runs in runs_by_split.items()]
        self._write_cell(conn, cell_key, rows, summaries)

    def _write_cell(self, conn: sqlite3.Connection, cell_key: str, rows: list[tuple[Any, ...]],
                    summaries: list[dict[str, Any]]) -> None:
        """Replace the cell's `cell_scores` and `cell_summary` rows."""
        stamp = now_iso()
        self._replace_cell_rows(conn, "cell_scores", ("split", "metric", "metric_version"), cell_key,
                                CELL_SCORE_COLUMNS, [(*row, stamp) for row in rows])
        self._replace_cell_rows(conn, "cell_summary", ("split",), cell_key,
                                [*summaries[0], "updated_at"] if summaries else [],
                                [[*s.values(), stamp] for s in summaries])

    def _replace_cell_rows(self, conn: sqlite3.Connection, table: str, key: tuple[str, ...], cell_key: str,
                           columns: Sequence[str], rows: list[Sequence[Any]]) -> None:
        """Make the cell's rows of `table` (primary key: cell_key and `key`) exactly `rows`, each of which gives every
        column: rows no longer derived are deleted (rare: a split or a metric version gone), the others replaced
        whole. The same table as deleting the cell's rows and inserting them again, in one library write, not two."""
        stored = {tuple(r) for r in conn.execute(f"SELECT {', '.join(key)} FROM {table} WHERE cell_key = ?",
                                                 (cell_key,))}
        positions = [list(columns).index(c) for c in key] if rows else []
        where = " AND ".join(f"{c} = ?" for c in ("cell_key", *key))
        for gone in sorted(stored - {tuple(row[p] for p in positions) for row in rows}):
            self.table(table).delete_where(where, (cell_key, *gone))
        if rows:
            self._insert(table, columns, rows, replace=True)

    @staticmethod
    def _summary(cell_key: str, split: str, runs: list[sqlite3.Row], samples: list[dict[str, Any]],
                 rows: list[tuple[Any, ...]]) -> dict[str, Any]:
        latest = max(runs, key=lambda r: (r["started_at"] or "", r["path"]))
        status = cell_status(r["status"] for r in runs)
        values: dict[str, tuple[int, float | None]] = {}
        for _, row_split, metric, version, _, value, *_ in rows:
            if row_split == split and metric in PIVOT_METRICS and version >= values.get(metric, (0, None))[0]:
                values[metric] = (version, value)
        return {
            "cell_key": cell_key, "split": split, "anchor_cell_key": latest["anchor_cell_key"],
            "is_anchor": max(r["is_anchor"] for r in runs), "status": status, "n_runs": len(runs),
            "n_samples": len(samples), "n_flagged": sum(1 for s in samples if s["problem"]),
            "n_expected": max(r["n_expected"] for r in runs), "latest_run": latest["path"],
            **{m: values.get(m, (0, None))[1] for m in PIVOT_METRICS},
        }

    @staticmethod
    def _aggregate_scores(cell_key: str, scores: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        groups: dict[tuple[str, str, int, str], list[dict[str, Any]]] = defaultdict(list)
        for s in scores:
            groups[(s["split"], s["metric"], s["metric_version"], s["direction"])].append(s)
        rows = []
        for (split, metric, version, direction), group in sorted(groups.items()):
            values = [g["value"] for g in group if g["value"] is not None]
            reasons = Counter(g["unavailable_reason"] for g in group if g["value"] is None)
            value = statistics.fmean(values) if values else None
            reason = None if values else reasons.most_common(1)[0][0]
            detail = f"{sum(reasons.values())} unavailable" if values and reasons else None
            rows.append((cell_key, split, metric, version, direction, value, reason, len(values),
                         sum(reasons.values()), detail, None, None))
        return rows

    # -- reads ------------------------------------------------------------------------------

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute(sql, tuple(params))]

    def existing_scores(self, cell_key: str) -> dict[tuple[str, int, str], sqlite3.Row]:
        """(text identity, seed, metric) -> the stored score row of this cell."""
        return {
            (r["prompt_sha"], r["seed"], r["metric"]): r
            for r in self.conn.execute(
                "SELECT prompt_sha, seed, metric, metric_version, config, value FROM scores WHERE cell_key = ?",
                (cell_key,),
            )
        }

    def cell_samples(self, cell_key: str) -> dict[tuple[str, int], sqlite3.Row]:
        """(text identity, seed) -> sample row of a cell (e.g. the anchor's): matched by content, never by id."""
        return {
            (r["prompt_sha"], r["seed"]): r
            for r in self.conn.execute("SELECT * FROM samples WHERE cell_key = ?", (cell_key,))
        }

    # One cell's rows, in the order of the index that answers them (assess.report.reads reads every cell's at once,
    # in the same order: a bootstrap's values depend on it).

    def samples_of(self, cell_key: str, split: str) -> list[dict[str, Any]]:
        """The cell's samples that count in `split` (in_split: by membership of their text)."""
        return in_split(self.query("SELECT * FROM samples WHERE cell_key = ?", (cell_key,)),
                        self.query("SELECT split, prompt_shas FROM runs WHERE cell_key = ?", (cell_key,)), split)

    def scores_of(self, cell_key: str) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM scores WHERE cell_key = ? ORDER BY prompt_sha, seed, metric, metric_version",
                          (cell_key,))

    def set_scores_of(self, cell_key: str, split: str) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM set_scores WHERE cell_key = ? AND split = ? ORDER BY metric, metric_version",
                          (cell_key, split))

    def session_calls(self, cell_key: str) -> list[float]:
        """The cell's call latencies in its latest complete side-by-side session, or []."""
        rows = self.query("SELECT c.latencies FROM timing_cells c JOIN timing_sessions s USING (session) "
                          "WHERE c.cell_key = ? AND s.complete = 1 ORDER BY s.finished_at DESC LIMIT 1", (cell_key,))
        return [float(x) for x in json.loads(rows[0]["latencies"])] if rows else []

    def runs_of(self, cell_key: str) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM runs WHERE cell_key = ? ORDER BY split, rowid", (cell_key,))

    def cell_row(self, cell_key: str, split: str) -> dict[str, Any] | None:
        """The cell's row of the `cells` view (its summary and its latest run's configuration)."""
        rows = self.query("SELECT * FROM cells WHERE cell_key = ? AND split = ?", (cell_key, split))
        return rows[0] if rows else None

    def leaderboard(self, split: str | None = None) -> list[dict[str, Any]]:
        """The `leaderboard` view (optionally one split), anchors first, then by speed-up."""
        where, params = ("WHERE split = ?", (split,)) if split else ("", ())
        return self.query(
            f"SELECT * FROM leaderboard {where} ORDER BY split, is_anchor DESC, speedup DESC NULLS LAST, cell_key",
            params,
        )


def in_split(samples: Iterable[Any], runs: Iterable[Any], split: str) -> list[dict[str, Any]]:
    """A cell's samples that count in `split`, in (text identity, seed) order: those rendered under it, and those whose
    text a run of the cell under `split` asked for (membership, not the split of the run that rendered the sample: a
    dev prompt that shares its text with a smoke prompt is one sample, rendered once, counted in both)."""
    texts = {sha for r in runs if r["split"] == split for sha in json.loads(r["prompt_shas"] or "[]")}
    rows = [dict(s) for s in samples if s["split"] == split or s["prompt_sha"] in texts]
    return sorted(rows, key=lambda s: (s["prompt_sha"], s["seed"]))


def json_dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
