"""`python -m render --help`: the config groups with a line on what each decides, and their options.

Hydra's own listing ($APP_CONFIG_GROUPS) shows the schemas registered in the ConfigStore
(`model_schema`, ...) as if they were options, with no word on what a group is for. The help
template in conf/config.yaml calls the `hg_help_groups` resolver instead, which lists the option
files of the package's conf/ and of the user's ./conf (render.confpath), plus launchers
registered in the ConfigStore.
"""

from __future__ import annotations

GROUPS: dict[str, str] = {
    "model": "the diffusion model: weights, pipeline class, dtype, default steps/guidance/size, its anchor",
    "attention": "the attention backend diffusers runs the denoiser with",
    "cache": "the cache method that skips denoiser work between steps (its keys: cache.<key>=..., render/caches/<name>.py)",
    "scheduler": "the sampler; default keeps the pipeline's own",
    "compile": "torch.compile of the denoiser: none, regional (its repeated blocks) or full (docs/axes.md)",
    "quant": "weight quantization applied at load: torchao int8/fp8, quanto, bitsandbytes nf4 (docs/axes.md)",
    "offload": "moving weights off the GPU between uses: model, group or layerwise offload (docs/axes.md)",
    "prompts": "the prompt manifest (split) rendered: smoke, dev, holdout; prompts.limit=N renders the first N",
    "experiment": "a named hill climb: its axes, splits, quality band and budget (assess climb <name>)",
    "hydra/launcher": "where the cells run: this process, one job per GPU, or SLURM (docs/launchers.md)",
}
SCHEMA_SUFFIX = "_schema"


def group_options(group: str) -> list[str]:
    """Option names of `group`: files in every config folder and ConfigStore entries, schemas left out."""
    from hydra.core.config_store import ConfigStore

    from render import confpath

    options = set(confpath.group_options(group))
    try:
        options.update(name.removesuffix(".yaml") for name in ConfigStore.instance().list(group))
    except OSError:  # the ConfigStore has no such group
        pass
    return sorted(o for o in options if not o.endswith(SCHEMA_SUFFIX))


def groups_help() -> str:
    width = max(len(g) for g in GROUPS)
    lines = []
    for group, description in GROUPS.items():
        lines.append(f"  {group:<{width}}  {description}")
        lines.append(f"  {'':<{width}}    {', '.join(group_options(group))}")
    return "\n".join(lines)
