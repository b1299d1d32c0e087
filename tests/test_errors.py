"""render's exceptions share one base, and preflight catches that base, not ValueError."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

import render
import render.run.preflight as preflight
from render.errors import RenderError
from tests.conftest import compose_cfg


def render_exception_classes() -> list[type]:
    found = []
    for path in Path(render.__file__).parent.rglob("*.py"):
        if path.stem == "__main__":
            continue
        name = ".".join(path.relative_to(Path(render.__file__).parents[1]).with_suffix("").parts).removesuffix(".__init__")
        module = importlib.import_module(name)
        found += [c for _, c in inspect.getmembers(module, inspect.isclass)
                  if issubclass(c, BaseException) and c.__module__ == module.__name__]
    return found


def test_every_render_exception_derives_from_render_error() -> None:
    classes = render_exception_classes()
    names = {c.__name__ for c in classes}
    assert {"ConfigError", "PromptError", "BackendUnavailable", "ExperimentGuard", "FinalAlreadyClaimed",
            "NonFiniteOutput", "BudgetExceeded", "PreflightError", "CacheConfigError"} <= names
    # Cancelled is a signal, not an error: a BaseException, so no library's `except Exception` swallows it
    assert [c.__name__ for c in classes if issubclass(c, Exception) and not issubclass(c, RenderError)] == []


@pytest.mark.parametrize("overrides,match", [
    (["scheduler=heun"], "scheduler=heun is not available for the flux model family"),
    (["model=sdxl", "cache=fbcache"], "cache fbcache: StableDiffusionXLPipeline has no transformer"),
])
def test_preflight_turns_render_errors_into_preflight_errors(overrides: list[str], match: str) -> None:
    with pytest.raises(preflight.PreflightError, match=match):
        preflight.preflight_config(compose_cfg("device=cpu", "model=tiny", *overrides))


def test_preflight_refuses_on_any_exception_and_keeps_its_traceback(monkeypatch) -> None:
    def broken(job):  # a plain ValueError (a bug, or a library's own error) still stops the run before it starts
        raise ValueError("bug")

    monkeypatch.setattr(preflight, "check_job", broken)
    with pytest.raises(preflight.PreflightError, match=r"preflight could not check this cell \(ValueError: bug\)") as error:
        preflight.preflight_config(compose_cfg("device=cpu", "model=tiny"))
    assert isinstance(error.value.__cause__, ValueError)  # the traceback is kept (and logged at debug level)
