"""The flow-matching schedulers of the rectified-flow families (FLUX.1, FLUX.2, SD3, Qwen-Image, Z-Image).

Which of them a family takes depends on how its pipeline sets the timesteps: one that passes custom
sigmas (Qwen-Image, Z-Image) cannot run DPMSolverMultistep or DEIS, whose `set_timesteps` take none.
"""

from render.models.families import SchedulerSpec

_FLOW_SIGMAS = {"use_flow_sigmas": True, "prediction_type": "flow_prediction"}
# FlowMatchHeunDiscreteScheduler is missing on purpose: it refuses the custom sigmas these pipelines pass.
FLOW_SCHEDULERS = {
    "euler": SchedulerSpec("FlowMatchEulerDiscreteScheduler"),
    "euler-karras": SchedulerSpec("FlowMatchEulerDiscreteScheduler", {"use_karras_sigmas": True}),
    "dpmpp-2m": SchedulerSpec("DPMSolverMultistepScheduler", {**_FLOW_SIGMAS, "algorithm_type": "dpmsolver++", "solver_order": 2}),
    "unipc": SchedulerSpec("UniPCMultistepScheduler", _FLOW_SIGMAS),
    "deis": SchedulerSpec("DEISMultistepScheduler", _FLOW_SIGMAS),
}


def flow_schedulers(*names: str) -> dict[str, SchedulerSpec]:
    """The named subset of FLOW_SCHEDULERS, in their order."""
    return {name: spec for name, spec in FLOW_SCHEDULERS.items() if name in names}
