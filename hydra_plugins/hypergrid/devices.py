"""The GPUs a local launcher may use, decided before anything is written (the sweeper asks first)."""

from __future__ import annotations


def visible_gpus(configured: list[int] | None) -> list[int]:
    """`hydra.launcher.gpus`, else every CUDA GPU found; exits 2 naming the fix when there is none."""
    if configured:
        return list(configured)
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        from render.run.preflight import exit_with

        exit_with(RuntimeError("hydra/launcher=gpus found no CUDA GPU here; list them with hydra.launcher.gpus=[0,1], "
                               "or use the default in-process launcher"))
    return list(range(count))
