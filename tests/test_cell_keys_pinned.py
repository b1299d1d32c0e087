"""The cell keys of the shipped configs are pinned: skip-if-done finds a finished sample by its cell key,
so a refactor that changed a key would silently render every shipped cell again.

A new option needs no pin to pass (adding one stays one module and one YAML); `python -m
tests.test_cell_keys_pinned` pins the configs that have none and never rewrites a pin. A key may change
only on purpose (the contract's version bumped, docs/run-directory.md saying so): then
`python -m tests.test_cell_keys_pinned --repin`, and say why in the commit.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from tests.conftest import CONF_DIR

PINS = Path(__file__).parent / "data" / "cell_keys.json"
GROUPS = ["attention", "cache", "scheduler", "compile", "quant", "offload"]
EXTRA = [  # non-default parameters and the top-level knobs
    ["cache=fbcache", "cache.threshold=0.1"], ["cache=magcache", "cache.mag_ratios=[1.0,0.9,0.8]"],
    ["cache=pab", "cache.spatial_attention_block_skip_range=3"],
    ["compile=regional", "compile.mode=max-autotune", "compile.dynamic=true"], ["compile=none", "compile.mode=max-autotune"],
    ["offload=group", "offload.offload_type=leaf_level"], ["offload=layerwise", "offload.storage_dtype=float8_e5m2"],
    ["quant=int8wo", "quant.components=[transformer,text_encoder]"],
    ["vae_tiling=true"], ["vae_slicing=true"], ["fuse_qkv=true"], ["channels_last=true"],
    ["steps=3", "guidance=1.5", "height=64", "width=48", "dtype=bfloat16"], ["seed=[1,2]", "tag=x", "prompts=dev"],
]


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml"))


@functools.cache
def cases() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for model in _options("model"):
        base = [f"model={model}", "device=cpu"]
        out[" ".join(base)] = base
        for group in GROUPS:
            for option in _options(group):
                out[" ".join([*base, f"{group}={option}"])] = [*base, f"{group}={option}"]
    for extra in EXTRA:
        overrides = ["model=tiny", "device=cpu", *extra]
        out[" ".join(overrides)] = overrides
    return out


def _key(cell) -> str:
    """The cell key with its weights identity as a placeholder: everything else of the cell is pinned as it is. The
    weights' identity depends on the machine, not on this code: a hub model's is its resolved commit (or unresolved
    without the hub); a built-in twin's is its folder's digest, and the configs its build writes carry the versions
    of diffusers and transformers that wrote them (a transformers release re-keyed every twin cell of a fresh cache,
    and failed 214 pins); a change to a twin's build bumps its version (render.models.twins.Twin)."""
    from render.rundir import cell_key_of

    canonical = cell.canonical()
    builtin = cell.model.id.startswith("hypergrid:")
    canonical["model"] = {**canonical["model"], "weights": "<built-in twin digest>" if builtin else "<hub commit>"}
    return cell_key_of(canonical)


def keys_of(overrides: list[str]) -> dict[str, str]:
    from render.cell import build_job
    from tests.conftest import compose_cfg

    job = build_job(compose_cfg(*overrides))
    return {"cell": _key(job.cell), "anchor": _key(job.anchor)}


PINNED = json.loads(PINS.read_text()) if PINS.exists() else {}


@pytest.fixture(scope="module", autouse=True)
def composed_as_a_sweep_composes():
    """The ~600 configs composed the way a sweep composes its cells (render.compose.composition.composed_once: each
    config file read and each defaults list built once), which tests/test_composition.py holds to Hydra's own
    result: a tenth of the time of composing each from nothing."""
    from render.compose.composition import composed_once

    with composed_once():
        yield


FAST_MODELS = ("model=tiny ", "model=shapes ")  # what the tests and the demo render: every option, in the default run


def _tier(name: str) -> object:
    """Each model's own config, and every option of the models the tests and the demo render, in the default run;
    the rest of the cross product (every other model with every option: 468 configs, 0.2 s each) in the slow tier,
    which CI runs."""
    fast = name.endswith("device=cpu") or name.startswith(FAST_MODELS)
    return name if fast else pytest.param(name, marks=pytest.mark.slow)


@pytest.mark.parametrize("name", [_tier(name) for name in sorted(PINNED)])
def test_the_cell_key_of_a_shipped_config_is_pinned(name: str) -> None:
    assert name in cases(), f"{name!r} is pinned but no longer a shipped config"
    assert keys_of(cases()[name]) == PINNED[name]


def test_the_pins_cover_the_defaults_of_every_model() -> None:
    assert {name for name in cases() if name.endswith("device=cpu")} <= set(PINNED)


if __name__ == "__main__":
    import sys

    pins = {} if "--repin" in sys.argv else dict(PINNED)
    added = {name: keys_of(o) for name, o in cases().items() if name not in pins}
    PINS.write_text(json.dumps({**pins, **added}, indent=1, sort_keys=True) + "\n")
    print(f"pinned {len(added)} more configs in {PINS}")
