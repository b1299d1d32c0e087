"""Issue 42, item 5: quiet by default. Each filter of render.run.quiet drops its named noise and lets the same
library's other warnings through; `HYPERGRID_VERBOSE=1` installs none; a dropped torchao kernel warning is held
for the error of a cell whose torchao quantization fails; the twin's save writes no progress bars."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from render.run import quiet
from render.axes.quant import kernel_note

TORCHAO = Path("/venv/lib/python3.11/site-packages/torchao")  # where torchao's import looks for its kernels

# (logger, the record the library writes, a record of the same logger that must still show)
LOGS = [
    ("torchao", f"Failed to load {TORCHAO}/_C_mxfp8.cpython-310-x86_64-linux-gnu.so: Could not load this library: "
                f"{TORCHAO}/_C_mxfp8.cpython-310-x86_64-linux-gnu.so",
     "Skipping import of cpp extensions due to incompatible torch version. Please upgrade to torch >= 2.11.0"),
    ("torchao", f"Failed to load {TORCHAO}/_C_cutlass_90a.abi3.so: Could not load this library: {TORCHAO}/_C_cutlass_90a.abi3.so",
     "Failed to load the checkpoint: size mismatch"),
    ("torchao.kernel.intmm", "Warning: Detected no triton, on systems without Triton certain kernels will not work",
     "Warning: int_mm falls back to a slow path for shape (3, 5)"),
    ("diffusers.quantizers.torchao.torchao_quantizer",
     "Unable to import `torchao` Tensor objects. This may affect loading checkpoints serialized with `torchao`",
     "You are trying to set torch_dtype to float16 for int4 weight-only quantization; use bfloat16"),
    ("transformers.utils.import_utils",
     "`CLIPImageProcessor` requires torchvision (not installed); falling back to `CLIPImageProcessorPil` for backward "
     "compatibility. Install torchvision to use the default backend, or import `CLIPImageProcessorPil` directly to "
     "silence this warning.",
     "Could not import module 'CLIPImageProcessor'. Are this object's requirements defined correctly?"),
    ("torch.utils._pytree",
     "<enum 'KernelPreference'> is an Enum subclass and is now natively supported by torch.compile as an opaque value "
     "type. Calling register_constant() on Enum subclasses is deprecated and will be an error in a future release.",
     "register_constant() on a class that is not hashable"),
]

ULYSSES = ("`torch.distributed._functional_collectives.all_gather_tensor` is deprecated. Please use "
           "`torch.distributed._functional_collectives.all_gather_single` instead.")


@pytest.fixture
def entry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The filters as an entry point installs them, taken off again after the test."""
    monkeypatch.delenv(quiet.VERBOSE_ENV, raising=False)
    before = {name: list(logging.getLogger(name).filters) for name, _, _ in quiet.THIRD_PARTY_LOGS}
    with warnings.catch_warnings():
        quiet.filter_third_party_warnings()
        yield
    for name, filters in before.items():
        logging.getLogger(name).filters[:] = filters


class _Caught(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _logged(name: str, *messages: str) -> list[str]:
    """What a warning of `name` that passed its filters reaches (the logger's level held at WARNING for the call: a
    test before may have left the library at ERROR, as render.run.loader.quiet_libraries does)."""
    logger, caught = logging.getLogger(name), _Caught()
    level = logger.level
    logger.addHandler(caught)
    logger.setLevel(logging.WARNING)
    try:
        for message in messages:
            logger.warning(message)
    finally:
        logger.removeHandler(caught)
        logger.setLevel(level)
    return caught.messages


def _warned(message: str, category: type[Warning], module: str) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet.filter_third_party_warnings()  # catch_warnings(record=True) reset the filters: as the entry point left them
        warnings.warn_explicit(message, category, f"{module.replace('.', '/')}.py", 261, module=module)
    return [str(w.message) for w in caught]


@pytest.mark.usefixtures("entry")
@pytest.mark.parametrize("name,noise,real", LOGS, ids=[f"{n}:{noise[:24]}" for n, noise, _ in LOGS])
def test_each_logged_noise_is_dropped_and_its_loggers_other_warnings_show(name: str, noise: str, real: str) -> None:
    assert _logged(name, noise, real) == [real]


@pytest.mark.parametrize("name,noise,real", LOGS[:1], ids=["torchao"])
def test_without_the_entry_point_the_noise_shows(name: str, noise: str, real: str) -> None:
    assert _logged(name, noise) == [noise]


@pytest.mark.usefixtures("entry")
def test_diffusers_ulysses_deprecation_is_dropped_from_its_module_only() -> None:
    assert _warned(ULYSSES, FutureWarning, "diffusers.hooks.context_parallel") == []
    assert _warned(ULYSSES, FutureWarning, "hypergrid_user_code") == [ULYSSES]  # the same call elsewhere: shown
    other = "`ContextParallelConfig.convert_to_fp32` is deprecated"
    assert _warned(other, FutureWarning, "diffusers.hooks.context_parallel") == [other]


def test_verbose_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(quiet.VERBOSE_ENV, "1")
    name, noise, _ = LOGS[0]
    before = list(logging.getLogger(name).filters)
    quiet.filter_third_party_warnings()
    assert logging.getLogger(name).filters == before and _logged(name, noise) == [noise]
    assert _warned(ULYSSES, FutureWarning, "diffusers.hooks.context_parallel") == [ULYSSES]


@pytest.mark.usefixtures("entry")
def test_show_everything_takes_the_filters_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """`assess score -v`: the filters main() installed before the options were read come off."""
    name, noise, _ = LOGS[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        quiet.filter_third_party_warnings()
        warnings.warn_explicit(ULYSSES, FutureWarning, "diffusers/hooks/context_parallel.py", 1,
                               module="diffusers.hooks.context_parallel")
        assert caught == [] and _logged(name, noise) == []
        quiet.show_everything()
        warnings.warn_explicit(ULYSSES, FutureWarning, "diffusers/hooks/context_parallel.py", 2,
                               module="diffusers.hooks.context_parallel")
    assert [str(w.message) for w in caught] == [ULYSSES]
    assert _logged(name, noise) == [noise] and quiet.verbose()


@pytest.mark.usefixtures("entry")
def test_a_failed_torchao_cell_names_the_kernels_torchao_could_not_load() -> None:
    """The user asked for quant=fp8dq: the kernel warning hidden at import is in the cell's error."""
    assert kernel_note({"name": "fp8dq", "components": ["transformer"]}) == ""  # nothing held yet
    _logged(*LOGS[0][:2])
    note = kernel_note({"name": "fp8dq", "components": ["transformer"]})
    assert note.startswith("; torchao could not load its kernels at import: Failed to load ") and "_C_mxfp8" in note
    assert kernel_note({"name": "quanto-int8", "components": ["transformer"]}) == ""  # not torchao's
    assert kernel_note(None) == "" and kernel_note({"name": "none", "components": []}) == ""


class _Shards:
    """What `save_pretrained` of a transformers model does: its shards through transformers' own tqdm."""

    def save_pretrained(self, folder: Path) -> None:
        from transformers.utils import logging as transformers_logging

        for _ in transformers_logging.tqdm(range(2), desc="Writing model shards"):
            pass
        (Path(folder) / "model_index.json").write_text("{}")


@pytest.mark.parametrize("verbose", [False, True])
def test_a_twin_is_saved_without_shard_bars(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch, verbose: bool,
                                            request: pytest.FixtureRequest) -> None:
    from transformers.utils import logging as transformers_logging

    from render.models.twins import ensure_built

    monkeypatch.setenv(quiet.VERBOSE_ENV, "1" if verbose else "0")
    was = transformers_logging.is_progress_bar_enabled()  # a test before may have turned the bars off
    transformers_logging.enable_progress_bar()
    request.addfinalizer(transformers_logging.enable_progress_bar if was else transformers_logging.disable_progress_bar)
    # transformers' own verbosity decides whether its bars show at all: at its default for this test
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_warning()
    request.addfinalizer(lambda: transformers_logging.set_verbosity(verbosity))
    ensure_built(tmp_path / "twin", _Shards)
    assert ("Writing model shards" in capfd.readouterr().err) == verbose
    assert transformers_logging.is_progress_bar_enabled()  # the library's setting is back
    _Shards().save_pretrained(tmp_path)
    assert "Writing model shards" in capfd.readouterr().err  # outside the save path the bars are transformers' own


NOISE = ("Failed to load ", "Detected no triton", "Unable to import `torchao` Tensor objects")


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["assess.cli", "render.__main__"])
def test_the_entry_points_keep_torchaos_import_noise_out_unless_verbose(entry: str) -> None:
    """The real imports after the real entry point (`--help`): what diffusers' quantizers and torchao log at import
    is gone; HYPERGRID_VERBOSE=1 shows it; torchao's other records still show."""
    code = (f"import sys, logging\nfrom {entry} import main\nsys.argv = ['x', '--help']\n"
            "try:\n    main()\nexcept (SystemExit, Exception):\n    pass\n"
            "import diffusers.quantizers.torchao.torchao_quantizer, torchao.kernel.intmm\n"
            "logging.getLogger('torchao').warning('a real torchao warning')\n")

    def stderr(verbose: str) -> str:
        env = {**os.environ, quiet.VERBOSE_ENV: verbose}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                                cwd=Path(__file__).resolve().parents[1])
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stderr

    shown = stderr("1")
    assert any(noise in shown for noise in NOISE), ("torchao and diffusers now import silently: the filters of "
                                                    "render/run/quiet.py for this noise are stale, remove them")
    quiet_err = stderr("0")
    assert not any(noise in quiet_err for noise in NOISE), quiet_err
    assert "a real torchao warning" in quiet_err and "a real torchao warning" in shown
