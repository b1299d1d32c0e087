"""`python -m render`: compose a cell with Hydra and render it. Thin: all logic is in render.app."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

import render.schema  # noqa: F401  registers the config schemas and resolvers


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _task(cfg: DictConfig) -> dict:
    from render.app import render_task

    return render_task(cfg)


def main() -> None:
    import logging

    from render.app import cancellable

    # diffusers imports torchao when it is installed (the quant axis), and torchao warns at import about
    # kernels a CPU build lacks: noise on every render, whatever the cell.
    logging.getLogger("torchao").setLevel(logging.ERROR)

    with cancellable():
        _task()


if __name__ == "__main__":
    main()
