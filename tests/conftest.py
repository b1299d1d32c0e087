"""Shared fixtures: Hydra composition of the shipped configs, shrunk to tiny settings."""

from __future__ import annotations

import copy
import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

# One torch thread per test process, unless the user chose: the suite runs on every core (pytest-xdist, pyproject's
# addopts) and two workers of two threads each on two cores stall each other. Set before the workers start.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

import render.compose.schema  # noqa: F401,E402  registers schemas and resolvers

CONF_DIR = str(Path(render.compose.schema.__file__).parents[1] / "conf")
pytest_plugins = ["tests.budget"]  # the suite's time budget: a test past its tier's fails the run unless marked long


@pytest.fixture(autouse=True, scope="module")
def private_module_lock(tmp_path_factory: pytest.TempPathFactory):
    """A module's own machine-wide holdout lock (render.laws.lock), for its module-scoped fixtures (which predate
    `private_state`): one module's final never spends another module's holdout."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HYPERGRID_LOCK", str(tmp_path_factory.mktemp("hypergrid-lock") / "holdout-lock.jsonl"))
        yield


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own user-level record of holdouts and finals (render.laws.user_state_dir), and its own
    machine-wide holdout lock."""
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "hypergrid-state"))
    monkeypatch.setenv("HYPERGRID_LOCK", str(tmp_path / "hypergrid-lock" / "holdout-lock.jsonl"))  # render.laws.lock


def _hydra_fingerprint() -> tuple[Any, ...]:
    """What a test can change of Hydra's process-wide singletons, read without copying them (a deep copy and
    restore costs ~0.15 s, a tenth of the default suite when paid by every test)."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobRuntime
    from hydra.version import VersionBase
    from omegaconf.basecontainer import BaseContainer

    def shape(node: Any) -> Any:  # the config store's tree: names and the identity of every stored node
        return tuple((k, shape(v)) for k, v in node.items()) if isinstance(node, dict) else id(node)

    instances = Singleton._instances
    runtime = instances.get(JobRuntime)
    return (
        tuple((cls.__name__, id(obj)) for cls, obj in instances.items()),
        str(instances[VersionBase].getbase()) if VersionBase in instances else None,
        repr(runtime.conf) if runtime is not None else None,
        shape(instances[ConfigStore].repo) if ConfigStore in instances else None,
        tuple(BaseContainer._resolvers),
    )


_PRISTINE_HYDRA: list[Any] = []  # Hydra's singletons as the first test found them (deep-copied once)


@pytest.fixture(autouse=True)
def hydra_singletons_restored():
    """Hydra's compose leaves process-wide singletons behind (its version base among them), which
    changes how later in-process Hydra runs behave (Hydra's launcher contract suite): a test that changed
    them gets them back as they were before the first test."""
    from hydra.core.singleton import Singleton

    if not _PRISTINE_HYDRA:
        _PRISTINE_HYDRA[:] = [copy.deepcopy(Singleton.get_state()), _hydra_fingerprint()]
    yield
    if _hydra_fingerprint() != _PRISTINE_HYDRA[1]:
        Singleton.set_state(copy.deepcopy(_PRISTINE_HYDRA[0]))
        _PRISTINE_HYDRA[1] = _hydra_fingerprint()


def compose_cfg(*overrides: str, out_root: Path | None = None):
    """The task config for these overrides, as a job would see it (hydra node included)."""
    extra = [f"out_root={out_root}"] if out_root else []
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=[*overrides, *extra], return_hydra_config=False)


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory) -> Path:
    """Build the tiny model once per session into a private cache; subprocesses see it via HYPERGRID_CACHE."""
    root = Path(os.environ.get("HYPERGRID_TEST_CACHE") or tmp_path_factory.mktemp("hypergrid-cache"))
    os.environ["HYPERGRID_CACHE"] = str(root)
    from render.models.tiny import ensure_tiny

    ensure_tiny(root)
    return root


@pytest.fixture(scope="session")
def twin_cache(tiny_cache: Path) -> Path:
    """Every model family's tiny twin built once per session into the tests' private cache ($HYPERGRID_CACHE)."""
    from render.models.families import twins

    for twin in twins().values():
        twin.ensure(tiny_cache)
    return tiny_cache


def run_render(*args: str, cwd: Path, env_extra: dict[str, str] | None = None, timeout: float = 300,
               timing_round: bool = False) -> subprocess.CompletedProcess:
    """`python -m render ...` in a real subprocess. A sweep (-m) skips the side-by-side round it ends with
    (render.timing.sweep_round) unless `timing_round` (or the args themselves say `timing.side_by_side=...`): the round's
    own tests keep it (tests/test_default_answer.py, tests/test_default_path.py, the README's sweep); in every other
    sweep it would only add seconds to promises it has no part in (docs/testing.md)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0", **(env_extra or {})}
    if "-m" in args and not timing_round and not any(a.startswith("timing.side_by_side=") for a in args):
        args = (*args, "timing.side_by_side=false")
    return subprocess.run([sys.executable, "-m", "render", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@functools.lru_cache(maxsize=None)
def slurm_problem() -> str | None:
    from render.run.environment import slurm_controller_problem

    return slurm_controller_problem()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test in a service's tier (slurm, prometheus) is never also slow: CI runs `-m slow` before it brings the
    services up, where such a test fails (a slurm test's launcher params carry the slow mark themselves)."""
    both = [item.nodeid for item in items if item.get_closest_marker("slow")
            and (item.get_closest_marker("slurm") or item.get_closest_marker("prometheus"))]
    if both:
        raise pytest.UsageError(f"{len(both)} test(s) marked slow and slurm/prometheus: {', '.join(both)}; mark the "
                                "param, not the function, slow")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A `slurm` test fails, never skips, without a cluster: CI must not report green SLURM tests it never ran."""
    if item.get_closest_marker("slurm") and slurm_problem():
        pytest.fail(f"no SLURM cluster ({slurm_problem()}): start one with .ci/slurm/up.sh", pytrace=False)


def load_benchmark(name: str) -> Any:
    """benchmarks/<name>.py as a module (it is a script, not a package member), registered in sys.modules first:
    its dataclasses look their module up."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
