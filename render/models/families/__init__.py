"""Model families: one module each (`render/models/families/<family>.py`, exporting `FAMILY`).

A family says what its models take: the diffusers pipeline classes, the schedulers of the scheduler
axis, the caches its pipeline cannot run although diffusers can hook them, how the guidance knob enters
a pipeline call, and its tiny twin (render.models.twins). The axes and preflight read these from here;
what else a denoiser takes of the cache and compile axes is read from its diffusers classes
(render.axes.caches, render.axes.compile), so it cannot drift from them.
Adding a family is one module here (exporting `FAMILY`) plus its model YAMLs in render/conf/model/ (docs/models.md).
Imports no torch: a family module imports its diffusers classes only when its twin is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional

from render.errors import RenderError
from render.models.families._tokens import Shape, packed_image
from render.models.twins import Twin
from render.compose.registry import Registry


class FamilyUnavailable(RenderError, ValueError):
    """A model family no module declares, or a pipeline class its family does not have."""


@dataclass(frozen=True)
class SchedulerSpec:
    cls: str  # diffusers scheduler class name
    kwargs: Dict[str, Any] = field(default_factory=dict)  # overrides of the pipeline's scheduler config


def guidance_scale(guidance: float) -> Dict[str, Any]:
    """The usual way a pipeline takes the guidance knob: `guidance_scale` (CFG, or the distilled guidance embedding)."""
    return {"guidance_scale": guidance}


@dataclass(frozen=True)
class Family:
    name: str  # the `model.family` value
    pipelines: tuple[str, ...]  # diffusers pipeline classes of the family (render.models.families.check_pipeline)
    schedulers: Mapping[str, SchedulerSpec]  # scheduler option name -> class and settings ("default" is implicit)
    guidance: Callable[[float], Dict[str, Any]] = guidance_scale  # the guidance knob -> pipeline call arguments
    clips: bool = False  # the pipeline returns clips (`.frames`), not images: each sample is a clip (render.run.apng)
    frame_step: int = 1  # a clip's frame count is k * frame_step + 1 (Wan: its VAE compresses time 4x after frame 1)
    # cache methods diffusers can hook into the family's transformer but its pipeline cannot run, each with why
    refused_caches: Mapping[str, str] = field(default_factory=dict)
    twin: Optional[Twin] = None  # the random-weight twin the tests render (model=<twin.name>)
    # the sequences context parallelism splits, by name, with their lengths (None: set by the prompt); see _tokens
    split_sequences: Callable[[Shape], Dict[str, Optional[int]]] = packed_image


# Every family, by name: each module of this package that exports `FAMILY` (render.compose.registry: found on first use).
FAMILIES: Registry[Family] = Registry("model family", "model.family", lambda f: f.name, package=__name__,
                                      attribute="FAMILY", error=FamilyUnavailable)


def families() -> Mapping[str, Family]:
    """Every family, by name."""
    return FAMILIES


def family(name: str) -> Family:
    """The family called `name`; FamilyUnavailable naming the valid ones when there is none."""
    return FAMILIES[name]


def twins() -> Dict[str, Twin]:
    """Every family's tiny twin, by its model name (`hypergrid:<name>`)."""
    return {f.twin.name: f.twin for f in families().values() if f.twin is not None}


def check_pipeline(family_name: str, pipeline: str) -> None:
    """The family must exist, and a pipeline class another family declares is refused: its schedulers would be the
    wrong ones. A class no family declares (a dotted path to your own, a name diffusers may lack) is left to the
    pipeline's own check (render.compose.introspect), which imports it."""
    known = family(family_name)
    owner = next((f.name for f in families().values() if pipeline in f.pipelines), None)
    if owner is not None and owner != known.name:
        raise FamilyUnavailable(f"model.pipeline={pipeline} is a pipeline of the {owner} model family, not {known.name}; "
                                f"valid: {', '.join(known.pipelines)} (or model.family={owner})")


def check_frames(family_name: str, model_name: str, num_frames: int | None, fps: int | None) -> None:
    """A clip family's model names its frame count and rate, one its VAE takes; an image model names neither."""
    known = family(family_name)
    if not known.clips:
        for key, value in (("num_frames", num_frames), ("fps", fps)):
            if value is not None:
                clip_families = ", ".join(f.name for f in families().values() if f.clips)
                raise FamilyUnavailable(f"model.{key}={value}: model {model_name} ({known.name} family) renders images, "
                                        f"not clips; only a clip family ({clip_families}) takes it (or model.{key}=null)")
        return
    for key, value in (("num_frames", num_frames), ("fps", fps)):
        if value is None or value <= 0:
            raise FamilyUnavailable(f"model.{key}={value}: model {model_name} renders clips; give a positive {key}")
    assert num_frames is not None
    step = known.frame_step
    if (num_frames - 1) % step:
        lower = (num_frames - 1) // step * step + 1
        valid = ", ".join(str(n) for n in (lower, lower + step) if n > 0)
        raise FamilyUnavailable(f"model.num_frames={num_frames}: the {known.name} family renders k*{step}+1 frames "
                                f"(1, {1 + step}, {1 + 2 * step}, ...); use {valid}")
