"""Where configs are found: the package's own (`render/conf`), then the user's `./conf`.

The package ships its configs so they work from any folder. A `conf/` folder in the working
directory with the same group layout (`conf/model/my-flux.yaml`, `conf/experiment/<name>.yaml`,
`conf/hydra/launcher/<name>.yaml`) is added to Hydra's search path by the hypergrid
SearchPathPlugin (hydra_plugins/hypergrid/searchpath.py), after the package's: a user's option
with the name of a shipped one would be shadowed by the shipped one. For an experiment that would
climb under another decision rule than the user wrote, so it is refused, naming both files
(`shadowing`): give yours a new name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PACKAGE_CONF = Path(__file__).parent.parent / "conf"
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


def shadowing(group: str, name: str) -> tuple[Path, Path] | None:
    """(the shipped file, the user's) when the user's `./conf/<group>/<name>.yaml` has the name of a shipped option:
    Hydra reads the shipped one, the user's is never composed."""
    user = user_conf_dir()
    shipped, mine = PACKAGE_CONF / group / f"{name}.yaml", (user / group / f"{name}.yaml") if user else None
    return (shipped, mine) if mine is not None and shipped.is_file() and mine.is_file() else None


def shadowed_message(group: str, name: str, files: tuple[Path, Path]) -> str:
    return (f"{group}={name}: your {files[1]} has the name of the shipped {files[0]}, which Hydra reads first: yours "
            f"would never be used. Rename yours (e.g. conf/{group}/my-{name}.yaml, with {group}.name: my-{name} "
            "where the file names itself), or remove it to use the shipped one")


def compose_option(group: str, option: str) -> Any:
    """One option of a config group as Hydra composes it (its defaults list, a schema, an option it extends), in
    Hydra's search order: the one config reader. Inside a running Hydra app its own search path is used; elsewhere
    the package's and the user's folders. None when no config folder has the option. The caller has imported
    render.compose.schema (it registers the schemas an option's defaults name)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if option not in group_options(group):
        return None
    overrides = [f"+{group}={option}"]
    if GlobalHydra.instance().is_initialized():
        return compose(config_name=None, overrides=overrides)[group]
    with initialize_config_dir(config_dir=str(PACKAGE_CONF), version_base="1.3"):
        return compose(config_name=None, overrides=overrides)[group]
