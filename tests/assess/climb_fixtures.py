"""Run directories of the demo experiment, written through the contract module (render.rundir) with known
pixels and the shipped manifests' texts.

Each cell's images are a known perturbation of the anchor's (tests/assess/conftest.py), so SSIM,
computed by the real metric when the test scores them, lands where the test wants it against the
demo's parity band (0.002): `shift(1)` or `shift(3)` is at parity, `noise(2)` is out.
"""

from __future__ import annotations

import copy
import io
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from render import rundir
from render.compose.splits import load_prompts
from tests.assess.conftest import Perturb, anchor_image, cell_key_of, identity

TEXTS = {p.id: p.text for p in load_prompts("dev.jsonl") + load_prompts("holdout.jsonl")}


@contextmanager
def hydra_state_kept() -> Iterator[None]:
    """Hydra's compose leaves process-wide singletons behind (its version base among them), which changes how
    later in-process Hydra runs behave (tests/launchers' contract suite): put them back."""
    from hydra.core.singleton import Singleton

    state = copy.deepcopy(Singleton.get_state())
    try:
        yield
    finally:
        Singleton.set_state(state)


@pytest.fixture
def restore_hydra() -> Iterator[None]:
    with hydra_state_kept():
        yield


MODEL = {"name": "tiny", "id": "hypergrid:tiny", "revision": None, "pipeline": "FluxPipeline", "family": "flux",
         "dtype": "float32", "max_sequence_length": 64}
ANCHOR_OVERRIDES = ["model=tiny", "steps=16", "attention=native", "cache=none", "scheduler=default"]


def demo_cell(steps: int, cache: str = "none", scheduler: str = "default") -> dict[str, Any]:
    cache_node: dict[str, Any] = {"name": cache}
    if cache == "fbcache":
        cache_node["threshold"] = 0.3
    return {"model": dict(MODEL), "device_kind": "cpu", "attention": "native", "cache": cache_node,
            "scheduler": scheduler, "steps": steps, "guidance": 3.5, "height": 32, "width": 32}


ANCHOR_CELL = demo_cell(16)
ANCHOR_KEY = cell_key_of(ANCHOR_CELL)


def dev_ids(n: int) -> list[str]:
    return [f"dev-{i:03d}" for i in range(n)]


def holdout_ids(n: int = 30) -> list[str]:
    return [f"holdout-{i:03d}" for i in range(n)]


@dataclass
class DemoRuns:
    """Writes runs of experiment `tiny-demo` under an output root."""

    root: Path
    counter: int = 0

    def sweep(self) -> Path:
        self.counter += 1
        path = self.root / "multirun" / "2026-11-30" / f"10-00-{self.counter:02d}-abcd"
        path.mkdir(parents=True, exist_ok=True)
        (path / "multirun.yaml").write_text("hydra: {}\n")
        return path

    def run(self, parent: Path, cell: dict[str, Any], prompts: list[str], *, perturb: Perturb = identity,
            latency: float = 0.1, split: str = "dev", final: bool = False, is_anchor: bool = False,
            failed: str | None = None, name: str | None = None, ref_s: float | None = None,
            drift: float | None = None, anchor_cell: dict[str, Any] | None = None) -> Path:
        """`ref_s`: the reference workload its job timed (render.run.measure); `drift`: that reference's drift over it;
        `anchor_cell`: the anchor this run compares with (the demo's by default)."""
        key = cell_key_of(cell)
        anchor_cell = anchor_cell or ANCHOR_CELL
        anchor_key = cell_key_of(anchor_cell)
        path = parent / (name or f"{self.counter}_{key}")
        (path / "images").mkdir(parents=True, exist_ok=True)
        run = {
            "schema": rundir.CONTRACT_VERSION, "cell_key": key, "cell": cell, "describe": f"tiny {cell['steps']} steps",
            "anchor": {"cell_key": anchor_key, "cell": anchor_cell, "overrides": ANCHOR_OVERRIDES,
                       "dir": f"anchors/tiny/{anchor_key}"},
            "is_anchor": is_anchor, "out_root": str(self.root),
            "prompts": {"name": split, "split": split, "file": f"{split}.jsonl", "ids": prompts},
            "seeds": [0], "overrides": [], "tag": "",
            "config": {"experiment": {"name": "tiny-demo", "final": final}},
            "versions": {}, "device": {"kind": "cpu"}, "git": {}, "host": socket.gethostname(), "pid": 999_999_999,
            "job": {"launcher": "inprocess", "slurm_job_id": None}, "started_at": "2026-11-30T10:00:00+00:00",
        }
        rundir.atomic_write_json(path / rundir.RUN_JSON, run)
        lines = []
        for i, prompt in enumerate(prompts):
            image = f"images/{prompt}__s0.png"
            buffer = io.BytesIO()
            Image.fromarray(perturb(anchor_image(prompt, 0), prompt, 0)).save(buffer, format="PNG")
            png = buffer.getvalue()
            rundir.atomic_write_bytes(path / image, png)
            text = TEXTS.get(prompt, f"prompt {prompt}")  # the shipped manifests' texts: identity is by content
            record = rundir.SampleRecord(
                cell_key=key, prompt_id=prompt, prompt=text, seed=0, image=image, width=32, height=32,
                latency_s=latency, warmup=i == 0, steps=cell["steps"], s_per_step=latency / cell["steps"],
                peak_mem_bytes=1000, mem_kind="cpu-rss-hwm", load_s=0.0, reused_from=None,
                finished_at="2026-11-30T10:00:01+00:00", sha256=rundir.digest(png), bytes=len(png),
                prompt_sha=rundir.sample_text_hash(text), ref_s=ref_s)
            rundir.append_record(path / rundir.SAMPLES, record.as_dict())
            lines.append(record)
        if failed:
            (path / "FAILED.json").write_text(json.dumps({"category": failed, "message": f"{failed} here",
                                                          "traceback": "", "failed_at": "2026-11-30T10:00:02+00:00"}))
        else:
            timing = {"timing": {"repeats": 1, "drift": drift}} if drift is not None else {}
            (path / "DONE.json").write_text(json.dumps({"finished_at": "2026-11-30T10:00:02+00:00",
                                                        "n_samples": len(lines), **timing}))
        return path

    def anchor(self, prompts: list[str], latency: float = 0.6, split: str = "dev", final: bool = False,
               ref_s: float | None = None) -> Path:
        self.counter += 1
        parent = self.root / "anchors" / "tiny" / ANCHOR_KEY
        return self.run(parent, ANCHOR_CELL, prompts, latency=latency, split=split, final=final, is_anchor=True,
                        name=f"2026-11-30_10-00-{self.counter:02d}-ab12", ref_s=ref_s)
