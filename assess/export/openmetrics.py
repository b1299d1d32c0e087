"""A sweep's live progress in the Prometheus text format (prometheus-client), from the run directories alone.

Every scrape reads the files again through `assess.status` (states, samples, the watchdog's slow flags) and
`render.laws.admission` (an experiment's GPU-seconds spent), so a served or written figure is never older than the
files. `assess status PATH --openmetrics` prints it once, `--serve` answers scrapes, `--textfile` writes it
atomically for node_exporter's textfile collector. Every metric and label: docs/trackers.md.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from assess.export.errors import TrackerUnavailable
from render.run.signals import Forwarded, note_signals

PREFIX = "hypergrid"
NO_SWEEP = "(no sweep)"


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise TrackerUnavailable(f"prometheus-client is not installed ({exc}): pip install 'hypergrid[metrics]'"
                                 ) from None
    return prometheus_client


class SweepCollector:
    """A prometheus-client collector: the state of every cell under `path`, read at each collect()."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def describe(self) -> list[Any]:
        return []  # no fixed description: the registry must not call collect() at registration

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        from assess.status import STATES, status
        from render.rundir import NoRunsFound, NotARunDirectory

        try:
            rows = status(self.path)
        except (NoRunsFound, NotARunDirectory):  # a served output root before its first sweep: nothing to say yet
            rows = []
        runs = _runs(self.path)
        sweeps = sorted({r.sweep or NO_SWEEP for r in rows})

        def family(name: str, doc: str, labels: list[str]) -> Any:
            return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=labels)

        cells = family("cells", "cells of the sweep in each state (done, failed, running, crashed, pending, "
                       "aborted, unknown)", ["sweep", "state"])
        samples = family("samples_done", "samples rendered (their image exists)", ["sweep"])
        expected = family("samples_expected", "samples the sweep's cells ask for", ["sweep"])
        slow = family("cells_slow", "running cells the watchdog flags slow: projected past twice the estimate",
                      ["sweep"])
        gpu = family("gpu_seconds", "device seconds the sweep's runs spent (rendered latency + load)", ["sweep"])
        for sweep in sweeps:
            mine = [r for r in rows if (r.sweep or NO_SWEEP) == sweep]
            counts = Counter(r.state for r in mine)
            for state in STATES:
                cells.add_metric([sweep, state], counts[state])
            samples.add_metric([sweep], sum(r.n_done for r in mine))
            expected.add_metric([sweep], sum(r.n_expected or 0 for r in mine))
            slow.add_metric([sweep], sum(r.slow for r in mine))
            gpu.add_metric([sweep], sum(g for s, g in runs["gpu"] if s == sweep))
        yield from (cells, samples, expected, slow, gpu)
        yield from _cell_families(rows, family)
        yield from _budget_families(runs["experiments"], family)


def _cell_families(rows: list[Any], family: Callable[..., Any]) -> Iterator[Any]:
    labels = ["sweep", "cell", "cell_key"]
    state = family("cell_state", "1 for the cell's current state, 0 for the others", [*labels, "state"])
    done = family("cell_samples_done", "samples of the cell rendered", labels)
    expected = family("cell_samples_expected", "samples the cell asks for", labels)
    slow = family("cell_slow", "1 when the watchdog flags the running cell slow", labels)
    eta = family("cell_eta_seconds", "remaining samples at the cell's rate so far (running cells)", labels)
    from assess.status import STATES

    for r in rows:
        values = [r.sweep or NO_SWEEP, r.name, r.cell_key or ""]
        for s in STATES:
            state.add_metric([*values, s], 1.0 if r.state == s else 0.0)
        done.add_metric(values, r.n_done)
        if r.n_expected is not None:
            expected.add_metric(values, r.n_expected)
        slow.add_metric(values, 1.0 if r.slow else 0.0)
        if r.eta_s is not None:
            eta.add_metric(values, r.eta_s)
    yield from (state, done, expected, slow, eta)


def _budget_families(experiments: dict[str, tuple[Path, dict[str, Any]]], family: Callable[..., Any]
                     ) -> Iterator[Any]:
    from render.laws import Ledger
    from render.laws.admission import spent_gpu_seconds
    from render.laws.gpu_budget import Budget, BudgetError

    spent = family("experiment_gpu_seconds_spent", "GPU-seconds the experiment's samples cost (render.laws.admission)",
                   ["experiment"])
    limit = family("experiment_gpu_seconds_budget", "the experiment's budget (experiment.budget.gpu_hours)",
                   ["experiment"])
    reserve = family("experiment_gpu_seconds_reserve", "kept back for the final (reserve_gpu_hours)", ["experiment"])
    for name, (out_root, values) in sorted(experiments.items()):
        spent.add_metric([name], spent_gpu_seconds(Ledger(name, out_root)))  # every out_root its ledger knows
        try:
            budget = Budget.of(values)
        except BudgetError:  # a run launched without (or with a broken) budget block: its spend is still served
            continue
        limit.add_metric([name], budget.limit_s)
        reserve.add_metric([name], budget.reserve_s)
    yield from (spent, limit, reserve)


def _runs(path: Path) -> dict[str, Any]:
    """(sweep, GPU-seconds) per run, and the experiments the runs belong to (name -> (out_root, budget))."""
    from assess.metrics.speed import run_gpu_s
    from render.rundir import NoRunsFound, NotARunDirectory, find_run_dirs, load_run

    gpu: list[tuple[str, float]] = []
    experiments: dict[str, tuple[Path, dict[str, Any]]] = {}
    try:
        paths = find_run_dirs(Path(path).resolve())
    except (NoRunsFound, NotARunDirectory):
        paths = []
    for p in paths:
        run = load_run(p)
        gpu.append((str(run.sweep) if run.sweep else NO_SWEEP, run_gpu_s(run.samples)))
        if run.experiment:
            experiments.setdefault(run.experiment.name, (Path(run.run.out_root or "outputs"),
                                                         run.experiment.budget))
    return {"gpu": gpu, "experiments": experiments}


def registry(path: Path | str) -> Any:
    """A fresh CollectorRegistry holding only the sweep's collector (no process metrics)."""
    client = _client()
    reg = client.CollectorRegistry(auto_describe=False)
    reg.register(SweepCollector(Path(path)))
    return reg


def metrics_text(path: Path | str) -> str:
    """The metrics of every cell under `path`, in the Prometheus text format (0.0.4)."""
    from assess.status import status

    status(path)  # a path without runs or sweep is the user's error, raised here before any output
    return _client().generate_latest(registry(path)).decode()


def write_textfile(path: Path | str, textfile: Path) -> None:
    """Write the metrics atomically (node_exporter's textfile collector reads `*.prom` files)."""
    from render.rundir import atomic_write_bytes

    atomic_write_bytes(textfile, metrics_text(path).encode())


def check_textfile(textfile: Path) -> None:
    if textfile.suffix != ".prom":
        raise TrackerUnavailable(f"--textfile {textfile}: node_exporter's textfile collector reads only *.prom files; "
                                 "name it <something>.prom")
    if not textfile.parent.is_dir():
        raise TrackerUnavailable(f"--textfile {textfile}: its folder {textfile.parent} does not exist")


POLL_S = 0.1  # how often the serving loop looks for a stop signal (its handler only notes it)
CLOSE_S = 1.0  # the most the server's shutdown may take before its socket is closed all the same


def serve(path: Path | str, port: int, addr: str = "127.0.0.1", textfile: Path | None = None,
          interval_s: float = 15.0, log: Callable[[str], None] = print, stop: threading.Event | None = None) -> None:
    """Answer scrapes on addr:port (and rewrite the textfile every interval) until SIGTERM, Ctrl-C or `stop`;
    the textfile is written once more on the way out, so it holds the sweep's last state. Any number of signals
    stop it within a second or so: they are only noted (render.run.signals.note_signals), from before the port opens to
    after it is closed."""
    if not Path(path).is_dir():  # an empty folder is served (sweeps may start in it later); a missing one is a typo
        raise TrackerUnavailable(f"{path}: no such folder to serve the metrics of; give a sweep folder or an output "
                                 "root (default outputs)")
    client = _client()
    stop = stop or threading.Event()
    main = threading.current_thread() is threading.main_thread()  # only the main thread may handle signals
    with note_signals() if main else nullcontext(Forwarded()) as noted:
        try:
            server, thread = client.start_http_server(port, addr=addr, registry=registry(path))
        except OSError as exc:
            raise TrackerUnavailable(f"--port {port}: cannot serve metrics on {addr}:{port} "
                                     f"({exc.strerror or exc}); choose a free port") from None
        log(f"serving metrics of {Path(path).resolve()} on http://{addr}:{server.server_port}/metrics")
        try:
            _until_stopped(path, textfile, interval_s, stop, noted)
        finally:
            _close(server, thread)
            if textfile is not None:
                write_textfile(path, textfile)


def _until_stopped(path: Path | str, textfile: Path | None, interval_s: float, stop: threading.Event,
                   noted: Forwarded) -> None:
    next_write = 0.0
    while not stop.is_set() and noted.signum is None:
        if textfile is not None and time.monotonic() >= next_write:
            write_textfile(path, textfile)
            next_write = time.monotonic() + interval_s
        stop.wait(POLL_S)


def _close(server: Any, thread: threading.Thread) -> None:
    """Stop serving (shutdown waits for the serving loop's next turn, at most CLOSE_S here) and release the port."""
    closer = threading.Thread(target=server.shutdown, name="metrics-shutdown", daemon=True)
    closer.start()
    closer.join(CLOSE_S)
    server.server_close()
    thread.join(CLOSE_S)
