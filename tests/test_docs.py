"""The README's commands are the ones that run: the first two lines, and .ci/run's test command."""

from __future__ import annotations

import re
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "README must open with a bash block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_install_and_run_then_install_and_test() -> None:
    main, tests = readme_commands()[:2]
    assert "pip install" in main and "python -m render" in main
    assert "pip install" in tests and "pytest" in tests


def readme_opening() -> str:
    """The README up to its first section: what a reader sees before `## Rendering`."""
    return (ROOT / "README.md").read_text().split("\n## ", 1)[0]


def test_readme_says_how_to_install_the_cpu_and_a_cuda_build_of_the_pinned_torch() -> None:
    """Near its first lines: the CPU build from PyTorch's CPU index, a CUDA build from its CUDA tag's index, both of
    the torch the install lines pin (a reader on a CPU machine otherwise downloads PyPI's CUDA build)."""
    pin = re.search(r"pip install (torch==\S+)", readme_commands()[0])
    assert pin, readme_commands()[0]
    text = " ".join(readme_opening().split())  # a command wrapped over two lines reads as one
    cpu = f"pip install {pin.group(1)} --index-url https://download.pytorch.org/whl/cpu"
    assert f"`{cpu}`" in text, cpu
    cuda = re.search(rf"`pip install {re.escape(pin.group(1))} --index-url https://download\.pytorch\.org/whl/(cu\d+)`",
                     text)
    assert cuda, "no CUDA build's install line of the pinned torch near the README's first lines"


def ci_lines() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_the_readmes_test_command() -> None:
    """The whole command, as a line of its own: a line that merely contains its pytest part does not count."""
    assert readme_commands()[1] in ci_lines(), readme_commands()[1]


def test_ci_runs_every_slow_and_slurm_test_and_the_linters() -> None:
    """Every test that guards a documented promise runs in CI: the slow ones without a path that would leave some
    out, the SLURM ones against the real cluster, and ruff and mypy over the code."""
    # a tier run in the background is `beside NAME <its command>`
    lines = [re.sub(r"^beside \S+ ", "", line) for line in ci_lines()]
    for tier in ("slow", "slurm", "prometheus", "ray"):  # every test of the tier, whatever folder it is in: no path
        runs = [line for line in lines if line.startswith(f"python -m pytest -q -m {tier} ")]
        assert runs and all("tests" not in line and "::" not in line for line in runs), runs
        # a tier split in two by -k is split by one expression and its negation: none of its tests is left out
        chosen = sorted(line.split(" -k ", 1)[1].split()[0] if " -k " in line else "" for line in runs)
        assert chosen == [""] or (len(chosen) == 2 and chosen[0] == '"not' and runs), runs
        if len(chosen) == 2:
            plain, negated = (line.split(" -k ", 1)[1] for line in sorted(runs, key=lambda r: '"not' in r))
            assert negated.startswith(f'"not {plain.split()[0]}"'), runs
    assert any(line.startswith("ruff check") for line in lines)
    assert any(line.startswith("mypy") for line in lines)


def test_ci_times_every_phase() -> None:
    """.ci/run says where its time went: each install and each tier runs through `phase` (.ci/phases.sh)."""
    phases = [line.split()[1] for line in ci_lines() if line.startswith("phase ")]
    assert phases == ["install-debian", "install-python", "default-tier", "mutation-check", "slow-tier", "cluster-tiers"], phases
    assert "trap" in (ROOT / ".ci" / "run").read_text() and "phase_summary" in (ROOT / ".ci" / "run").read_text()


# The README's first command is run as written by tests/test_journey.py (its walk's first step, asserted with what
# the README shows it print).
