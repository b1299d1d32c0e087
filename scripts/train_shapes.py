"""Train the shapes model on CPU, resumably, and export its EMA weights into the package.

    nice -n 10 python scripts/train_shapes.py                     # the shipped run (about an hour on 2 cores)
    nice -n 10 python scripts/train_shapes.py --until 300 --evaluate 20   # a pilot: 300 steps, then check 20 samples
    python scripts/train_shapes.py --export                       # write the EMA weights to render/models/shapes/weights/

A run checkpoints into --workdir every --checkpoint-every steps; running the same command again
resumes from the last checkpoint (the batches are seeded per step, so the result is the same as
an uninterrupted run). --export writes the pipeline with `save_pretrained` (float16 safetensors)
once training reached --steps (or --until).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

DEFAULT_WORKDIR = Path("outputs/shapes-train")


def parse_args(argv: list[str]):
    from render.models.shapes.pipeline import ShapesArch
    from render.models.shapes.train import TrainConfig

    defaults, arch = TrainConfig(), ShapesArch()
    parser = argparse.ArgumentParser(description="Train the shapes model (render/models/shapes) on CPU.")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="checkpoint folder (resumed when it holds one)")
    parser.add_argument("--steps", type=int, default=defaults.steps, help="optimiser steps of the whole run (LR schedule length)")
    parser.add_argument("--until", type=int, default=None, help="stop at this step (the run can be resumed later)")
    parser.add_argument("--batch", type=int, default=defaults.batch, help="images per step")
    parser.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="seed of the weights, data and noise")
    parser.add_argument("--caption-dropout", type=float, default=defaults.caption_dropout, help="fraction of empty captions")
    parser.add_argument("--checkpoint-every", type=int, default=defaults.checkpoint_every, help="steps between checkpoints")
    parser.add_argument("--patch", type=int, default=arch.patch, help="pixels per patch side")
    parser.add_argument("--width", type=int, default=arch.num_heads * arch.head_dim, help="transformer width (multiple of 32)")
    parser.add_argument("--layers", type=int, default=arch.num_layers, help="dual-stream blocks")
    parser.add_argument("--single-layers", type=int, default=arch.num_single_layers, help="single-stream blocks")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--export", nargs="?", const="package", default=None, metavar="FOLDER",
                        help="after training, save the EMA pipeline there (default: render/models/shapes/weights)")
    parser.add_argument("--evaluate", type=int, default=0, metavar="N",
                        help="after training, check the EMA model on the first N dev prompts (5 seeds each)")
    parser.add_argument("--eval-steps", type=int, default=28, help="inference steps for --evaluate")
    parser.add_argument("--eval-guidance", type=float, default=2.0, help="guidance scale for --evaluate")
    args = parser.parse_args(argv)
    if args.width % 32:
        parser.error(f"--width={args.width}: must be a multiple of 32 (heads of 32 channels)")
    config = TrainConfig(
        steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed, caption_dropout=args.caption_dropout,
        checkpoint_every=args.checkpoint_every,
        arch=dataclasses.replace(arch, patch=args.patch, num_heads=args.width // 32, num_layers=args.layers,
                                 num_single_layers=args.single_layers),
    )
    return args, config


def main(argv: list[str] | None = None) -> int:
    args, config = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import torch

    from render.models.shapes import WEIGHTS_DIR
    from render.models.shapes.train import ema_pipeline, export, train

    torch.set_num_threads(args.threads)
    try:
        state = train(config, args.workdir, until=args.until)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"trained {state.step} steps in {state.seconds / 60:.1f} min (checkpoint: {args.workdir})")
    pipe = ema_pipeline(state, config)
    if args.evaluate:
        from assess.metrics.tradeoff import as_loaded, compose_job, render_job, score

        job = compose_job("prompts=dev", f"prompts.limit={args.evaluate}", "seed=[0,1,2,3,4]",
                          f"steps={args.eval_steps}", f"guidance={args.eval_guidance}")
        samples = render_job(as_loaded(pipe), job)
        print(f"EMA model, dev, {args.eval_steps} steps, guidance {args.eval_guidance}: {score(samples).line()}")
    if args.export:
        if state.step < config.steps and args.until is None:
            print("error: training has not reached --steps; not exporting", file=sys.stderr)
            return 1
        folder = WEIGHTS_DIR if args.export == "package" else Path(args.export)
        print(f"exported the EMA pipeline to {export(pipe, folder)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
