"""Stable Diffusion XL: StableDiffusionXLPipeline, a UNet with epsilon prediction (the discrete schedulers)."""

from render.models.families import Family, SchedulerSpec

FAMILY = Family(
    name="sdxl",
    pipelines=("StableDiffusionXLPipeline",),
    schedulers={
        "euler": SchedulerSpec("EulerDiscreteScheduler"),
        "euler-karras": SchedulerSpec("EulerDiscreteScheduler", {"use_karras_sigmas": True}),
        "heun": SchedulerSpec("HeunDiscreteScheduler"),
        "deis": SchedulerSpec("DEISMultistepScheduler"),
        "dpmpp-2m": SchedulerSpec("DPMSolverMultistepScheduler", {"algorithm_type": "dpmsolver++", "solver_order": 2}),
        "unipc": SchedulerSpec("UniPCMultistepScheduler"),
    },
)
