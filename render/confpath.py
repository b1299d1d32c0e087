"""Where configs are found: the package's own (`render/conf`), then the user's `./conf`.

The package ships its configs so they work from any folder. A `conf/` folder in the working
directory with the same group layout (`conf/model/my-flux.yaml`, `conf/experiment/<name>.yaml`,
`conf/hydra/launcher/<name>.yaml`) is added to Hydra's search path by the hypergrid
SearchPathPlugin (hydra_plugins/hypergrid/searchpath.py), after the package's: a user's option
with the name of a shipped one is shadowed by the shipped one, so give yours new names.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_CONF = Path(__file__).parent / "conf"
USER_CONF = "conf"  # relative to the working directory


def user_conf_dir() -> Path | None:
    """`./conf` of the working directory when it exists (and is not the package's own folder)."""
    folder = (Path.cwd() / USER_CONF).resolve()
    return folder if folder.is_dir() and folder != PACKAGE_CONF.resolve() else None


def conf_dirs() -> list[Path]:
    """Config folders in Hydra's search order."""
    user = user_conf_dir()
    return [PACKAGE_CONF] + ([user] if user else [])


def group_options(group: str) -> list[str]:
    """The option names of a config group (e.g. "experiment", "model") across every config folder."""
    return sorted({p.stem for folder in conf_dirs() for p in (folder / group).glob("*.yaml")})
