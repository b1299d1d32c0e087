"""`python -m render --help`: the config groups with a line on what each decides, and their options.

Hydra's own listing ($APP_CONFIG_GROUPS) has no word on what a group is for, and lists the schemas'
own group (`schema/`, render/compose/schema.py) beside the real ones. The help template in conf/config.yaml
calls the `hg_help_groups` resolver instead, which lists the option
files of the package's conf/ and of the user's ./conf (render.compose.confpath), plus launchers
registered in the ConfigStore. The axis groups' lines and the knobs come from render.axes.AXES.
"""

from __future__ import annotations


def groups() -> dict[str, str]:
    """Config group -> what it decides: the model, every axis group (render.axes.AXES, in order), the rest."""
    from render import axes

    return {
        "model": "the diffusion model: weights, pipeline class, dtype, default steps/guidance/size, its anchor",
        **{axis.name: axis.help for axis in axes.GROUPS},
        "prompts": "the prompt manifest (split) rendered: smoke, dev, holdout; prompts.limit=N renders the first N",
        "experiment": "a named hill climb: its axes, splits, quality band and budget (assess climb <name>)",
        "hydra/launcher": "where the cells run: this process, one job per GPU, or SLURM (docs/launchers.md)",
    }


def group_options(group: str) -> list[str]:
    """Option names of `group`: files in every config folder and ConfigStore entries (a launcher a plugin
    registers). The schemas are in a group of their own (`schema/`), never among a group's options."""
    from hydra.core.config_store import ConfigStore

    from render.compose import confpath

    options = set(confpath.group_options(group))
    try:
        options.update(name.removesuffix(".yaml") for name in ConfigStore.instance().list(group))
    except OSError:  # the ConfigStore has no such group
        pass
    return sorted(options)


def groups_help() -> str:
    """Each group with its line and its options, then the on/off knobs (key=true|false)."""
    from render import axes

    described = groups()
    width = max(len(g) for g in described)
    lines = []
    for group, description in described.items():
        lines.append(f"  {group:<{width}}  {description}")
        lines.append(f"  {'':<{width}}    {', '.join(group_options(group))}")
    lines.append("\n== On/off knobs (knob=true|false, each in the cell key) ==")
    knob_width = max(len(k.name) for k in axes.KNOBS)
    lines += [f"  {knob.name:<{knob_width}}  {knob.help}" for knob in axes.KNOBS]
    return "\n".join(lines)
