"""What every cache method shares: the schema base with its validation, the apply context, errors.

A schema is a dataclass whose `__post_init__` type-checks and canonicalises its fields through
OmegaConf (the same checks Hydra applies at composition: 1 -> 1.0 for a float, a tuple -> a list,
"high" for a float is an error), then runs the method's own range checks (`problems`).
"""

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, List, NamedTuple, Optional, Sequence

from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from render.errors import RenderError

Record = Dict[str, Any]  # what an apply function derived (JSON-able), recorded in the run's run.json


class CacheConfigError(RenderError, ValueError):
    """A cache config value that is wrong, or a cache the pipeline cannot take."""


@dataclass
class CacheSchema:
    """Base of the cache schemas: `name` is the option name (conf/cache/<name>.yaml)."""

    # The method hooks whole transformer blocks, so it needs diffusers' metadata for the model's
    # block classes (diffusers.hooks._helpers.TransformerBlockRegistry).
    needs_block_metadata: ClassVar[bool] = False
    # Names of the diffusers hooks the method registers; reset checks none is left behind.
    HOOKS: ClassVar[tuple[str, ...]] = ()

    name: str = "none"

    def __post_init__(self) -> None:
        try:
            node = OmegaConf.structured(self)
        except ValidationError as error:
            detail = str(error).splitlines()[0]
            raise CacheConfigError(f"cache {self.name}: {error.full_key}={error.value!r}: {detail}") from None
        for key, value in OmegaConf.to_container(node).items():  # type: ignore[union-attr]
            setattr(self, str(key), value)  # a structured node's keys are its field names
        problems = self.problems()
        if problems:
            raise CacheConfigError(f"cache {self.name}: " + "; ".join(problems))

    def problems(self) -> List[str]:
        """The method's range checks: one message per bad value, naming it and what is valid."""
        return []

    def calibration_renders(self) -> int:
        """Renders with the cell's settings the method makes before the cell's samples, output discarded (device work
        the budget's estimate counts)."""
        return 0

    @classmethod
    def pipeline_problem(cls, pipeline_cls: type) -> Optional[str]:
        """Why this pipeline class cannot drive the method (e.g. it does not tell the hooks where the denoising
        loop is); None when it can. Read from the class, so preflight checks it before anything loads."""
        return None

    @classmethod
    def denoiser_problem(cls, transformer_cls: type) -> Optional[str]:
        """Why diffusers' hooks for the method do nothing on this transformer class; None when they engage."""
        return None

    @classmethod
    def from_conf(cls, conf: Any) -> "CacheSchema":
        """`conf` (a schema instance or the Hydra config node of the same shape) as a validated `cls`."""
        values = {}
        for f in dataclasses.fields(cls):
            try:
                values[f.name] = getattr(conf, f.name)
            except AttributeError:
                raise CacheConfigError(f"cache {cls.name}: the config has no key {f.name!r}") from None
        return cls(**values)


class CacheMethod(NamedTuple):
    """A registry entry: the method's schema and its apply function."""

    schema: "type[CacheSchema]"
    apply: Callable[[Any, Any, "ApplyContext"], Record]  # (pipe, validated schema instance, context) -> record
    # why the method cannot run a batch (batch > 1) without one sample's pixels depending on the others of its call
    # (a skip decided on the whole batch's activations); None: it decides per step, whatever the batch holds
    unbatchable: Optional[str] = None


@dataclass(frozen=True)
class ApplyContext:
    """What a cache method may need beyond its config."""

    steps: Optional[int] = None  # the cell's num_inference_steps
    calibrate: Optional[Callable[[], None]] = None  # renders once with the cell's settings, output discarded


# ---- range checks shared by the schemas: each returns the problem, or None ----


def at_least(schema: Any, field: str, low: float) -> Optional[str]:
    value = getattr(schema, field)
    if value is not None and value < low:
        return f"{field}={value}: expected a value >= {low}"
    return None


def window(schema: Any, field: str) -> Optional[str]:
    value = getattr(schema, field)
    if value is not None and (len(value) != 2 or value[0] >= value[1]):
        return f"{field}={value}: expected [lo, hi] with lo < hi"
    return None


def pair(values: Sequence[int]) -> "tuple[int, int]":
    """A `window`-checked [lo, hi] as the (lo, hi) tuple diffusers' configs take."""
    lo, hi = values
    return lo, hi


def one_of(schema: Any, field: str, valid: Sequence[str]) -> Optional[str]:
    value = getattr(schema, field)
    if value not in valid:
        return f"{field}={value}: valid: {', '.join(valid)}"
    return None


def found(*problems: Optional[str]) -> List[str]:
    return [p for p in problems if p]
