"""The run-directory contract (docs/run-directory.md): one module that render, the launchers and assess
all import. Nothing else names its files, parses its records, walks its folders or hashes its keys.

    files     file names, atomic and verified writes, locks
    identity  what a thing is, by content: prompt text, cell key, model weights, folder digests
    keys      names that are safe in paths
    records   run.json / samples.jsonl / DONE / FAILED / SWEEP.json, parsed
    walk      finding run directories, the registry of folders an output root wrote
    liveness  is the writer of a record still running
    store     skip-if-done with verified samples, claims between concurrent processes
    terminal  DONE.json / FAILED.json, written last
    sweep     SWEEP.json
    watchdog  a running cell's projected time against its estimate
    states    a cell's state, a failure's category: the contract's Enums
"""

from render.rundir.errors import InvalidRunDirectory, NoRunsFound, NotARunDirectory, RunDirError, ShortWrite, UnsafeName
from render.rundir.files import (CONTRACT_VERSION, DONE, FAILED, IMAGES, JOBS_JSON, LOG, MULTIRUN_YAML, RUN_JSON,
                                 SAMPLES, Appended, FileState, STATE_DIR, SWEEP_JSON, append_record, append_records, append_to_copies, atomic_write_bytes, atomic_write_json, create_json,
                                 digest, exclusive, file_digest, file_mode, now_iso, read_lines)
from render.rundir.identity import (cell_key_of, contains, folder_digest, holdout_identity, model_identity,
                                   sample_text_hash, shared_texts, text_hash, text_identity)
from render.rundir.keys import check_name, image_name, inside
from render.rundir.liveness import host_identity, pid_alive, ray_job_state, slurm_state, writer_state
from render.rundir.run_record import AnchorRef, PromptsRef, RunRecord
from render.rundir.records import (FAILURE_CATEGORIES, SAMPLE_FIELDS, RunDir, RunExperiment, SampleRecord, cell_label,
                                   Terminal, experiment_in, experiment_of, is_sweep_folder, load_json, load_run, parse_override,
                                   parse_sample, parse_time, read_run_record, read_samples, read_terminal)
from render.rundir.states import Category, CellState, Name, category_of_job_state
from render.rundir.store import ExistingSample, SampleStore, link_sample, sample_store, verify
from render.rundir.walk import Registry, find_run_dirs, iter_run_dirs, known_run_dirs, load_runs, register, scan_runs

from render.rundir.sweep import SweepCell, SweepInfo, load_sweep, sweep_cell, write_sweep
from render.rundir.terminal import terminal_state, write_done, write_failed

__all__ = [
    "AnchorRef",
    "PromptsRef",
    "RunRecord",
    "read_run_record",
    "experiment_in",
    "CONTRACT_VERSION",
    "Category",
    "CellState",
    "Name",
    "DONE",
    "ExistingSample",
    "FAILED",
    "FAILURE_CATEGORIES",
    "IMAGES",
    "InvalidRunDirectory",
    "JOBS_JSON",
    "LOG",
    "MULTIRUN_YAML",
    "NoRunsFound",
    "NotARunDirectory",
    "RUN_JSON",
    "Registry",
    "RunDir",
    "RunExperiment",
    "experiment_of",
    "RunDirError",
    "SAMPLES",
    "SAMPLE_FIELDS",
    "STATE_DIR",
    "SWEEP_JSON",
    "SampleRecord",
    "cell_label",
    "SampleStore",
    "sample_store",
    "ShortWrite",
    "SweepCell",
    "SweepInfo",
    "Terminal",
    "UnsafeName",
    "Appended",
    "FileState",
    "append_record",
    "append_records",
    "append_to_copies",
    "atomic_write_bytes",
    "atomic_write_json",
    "category_of_job_state",
    "cell_key_of",
    "check_name",
    "create_json",
    "digest",
    "exclusive",
    "file_digest",
    "file_mode",
    "find_run_dirs",
    "folder_digest",
    "host_identity",
    "image_name",
    "inside",
    "is_sweep_folder",
    "iter_run_dirs",
    "known_run_dirs",
    "link_sample",
    "load_json",
    "load_run",
    "load_runs",
    "load_sweep",
    "model_identity",
    "now_iso",
    "parse_override",
    "parse_sample",
    "parse_time",
    "pid_alive",
    "read_lines",
    "read_samples",
    "read_terminal",
    "register",
    "scan_runs",
    "shared_texts",
    "sample_text_hash",
    "holdout_identity",
    "contains",
    "ray_job_state",
    "slurm_state",
    "sweep_cell",
    "terminal_state",
    "text_hash",
    "text_identity",
    "verify",
    "write_done",
    "write_failed",
    "write_sweep",
    "writer_state",
]
