"""FLUX.1 (dev, schnell; the shapes model too): FluxPipeline. Its twin is `model=tiny` (render/models/tiny.py)."""

from render.models.families import Family
from render.models.families._flow import FLOW_SCHEDULERS
from render.models.tiny import TWIN

FAMILY = Family(
    name="flux",
    pipelines=("FluxPipeline",),
    schedulers=FLOW_SCHEDULERS,
    twin=TWIN,
)
