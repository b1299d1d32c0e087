"""Fixtures: run directories written through the contract module (render.rundir) with known images.

`outputs` is a RunFactory on a temporary output root. Its records are the contract's own types
(SampleRecord, sweep_cell, write_done/write_failed), so drift between renderer and reader cannot
hide here; only the pixels are made up: the anchor cell (steps=28, no cache) gets a deterministic
image per (prompt, seed), other cells a known perturbation of it, so fidelity metrics have known
values. Tests that need what the renderer really writes use `rendered` (tests/assess/test_rendered.py).
"""

from __future__ import annotations

import copy
import io
import json
import os
import socket
import subprocess
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from render import rundir
from render.rundir import cell_key_of

# No hub access from any test, set before huggingface_hub reads its constants.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

Perturb = Callable[[np.ndarray, str, int], np.ndarray]

PROMPTS = {
    "smoke-000": "a red circle",
    "smoke-001": "a blue square",
    "smoke-002": "a green triangle",
    "smoke-003": "a yellow star",
}
SIZE = 32
BASE_CELL: dict[str, Any] = {
    "model": {"name": "tiny", "id": "/models/tiny", "revision": "0", "pipeline": "FluxPipeline", "dtype": "float32"},
    "device_kind": "cpu",
    "attention": "native",
    "cache": {"name": "none"},
    "scheduler": "default",
    "steps": 28,
    "guidance": 3.5,
    "height": SIZE,
    "width": SIZE,
}
ANCHOR_OVERRIDES = ["steps=28", "cache=none", "attention=native", "scheduler=default"]


def make_cell(steps: int = 28, cache: str = "none", attention: str = "native", scheduler: str = "default",
              size: int = SIZE) -> dict[str, Any]:
    cell = copy.deepcopy(BASE_CELL)
    cell.update(steps=steps, attention=attention, scheduler=scheduler, height=size, width=size)
    cell["cache"] = {"name": cache} if cache == "none" else {"name": cache, "threshold": 0.05}
    return cell


ANCHOR_CELL = make_cell()
ANCHOR_KEY = cell_key_of(ANCHOR_CELL)


def anchor_image(prompt_id: str, seed: int, size: int = SIZE) -> np.ndarray:
    """A deterministic image per (prompt, seed): gradients plus noise, values in [20, 235]."""
    rng = np.random.default_rng(zlib.crc32(f"{prompt_id}/{seed}".encode()))
    y, x = np.mgrid[0:size, 0:size] / max(size - 1, 1)
    base = np.stack([x, y, (x + y) / 2], axis=-1) * 150 + 40
    noise = rng.normal(0, 12, size=(size, size, 3))
    return np.clip(base + noise, 20, 235).astype(np.uint8)


def identity(image: np.ndarray, prompt_id: str, seed: int) -> np.ndarray:
    return image.copy()


def shift(delta: int) -> Perturb:
    """Add `delta` to every value of the red channel: MSE = delta**2 / 3, so PSNR is known."""

    def perturb(image: np.ndarray, prompt_id: str, seed: int) -> np.ndarray:
        out = image.astype(np.int16)
        out[..., 0] += delta
        return np.clip(out, 0, 255).astype(np.uint8)

    return perturb


def noise(sigma: float) -> Perturb:
    def perturb(image: np.ndarray, prompt_id: str, seed: int) -> np.ndarray:
        rng = np.random.default_rng(zlib.crc32(f"noise/{prompt_id}/{seed}".encode()))
        return np.clip(image + rng.normal(0, sigma, image.shape), 0, 255).astype(np.uint8)

    return perturb


def expected_psnr_shift(delta: int) -> float:
    return float(10 * np.log10(255.0**2 / (delta**2 / 3)))


def _stamp(path: Path, key: str, when: str = "2026-11-30T10:05:12+00:00") -> None:
    """Date a terminal record as the fixtures' clock says (durations in the tests are computed from it)."""
    rundir.atomic_write_json(path, {**json.loads(path.read_text()), key: when})


def of_pipeline(cell: dict[str, Any], pipeline: str | None) -> dict[str, Any]:
    """The cell of the model with this pipeline class (None: the cell as it is): a metric made for one model reads
    the cell's model.pipeline (render.compose.metric_registry.MetricSpec.applies_to)."""
    if pipeline is None:
        return cell
    return {**cell, "model": {**cell["model"], "pipeline": pipeline}}


@dataclass
class RunFactory:
    root: Path  # the output root
    host: str = field(default_factory=socket.gethostname)
    pipeline: str | None = None  # every cell's model.pipeline, anchors' too (None: the fixtures' FluxPipeline)

    @property
    def anchor_cell(self) -> dict[str, Any]:
        return of_pipeline(ANCHOR_CELL, self.pipeline)

    @property
    def anchor_key(self) -> str:
        return cell_key_of(self.anchor_cell)

    def sweep(self, name: str = "2026-11-30/10-04-12-3fa2", cells: list[Any] | None = None) -> Path:
        path = self.root / "multirun" / name
        path.mkdir(parents=True, exist_ok=True)
        (path / "multirun.yaml").write_text("hydra: {}\n")
        if cells is not None:
            entries = []
            for num, cell in enumerate(cells):  # what the tests leave out, as the sweeper would fill it in
                defaults = {"num": num, "overrides": [], "cell_key": "k", "describe": "tiny", "expected_samples": 8}
                entry = {**defaults, **cell}
                entry.setdefault("subdir", f"{entry['num']}_{','.join(entry['overrides'])}")
                entries.append(rundir.sweep_cell(**entry))
            rundir.write_sweep(path, "InProcessLauncher", entries)
        return path

    def run(
        self,
        parent: Path,
        name: str,
        cell: dict[str, Any] | None = None,
        *,
        overrides: list[str] | None = None,
        is_anchor: bool = False,
        perturb: Perturb = identity,
        prompts: dict[str, str] | None = None,
        seeds: tuple[int, ...] = (0, 1),
        terminal: str | None = "done",
        category: str = "oom",
        n_done: int | None = None,
        latency: float = 0.1,
        corrupt: tuple[tuple[str, int], ...] = (),
        reused_from: str | None = None,
        pid: int | None = None,
        host: str | None = None,
        slurm_job_id: str | None = None,
        started_at: str = "2026-11-30T10:04:12+00:00",
        split: str = "smoke",
        categories: dict[str, str] | None = None,
        stages: tuple[float, float, float] | None = None,
    ) -> Path:
        """Write one run directory. `n_done` cuts it after that many samples; `stages`: each sample's text, denoise
        and VAE seconds as shares of its latency (None: a record without a split, as before issue 63)."""
        cell = of_pipeline(cell if cell is not None else ANCHOR_CELL, self.pipeline)
        anchor_key = self.anchor_key
        prompts = prompts if prompts is not None else PROMPTS
        key = cell_key_of(cell)
        path = parent / name
        (path / "images").mkdir(parents=True, exist_ok=True)
        (path / ".hydra").mkdir(exist_ok=True)
        overrides = overrides if overrides is not None else (ANCHOR_OVERRIDES if is_anchor else [])
        (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        run = {
            "schema": rundir.CONTRACT_VERSION, "cell_key": key, "cell": cell,
            "describe": f"tiny {cell['attention']} {cell['cache']['name']} {cell['scheduler']} {cell['steps']} steps",
            "anchor": {"cell_key": anchor_key, "cell": self.anchor_cell, "overrides": ANCHOR_OVERRIDES,
                       "dir": f"anchors/tiny/{anchor_key}"},
            "out_root": str(self.root),
            "is_anchor": is_anchor,
            "prompts": {"name": split, "split": split, "file": f"/prompts/{split}.jsonl", "ids": list(prompts)},
            "seeds": list(seeds), "overrides": overrides, "config": {},
            "versions": {"python": "3.11.7"}, "device": {"kind": "cpu", "name": "cpu", "count": 1},
            "git": {"revision": "abc", "dirty": False},
            "host": host or self.host, "pid": pid if pid is not None else 999_999_999,
            "job": {"launcher": "slurm" if slurm_job_id else "inprocess", "slurm_job_id": slurm_job_id},
            "started_at": started_at,
        }
        rundir.atomic_write_json(path / rundir.RUN_JSON, run)
        lines = []
        pairs = [(pid_, seed) for seed in seeds for pid_ in prompts]
        size = cell["height"]
        for i, (prompt_id, seed) in enumerate(pairs[:n_done] if n_done is not None else pairs):
            image = perturb(anchor_image(prompt_id, seed, size), prompt_id, seed)
            rel = f"{rundir.IMAGES}/{rundir.image_name(prompt_id, seed)}"
            buffer = io.BytesIO()
            Image.fromarray(image).save(buffer, format="PNG")
            png = buffer.getvalue()
            rundir.atomic_write_bytes(path / rel, png[: len(png) // 2] if (prompt_id, seed) in corrupt else png)
            lat = latency * (1 + 0.01 * i)
            record = rundir.SampleRecord(
                cell_key=key, prompt_id=prompt_id, prompt=prompts[prompt_id], seed=seed, image=rel, width=size,
                height=size, latency_s=lat, warmup=i == 0, steps=cell["steps"], s_per_step=lat / cell["steps"],
                peak_mem_bytes=1000 + i, mem_kind="cpu-rss-hwm", load_s=1.5 if not reused_from else 0.0,
                reused_from=reused_from, finished_at="2026-11-30T10:04:14+00:00", sha256=rundir.digest(png),
                bytes=len(png), prompt_sha=rundir.sample_text_hash(prompts[prompt_id]),
                category=(categories or {}).get(prompt_id),
                **({} if stages is None else dict(zip(("text_s", "denoise_s", "vae_s"), (lat * f for f in stages)))))
            rundir.append_record(path / rundir.SAMPLES, record.as_dict())
            lines.append(record)
        (path / rundir.LOG).write_text("log\n")
        if terminal == "done":
            rundir.write_done(path, n_samples=len(lines), n_rendered=len(lines), n_reused=0, wall_s=60.0, gpu_s=1.0)
            _stamp(path / rundir.DONE, "finished_at")
        elif terminal == "failed":
            rundir.write_failed(path, category, f"{category} while rendering", "Traceback ...",
                                sample={"prompt_id": "smoke-001", "seed": 0}, n_samples_done=len(lines))
            _stamp(path / rundir.FAILED, "failed_at")
        return path

    def anchor(self, parent: Path, name: str = "0_anchor", **kwargs: Any) -> Path:
        return self.run(parent, name, ANCHOR_CELL, is_anchor=True, **kwargs)

    def stored_anchor(self, name: str = "2026-11-30_10-04-12-ab12", **kwargs: Any) -> Path:
        """The anchor run where the renderer keeps it: <out_root>/anchors/<model>/<anchor key>/<stamp>."""
        return self.anchor(self.root / "anchors" / "tiny" / self.anchor_key, name, **kwargs)


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No hub access, no stray index: every test names its index."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HYPERGRID_INDEX", str(tmp_path / "default-index.db"))
    monkeypatch.delenv("HYPERGRID_CLIP_MODEL", raising=False)


@pytest.fixture
def outputs(tmp_path: Path) -> RunFactory:
    return RunFactory(tmp_path / "outputs")


@pytest.fixture
def shapes_outputs(tmp_path: Path) -> RunFactory:
    """Run directories of the shapes model (its pipeline class): what the shapes metrics apply to."""
    from render.compose.metric_registry import SHAPES_PIPELINE

    return RunFactory(tmp_path / "outputs", pipeline=SHAPES_PIPELINE)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "index.db"


@pytest.fixture
def sweep_with_anchor(outputs: RunFactory) -> Path:
    """A sweep: the anchor, an identical cell (attention), a shifted cell (steps=8), a failed cell."""
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_steps=28", latency=0.2)
    outputs.run(sweep, "1_attention=sdpa", make_cell(attention="sdpa"), overrides=["attention=sdpa"], latency=0.2)
    outputs.run(sweep, "2_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(10), latency=0.05)
    outputs.run(sweep, "3_steps=4", make_cell(steps=4), overrides=["steps=4"], perturb=noise(20),
                terminal="failed", n_done=3, latency=0.03)
    return sweep


def _tiny_clip(folder: Path) -> Path:
    import torch
    import transformers
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    transformers.logging.set_verbosity_error()
    vocab: dict[str, int] = {"<|startoftext|>": 0, "<|endoftext|>": 1, "!": 2}
    for c in "abcdefghijklmnopqrstuvwxyz":
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    image_processor = CLIPImageProcessor(size={"shortest_edge": SIZE}, crop_size={"height": SIZE, "width": SIZE})
    processor = CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer)
    small = dict(hidden_size=32, intermediate_size=37, num_attention_heads=4, num_hidden_layers=2, projection_dim=16)
    config = CLIPConfig(
        text_config=dict(vocab_size=len(vocab), max_position_embeddings=77, eos_token_id=1, bos_token_id=0,
                         pad_token_id=1, **small),
        vision_config=dict(image_size=SIZE, patch_size=8, **small),
        projection_dim=16,
    )
    torch.manual_seed(0)
    model_dir = folder / "tiny-clip"
    CLIPModel(config).save_pretrained(model_dir)
    processor.save_pretrained(model_dir)
    return model_dir


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random CLIP model saved to a local folder (no hub)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return _tiny_clip(tmp_path_factory.mktemp("clip"))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real file system of 2 MiB (tmpfs; needs the right to mount, else the test is skipped)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(mount)], check=False)  # still open somewhere: detach it all the same
