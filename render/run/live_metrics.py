"""A sweep that asks for live metrics (`metrics.port=9464`, `metrics.textfile=/var/lib/node_exporter/hg.prom`)
gets them for as long as it runs, or is refused at preflight: a dashboard never starves silently.

Preflight checks what the exporter needs (prometheus-client installed, the port free, the textfile's folder
writable); the sweeper then runs `assess status <sweep> --serve` beside the sweep (a separate process: render
never imports assess) and stops it when the sweep ends. docs/trackers.md.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from render.errors import RenderError

START_TIMEOUT_S = 30.0


@dataclass
class MetricsConf:
    port: Optional[int] = None  # serve the sweep's Prometheus metrics on addr:port/metrics while it runs
    addr: str = "127.0.0.1"  # the address the exporter listens on (0.0.0.0: every interface)
    textfile: Optional[str] = None  # keep this <name>.prom file up to date for node_exporter's textfile collector
    interval_s: float = 5.0  # seconds between textfile rewrites

    @property
    def wanted(self) -> bool:
        return self.port is not None or self.textfile is not None


class MetricsUnavailable(RenderError, ValueError):
    """The launch asked for metrics that cannot be provided."""


def check_metrics(conf: Any, single: bool = False) -> None:
    """Refuse, before anything is written, metrics this launch could not provide."""
    conf = MetricsConf(**dict(conf)) if conf is not None else MetricsConf()
    if not conf.wanted:
        return
    asked = " ".join(f"metrics.{k}={v}" for k, v in (("port", conf.port), ("textfile", conf.textfile)) if v is not None)
    if single:
        raise MetricsUnavailable(f"{asked}: live metrics follow a sweep; launch with -m (python -m render -m ...)")
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise MetricsUnavailable(f"{asked}: prometheus-client is not installed; pip install 'hypergrid[metrics]'"
                                 ) from None
    if conf.port is not None:
        _check_port(conf.addr, conf.port)
    if conf.textfile is not None:
        _check_textfile(Path(conf.textfile))
    if conf.interval_s <= 0:
        raise MetricsUnavailable(f"metrics.interval_s={conf.interval_s}: must be > 0 seconds")


def _check_port(addr: str, port: int) -> None:
    if not 1 <= port <= 65535:
        raise MetricsUnavailable(f"metrics.port={port}: a TCP port is 1-65535")
    with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the exporter's server does (TIME_WAIT)
        try:
            probe.bind((addr, port))
        except OSError as exc:
            raise MetricsUnavailable(f"metrics.port={port}: cannot listen on {addr}:{port} ({exc.strerror or exc}); "
                                     "choose a free port (or metrics.addr=...)") from None


def _check_textfile(path: Path) -> None:
    if path.suffix != ".prom":
        raise MetricsUnavailable(f"metrics.textfile={path}: node_exporter's textfile collector reads only *.prom "
                                 "files; name it <something>.prom")
    folder = path.expanduser().parent
    if not folder.is_dir():
        raise MetricsUnavailable(f"metrics.textfile={path}: its folder {folder} does not exist")
    probe = folder / f".hypergrid-probe-{time.monotonic_ns()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise MetricsUnavailable(f"metrics.textfile={path}: its folder {folder} is not writable ({exc.strerror})"
                                 ) from None


def start_exporter(sweep_dir: Path, conf: Any) -> subprocess.Popen | None:
    """`assess status <sweep_dir> --serve` in its own process, once it answers; None when no metrics were asked."""
    conf = MetricsConf(**dict(conf)) if conf is not None else MetricsConf()
    if not conf.wanted:
        return None
    port = conf.port if conf.port is not None else 0  # textfile only: an ephemeral port nobody scrapes
    command = [sys.executable, "-m", "assess", "status", str(sweep_dir), "--serve", "--port", str(port),
               "--addr", conf.addr, "--interval", str(conf.interval_s)]
    if conf.textfile is not None:
        command += ["--textfile", str(Path(conf.textfile).expanduser())]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            said = process.stderr.read() if process.stderr is not None else ""
            raise MetricsUnavailable(f"the metrics exporter ended at start: {(said or '').strip()}")
        if conf.port is None or _answers(conf.addr, conf.port):
            return process
        time.sleep(0.1)
    process.terminate()
    raise MetricsUnavailable(f"the metrics exporter did not answer on {conf.addr}:{conf.port} within "
                             f"{START_TIMEOUT_S:.0f} s")


def _answers(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr if addr not in ("0.0.0.0", "::") else "127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def stop_exporter(process: subprocess.Popen | None) -> None:
    """SIGTERM: the exporter writes its textfile one last time and exits."""
    if process is None:
        return
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
