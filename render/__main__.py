"""`python -m render`: compose a cell with Hydra and render it. Thin: all logic is in render.app."""

from __future__ import annotations

from typing import Any

import hydra
from omegaconf import DictConfig

import render.compose.schema  # noqa: F401  registers the config schemas and resolvers


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _task(cfg: DictConfig) -> list[dict[str, Any]]:
    from render.app import render_task

    return render_task(cfg)


def main() -> None:
    import gc

    from render.app import cancellable
    from render.rundir.redact import install

    install()  # no log line of this process carries a credential (render.rundir.redact)

    import os
    import sys

    from render.run.secrets import SECRETS_ENV, adopt_secrets

    # a detached sweep's driver: its credentials, and the overrides that carry one (kept out of its Ray job's info)
    sys.argv.extend(adopt_secrets(os.environ.pop(SECRETS_ENV, None), remove=True))

    from render.run.quiet import filter_third_party_warnings

    filter_third_party_warnings()  # torchao's kernels, diffusers' deprecations: render.run.quiet (HYPERGRID_VERBOSE=1 shows them)

    from render.compose.composition import composed_once
    from render.compose.mistakes import answered
    from render.run.preflight import passed

    # What the imports made (modules, classes, registered schemas) lives as long as the process: out of the
    # collector's sight, its full collections and the one at exit skip it (about 7 % of a do-nothing re-run).
    gc.freeze()
    with cancellable(), composed_once(), answered():  # an option or key that does not exist: one line, exit 2
        try:
            _task()
        except SystemExit as exit:
            # Hydra ends with 1 whatever failed; before preflight passed, that was a config that does not
            # compose (steps=abc, cache=turbo, an unknown key): bad input, which the CLI promises as exit 2.
            if exit.code == 1 and not passed():
                raise SystemExit(2) from None
            raise


if __name__ == "__main__":
    main()
