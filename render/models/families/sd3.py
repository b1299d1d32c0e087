"""Stable Diffusion 3 / 3.5: StableDiffusion3Pipeline (an MMDiT whose blocks take no cache hooks in diffusers 0.42)."""

from render.models.families import Family
from render.models.families._flow import FLOW_SCHEDULERS

FAMILY = Family(
    name="sd3",
    pipelines=("StableDiffusion3Pipeline",),
    schedulers=FLOW_SCHEDULERS,
)
