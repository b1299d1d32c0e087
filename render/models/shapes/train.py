"""Training the shapes pipeline on CPU: rectified flow, caption dropout, EMA, resumable checkpoints.

Every step's batch (captions, images, noise, noise levels, dropped captions) is drawn from
generators seeded with (seed, step), so a run resumed from a checkpoint continues exactly as the
uninterrupted run would have. `export` writes the EMA weights as a pipeline folder
(`save_pretrained`, safetensors in float16), atomically.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from render.models.shapes.data import sample_batch
from render.rundir.files import file_mode
from render.models.shapes.pipeline import ShapesArch, ShapesPipeline, build_shapes_pipeline, image_ids, patchify

CHECKPOINT = "checkpoint.pt"
log = logging.getLogger("render.shapes.train")


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 5000  # optimiser steps in the whole run (the learning-rate schedule spans them)
    batch: int = 64
    lr: float = 6e-4  # peak learning rate (AdamW)
    warmup: int = 200  # linear warm-up steps, then cosine decay to lr * min_lr_ratio at `steps`
    min_lr_ratio: float = 0.02
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    ema_decay: float = 0.999  # the exported weights are this exponential moving average
    caption_dropout: float = 0.1  # fraction of captions replaced by the empty caption (for guidance)
    seed: int = 0  # weights, data, noise
    checkpoint_every: int = 250  # steps between checkpoints
    arch: ShapesArch = field(default_factory=ShapesArch)


def learning_rate(config: TrainConfig, step: int) -> float:
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = min(1.0, (step - config.warmup) / max(1, config.steps - config.warmup))
    floor = config.lr * config.min_lr_ratio
    return floor + (config.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass
class TrainState:
    pipe: ShapesPipeline
    ema: dict[str, torch.Tensor]  # "transformer.<name>" / "text_encoder.<name>" -> EMA weights
    optimizer: torch.optim.Optimizer
    step: int = 0
    seconds: float = 0.0  # training wall time so far, over all resumptions


def new_state(config: TrainConfig) -> TrainState:
    pipe = build_shapes_pipeline(config.arch, seed=config.seed)
    parameters = _trainable(pipe)
    optimizer = torch.optim.AdamW(parameters.values(), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.99))
    ema = {name: p.detach().clone() for name, p in parameters.items()}
    return TrainState(pipe, ema, optimizer)


def _trainable(pipe: ShapesPipeline) -> dict[str, torch.nn.Parameter]:
    named = {f"transformer.{n}": p for n, p in pipe.transformer.named_parameters()}
    named.update({f"text_encoder.{n}": p for n, p in pipe.text_encoder.named_parameters()})
    return named


def training_batch(config: TrainConfig, step: int) -> dict[str, Any]:
    """Step `step`'s images (B x 3 x H x W in [-1, 1]), captions (some dropped), noise and noise levels."""
    rng = np.random.default_rng([config.seed, step])
    images, captions = sample_batch(rng, config.batch)
    drop = rng.random(config.batch) < config.caption_dropout
    captions = ["" if dropped else caption for caption, dropped in zip(captions, drop)]
    generator = torch.Generator().manual_seed(int(rng.integers(0, 2**62)))
    pixels = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 127.5 - 1.0
    noise = torch.randn(pixels.shape, generator=generator)
    sigma = torch.sigmoid(torch.randn(config.batch, generator=generator))  # logit-normal(0, 1) noise levels
    return {"pixels": pixels, "captions": captions, "noise": noise, "sigma": sigma}


def flow_loss(pipe: ShapesPipeline, batch: dict[str, Any]) -> torch.Tensor:
    """Rectified-flow loss: predict noise - image at x_sigma = (1 - sigma) * image + sigma * noise."""
    pixels, noise, sigma = batch["pixels"], batch["noise"], batch["sigma"]
    s = sigma.view(-1, 1, 1, 1)
    noisy = (1.0 - s) * pixels + s * noise
    patch = pipe.patch
    hidden, pooled = pipe.text_encoder(pipe.text_encoder.tokenize(batch["captions"]))
    ids = image_ids(pixels.shape[2], pixels.shape[3], patch, pixels.device)
    prediction = pipe.denoise(patchify(noisy, patch), sigma, hidden, pooled, ids)
    return torch.nn.functional.mse_loss(prediction, patchify(noise - pixels, patch))


def train_step(state: TrainState, config: TrainConfig) -> float:
    parameters = _trainable(state.pipe)
    for group in state.optimizer.param_groups:
        group["lr"] = learning_rate(config, state.step)
    loss = flow_loss(state.pipe, training_batch(config, state.step))
    state.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(parameters.values()), config.grad_clip)
    state.optimizer.step()
    decay = min(config.ema_decay, (1 + state.step) / (10 + state.step))
    with torch.no_grad():
        for name, p in parameters.items():
            state.ema[name].lerp_(p.detach(), 1.0 - decay)
    state.step += 1
    return float(loss.detach())


def save_checkpoint(state: TrainState, config: TrainConfig, workdir: Path) -> Path:
    """Write workdir/checkpoint.pt atomically (temporary file, fsync, rename)."""
    workdir.mkdir(parents=True, exist_ok=True)
    final = workdir / CHECKPOINT
    payload = {
        "config": dataclasses.asdict(config),
        "step": state.step,
        "seconds": state.seconds,
        "model": {name: p.detach().clone() for name, p in _trainable(state.pipe).items()},
        "ema": state.ema,
        "optimizer": state.optimizer.state_dict(),
    }
    fd, tmp = tempfile.mkstemp(prefix=f".{CHECKPOINT}.", dir=workdir)
    try:
        os.fchmod(fd, file_mode())  # mkstemp makes 0600; the checkpoint follows the umask like every other file
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return final


def load_checkpoint(config: TrainConfig, workdir: Path) -> TrainState | None:
    """The state saved in workdir, or None when there is none; ValueError when it was another run's."""
    path = workdir / CHECKPOINT
    if not path.is_file():
        return None
    payload = torch.load(path, map_location="cpu", weights_only=True)
    saved, wanted = (_result_settings(c) for c in (payload["config"], dataclasses.asdict(config)))
    if saved != wanted:
        changed = sorted(k for k in saved.keys() | wanted.keys() if saved.get(k) != wanted.get(k))
        raise ValueError(f"{path} was written with other settings ({', '.join(changed)} differ); "
                         f"resume with the same settings, or pass another --workdir to start afresh")
    state = new_state(config)
    with torch.no_grad():
        for name, p in _trainable(state.pipe).items():
            p.copy_(payload["model"][name])
    state.ema = payload["ema"]
    state.optimizer.load_state_dict(payload["optimizer"])
    state.step, state.seconds = payload["step"], payload["seconds"]
    return state


def _result_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The settings a checkpoint must share with the run resuming it: all but how often it checkpoints."""
    return {k: v for k, v in config.items() if k != "checkpoint_every"}


def ema_pipeline(state: TrainState, config: TrainConfig) -> ShapesPipeline:
    """A fresh pipeline holding the EMA weights, in eval mode."""
    pipe = build_shapes_pipeline(config.arch, seed=config.seed)
    with torch.no_grad():
        for name, p in _trainable(pipe).items():
            p.copy_(state.ema[name])
    pipe.transformer.eval()
    pipe.text_encoder.eval()
    return pipe


def export(pipe: ShapesPipeline, folder: Path, dtype: torch.dtype = torch.float16) -> Path:
    """`save_pretrained` the pipeline into `folder` (weights in `dtype`), replacing it atomically."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.export-", dir=folder.parent))
    old = folder.with_name(f".{folder.name}.old")
    try:
        with _diffusers_quiet():  # .to(float16) warns about modules to keep in float32; these have none
            pipe.to(dtype).save_pretrained(tmp, safe_serialization=True)
            pipe.to(torch.float32)
        _make_readable(tmp)
        if folder.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.rename(folder, old)
        os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return folder


@contextlib.contextmanager
def _diffusers_quiet():
    from diffusers.utils import logging as diffusers_logging

    level = diffusers_logging.get_verbosity()
    diffusers_logging.set_verbosity_error()
    try:
        yield
    finally:
        diffusers_logging.set_verbosity(level)


def _make_readable(folder: Path) -> None:
    """Package data: folders 0755, files 0644 (mkdtemp and safetensors create them private)."""
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def train(config: TrainConfig, workdir: Path, *, until: int | None = None, progress: bool = True) -> TrainState:
    """Train from workdir's checkpoint (or from scratch) up to step `until` (default: config.steps)."""
    from tqdm import tqdm

    state = load_checkpoint(config, workdir) or new_state(config)
    end = min(config.steps, until if until is not None else config.steps)
    if state.step:
        log.info("resuming from step %d (%.0f s trained) in %s", state.step, state.seconds, workdir)
    state.pipe.transformer.train()
    bar = tqdm(total=end, initial=state.step, desc="shapes training", unit="step", disable=not progress, mininterval=5)
    smoothed = None
    try:
        while state.step < end:
            started = time.perf_counter()
            loss = train_step(state, config)
            state.seconds += time.perf_counter() - started
            smoothed = loss if smoothed is None else 0.98 * smoothed + 0.02 * loss
            bar.update(1)
            bar.set_postfix(loss=f"{smoothed:.4f}", lr=f"{learning_rate(config, state.step):.1e}", refresh=False)
            if state.step % config.checkpoint_every == 0 or state.step == end:
                save_checkpoint(state, config, workdir)
                log.info("step %d: loss %.4f (smoothed), %.0f s trained, checkpoint saved", state.step, smoothed, state.seconds)
    finally:
        bar.close()
    return state
