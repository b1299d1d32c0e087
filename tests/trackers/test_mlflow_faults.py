"""Issue 29: `assess export mlflow` survives its faults, against a real MLflow server on localhost: a run a killed
export left RUNNING is finished by the next export; a server that goes away mid-export ends the command in
bounded time with one line that says what was exported and how to resume."""

from __future__ import annotations

import pytest
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from click.testing import CliRunner

from assess.cli import cli
from tests.trackers.conftest import free_port


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


@pytest.mark.slow
def test_a_run_left_running_by_a_killed_export_is_finished_by_the_next(scored_sweep: tuple[Path, Path],
                                                                        mlflow_server: str, tmp_path: Path) -> None:
    from assess.export.selection import KEY_TAG, sweep_runs

    sweep, db = scored_sweep
    tracked = sweep_runs(sweep, db, tmp_path)
    client = _client(mlflow_server)
    experiment_id = client.create_experiment("killed-export")
    # what a SIGKILL between create_run and the end of the export leaves: RUNNING, tagged, nothing logged
    left = client.create_run(experiment_id, tags={KEY_TAG: tracked[0].key}, run_name=tracked[0].name)
    assert client.get_run(left.info.run_id).info.status == "RUNNING"
    result = CliRunner().invoke(cli, ["export", "mlflow", str(sweep), "--db", str(db), "--tracking-uri", mlflow_server,
                                      "--experiment", "killed-export"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    runs = client.search_runs([experiment_id], max_results=1000)
    assert len(runs) == len(tracked)  # the left run was taken up, not duplicated
    assert all(r.info.status == "FINISHED" for r in runs)
    finished = client.get_run(left.info.run_id)
    assert finished.data.params == tracked[0].params


def _go_away(server: ThreadingHTTPServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()  # the port refuses connections from now on


class _Vanishing(BaseHTTPRequestHandler):
    """Forwards to the real server, and goes away (stops listening) after `budget` requests."""

    upstream = ""
    budget = 0
    served = 0
    server_ref: ThreadingHTTPServer | None = None

    def _forward(self) -> None:
        cls = type(self)
        cls.served += 1
        if cls.served > cls.budget:
            self.close_connection = True
            threading.Thread(target=_go_away, args=(cls.server_ref,), daemon=True).start()
            self.connection.close()
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
        request = urllib.request.Request(cls.upstream + self.path, data=body, method=self.command,
                                         headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, data, headers = response.status, response.read(), response.headers
        except urllib.error.HTTPError as error:
            status, data, headers = error.code, error.read(), error.headers
        self.send_response(status)
        for key in ("Content-Type",):
            if headers.get(key):
                self.send_header(key, headers[key])
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _forward

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_a_server_that_goes_away_mid_export_is_one_line_in_bounded_time(scored_sweep: tuple[Path, Path],
                                                                         mlflow_server: str) -> None:
    sweep, db = scored_sweep
    port = free_port()
    _Vanishing.upstream, _Vanishing.budget, _Vanishing.served = mlflow_server, 6, 0
    server = ThreadingHTTPServer(("127.0.0.1", port), _Vanishing)
    _Vanishing.server_ref = server
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    start = time.monotonic()
    try:
        result = subprocess.run([sys.executable, "-m", "assess", "export", "mlflow", str(sweep), "--db", str(db),
                                 "--tracking-uri", f"http://127.0.0.1:{port}", "--experiment", "vanishing"],
                                capture_output=True, text=True, timeout=150)
    finally:
        server.server_close()
    elapsed = time.monotonic() - start
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr[-2000:]
    assert "stopped answering" in result.stderr and "run(s) were exported" in result.stderr
    assert "run the same `assess export mlflow` again" in result.stderr
    assert elapsed < 120
    print(f"a vanished server: exit 2 after {elapsed:.1f} s")
