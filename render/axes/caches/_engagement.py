"""Whether a cache engaged: per pipeline call, how many denoiser calls and hooked units computed or reused.

One counter serves every method. Each diffusers cache hook with a `new_forward` (first block cache, PAB,
FasterCache, TaylorSeer, MagCache) calls `self.fn_ref.original_forward` when it computes its module and
returns a cached or predicted output when it does not. Wrapping, for the length of one call, each hooked
module's `fn_ref.forward` (every call) and `fn_ref.original_forward` (real executions) counts both;
wrapping the scheduler's `step` (called once per denoising step, after the step's denoiser calls: one, or
two with true CFG) marks where each step ends.

A *unit* is a module a method hooks: a transformer block (fbcache, magcache), an attention layer (pab,
fastercache) or the modules TaylorSeer predicts. A denoiser call is *reused* when any of its units
returned without computing; a step is reused when any of its denoiser calls is. Hooks on the denoiser itself (FasterCache's guidance split) are not units.
The wrappers are removed after the call, so `disable_cache` finds diffusers' chain as it left it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Engagement:
    """What one pipeline call computed and reused (fields of the sample record)."""

    steps_computed: int
    steps_reused: int
    blocks_computed: int
    blocks_reused: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def per_call(self, calls: int) -> "Engagement":
        """The counts of one call, from those of `calls` identical calls in a row (timing.repeats)."""
        return Engagement(*(value // calls for value in asdict(self).values()))


class _Tally:
    """Per denoising step, the outcome (computed?) of each unit call inside it."""

    def __init__(self) -> None:
        self.steps: list[list[bool]] = []
        self.pending: list[bool] = []  # unit calls since the last scheduler step
        self.open: list[list[bool]] = []  # the unit calls under way (units may nest): did each compute?

    def end_step(self) -> None:
        self.steps.append(self.pending)
        self.pending = []

    def result(self) -> Engagement:
        steps = self.steps + ([self.pending] if self.pending else [])
        units = [u for step in steps for u in step]
        reused = sum(1 for step in steps if not all(step))
        return Engagement(len(steps) - reused, reused, sum(units), len(units) - sum(units))


def _cache_hook_refs(denoiser: Any, hook_names: Iterable[str]) -> list[Any]:
    """The diffusers function references of the cache hooks on the denoiser's submodules."""
    names = tuple(hook_names)
    refs = []
    for module in denoiser.modules():
        registry = getattr(module, "_diffusers_hook", None)
        if module is denoiser or registry is None:
            continue
        for name in names:
            hook = registry.get_hook(name)
            if hook is not None and getattr(hook, "fn_ref", None) is not None and hook.fn_ref.original_forward is not None:
                refs.append(hook.fn_ref)
                break
    return refs


def _wrap(ref: Any, tally: _Tally) -> None:
    forward, original = ref.forward, ref.original_forward

    def counted_forward(*args: Any, **kwargs: Any) -> Any:
        outcome = [False]
        tally.open.append(outcome)
        try:
            return forward(*args, **kwargs)
        finally:
            tally.open.pop()
            tally.pending.append(outcome[0])

    def counted_original(*args: Any, **kwargs: Any) -> Any:
        if tally.open:
            tally.open[-1][0] = True
        return original(*args, **kwargs)

    ref.forward, ref.original_forward = counted_forward, counted_original


@contextmanager
def counting(denoiser: Any, scheduler: Any, hook_names: Iterable[str]) -> Iterator[_Tally | None]:
    """Count the cache's work during the block; yields None when no cache hook is on the denoiser."""
    refs = _cache_hook_refs(denoiser, hook_names)
    if not refs:
        yield None
        return
    saved = [(ref, ref.forward, ref.original_forward) for ref in refs]
    tally = _Tally()
    for ref in refs:
        _wrap(ref, tally)
    own_step = vars(scheduler).get("step")  # normally none: `step` is the class's method
    step = scheduler.step

    def counted_step(*args: Any, **kwargs: Any) -> Any:
        tally.end_step()
        return step(*args, **kwargs)

    scheduler.step = counted_step
    try:
        yield tally
    finally:
        if own_step is None:
            del scheduler.step
        else:
            scheduler.step = own_step
        for ref, forward, original in saved:
            ref.forward, ref.original_forward = forward, original
