"""The machine checks made before anything is written: the hub probe (one implementation for render and
assess), folders that cannot be created, and the failure categories runner and launchers agree on."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from render.run import environment
from render.run import online as hub
from render.errors import ConfigError
from render.run.environment import check_writable_folder, hub_reachable


def test_render_and_assess_probe_the_hub_with_one_function() -> None:
    import assess.metrics.alignment as alignment
    import assess.metrics.clipmodels as clipmodels
    import render.suites.hub as datasets

    assert alignment.hub_reachable is clipmodels.hub_reachable is environment.hub_reachable is hub.hub_reachable
    assert getattr(datasets, "hub_reachable", hub.hub_reachable) is hub.hub_reachable


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch):
    """Point the hub at an address of our choosing (and clear what earlier probes remembered)."""
    from huggingface_hub import constants

    monkeypatch.setattr(hub, "_PROBED", {})
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)

    def point(url: str) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", url)

    return point


def _listening() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def test_the_probe_goes_through_the_https_proxy(endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    endpoint(f"http://127.0.0.1:{closed.getsockname()[1]}")  # nothing listens there
    assert not hub_reachable(0.5)
    with _listening() as proxy:
        monkeypatch.setattr(hub, "_PROBED", {})
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.getsockname()[1]}")
        assert hub_reachable(0.5)
    closed.close()


def test_a_dns_lookup_that_hangs_is_cut_at_the_timeout(endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint("https://hub.example.invalid")
    release = threading.Event()
    real = socket.socket

    def hang(*args, **kwargs) -> socket.socket:  # a getaddrinfo that does not answer
        release.wait(30)
        return real()

    monkeypatch.setattr(socket, "create_connection", hang)
    start = time.monotonic()
    assert not hub_reachable(0.3)
    assert time.monotonic() - start < 3
    release.set()


def test_offline_mode_never_probes(endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    with _listening() as hub:
        endpoint(f"http://127.0.0.1:{hub.getsockname()[1]}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        assert not hub_reachable(0.5)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        assert hub_reachable(0.5)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_that_cannot_be_created_is_named_whatever_the_reason() -> None:
    with pytest.raises(ConfigError, match=r"out_root=/proc/x/y: cannot be created in /proc"):
        check_writable_folder("/proc/x/y", "out_root")  # root passes every permission check there


def test_a_file_in_the_way_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        check_writable_folder(tmp_path / "file" / "out", "out_root")
    check_writable_folder(tmp_path / "new" / "out", "out_root")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # the probe leaves nothing behind


def test_runner_and_launchers_name_a_timed_out_or_cancelled_cell_alike() -> None:
    """The runner classifies exceptions and the launchers a scheduler's job state; both land on one Category,
    and the requeue (render.run.runner.resume_state) takes up exactly the transient ones."""
    from hydra_plugins.hypergrid.worker import failure_category
    from render.rundir import FAILURE_CATEGORIES, Category
    from render.run.runner import Cancelled, classify

    class Job:
        def __init__(self, state: str) -> None:
            self.state = state

    assert failure_category(RuntimeError(), Job("CANCELLED by 1000")) == classify(Cancelled("SIGTERM")) == Category.CANCELLED
    assert failure_category(RuntimeError(), Job("TIMEOUT")) == classify(TimeoutError()) == Category.TIMEOUT
    assert failure_category(RuntimeError(), Job("OUT_OF_MEMORY")) == classify(RuntimeError("CUDA out of memory")) == Category.OOM
    assert failure_category(RuntimeError(), Job("FAILED")) == classify(ValueError("x")) == Category.ERROR
    assert {c for c in Category if c.transient} == {Category.CANCELLED, Category.TIMEOUT}
    assert FAILURE_CATEGORIES == tuple(c.value for c in Category)
