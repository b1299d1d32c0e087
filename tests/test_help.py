"""`python -m render --help` lists every config group with what it decides and its options, no schemas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from render.compose.confpath import PACKAGE_CONF
from render.compose.help import groups

GROUPS = groups()


def test_every_group_has_a_description() -> None:
    groups = {p.name for p in PACKAGE_CONF.iterdir() if p.is_dir()} | {"hydra/launcher"}
    assert set(GROUPS) == groups


def test_help_lists_groups_with_descriptions_and_no_schemas(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "render", "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "_schema" not in text
    lines = text.splitlines()
    for group, description in GROUPS.items():
        (index,) = [i for i, line in enumerate(lines) if line.split()[:1] == [group]]
        assert description in lines[index]
    options = {group: lines[i + 1].split(", ") for i, line in enumerate(lines) for group in GROUPS if line.split()[:1] == [group]}
    assert {"tiny", "shapes", "flux-dev"} <= {o.strip() for o in options["model"]}
    assert {"none", "fbcache", "magcache"} <= {o.strip() for o in options["cache"]}
    assert {"inprocess", "gpus", "slurm"} <= {o.strip() for o in options["hydra/launcher"]}
    assert "steps: null" in text  # the config section, to override any key
