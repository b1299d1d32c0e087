"""Where a pipeline call's time goes: text encoding, the denoising loop, the VAE decode (docs/timing.md: where the time goes).

`stage_clock(pipe, device)` wraps, for the length of one call, the two methods every family's pipeline calls at the
stages' edges: `pipe.encode_prompt` (each text encoder, the negative prompt's too) and `pipe.vae.decode`. The
wrappers call the originals with the same arguments (nothing rendered changes) and put a mark on the device's
timeline at each edge: a CUDA event on a GPU (recorded on the stream, no synchronisation inside the call), the host's
`perf_counter` elsewhere (a CPU runs its kernels in order). The marks are read once the call has synchronised:

  text_s     the seconds inside `encode_prompt`, summed over its calls, and the call's argument checks before the
             first (a few milliseconds)
  denoise_s  from the end of the last text encoding to the start of the VAE decode: the denoising loop, with the
             latents' preparation before it (to the call's end when there is no VAE decode: a pixel-space model)
  vae_s      the seconds inside `vae.decode`, and the conversion of its output to pixels after it (0 for a
             pipeline without a VAE: the shapes model)

So the three cover the call from its first mark to its last: they add up to the latency the host clock measures
(with its synchronisations) within a few per cent (tests/test_stages.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

TEXT, VAE = "text", "vae"


@dataclass(frozen=True)
class StageSplit:
    """One call's seconds in each stage (device-synchronised)."""

    text_s: float
    denoise_s: float
    vae_s: float

    @property
    def total_s(self) -> float:
        return self.text_s + self.denoise_s + self.vae_s

    def as_fields(self) -> dict[str, Any]:
        """The sample record's fields (render.rundir.SampleRecord)."""
        return {"text_s": round(self.text_s, 6), "denoise_s": round(self.denoise_s, 6), "vae_s": round(self.vae_s, 6)}


class StageClock:
    """Marks on the device's timeline: (what, edge, mark) in call order; `split()` reads them after the call."""

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")
        self.device = device
        self.marks: list[tuple[str, str, Any]] = []

    def mark(self, what: str, edge: str) -> None:
        if self.cuda:
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(torch.device(self.device)))  # the call's device, not the default one
            self.marks.append((what, edge, event))
        else:
            self.marks.append((what, edge, time.perf_counter()))

    def _seconds(self, since: Any, until: Any) -> float:
        if self.cuda:
            return float(since.elapsed_time(until)) / 1000.0
        return float(until - since)

    def split(self) -> StageSplit:
        """The stages' seconds; the call (from its "call" start to its "call" end) must have synchronised."""
        edges = {(what, edge): m for what, edge, m in reversed(self.marks)}  # each edge's first mark
        start, end = edges[("call", "start")], edges[("call", "end")]
        spans: dict[str, float] = {TEXT: 0.0, VAE: 0.0}
        opened: dict[str, Any] = {}
        text_end, vae_end = start, None
        for what, edge, m in self.marks:
            if what not in spans:
                continue
            if edge == "start":
                opened[what] = m
            else:
                spans[what] += self._seconds(opened.pop(what), m)
                text_end, vae_end = (m, vae_end) if what == TEXT else (text_end, m)
        if ("text", "start") in edges:  # the argument checks before the first encoding
            spans[TEXT] += self._seconds(start, edges[("text", "start")])
        if vae_end is not None:  # the decoded output's conversion to pixels
            spans[VAE] += self._seconds(vae_end, end)
        denoise = self._seconds(text_end, edges.get(("vae", "start"), end))
        return StageSplit(text_s=spans[TEXT], denoise_s=max(denoise, 0.0), vae_s=spans[VAE])


def _timed(clock: StageClock, what: str, method: Callable[..., Any]) -> Callable[..., Any]:
    depth = [0]  # a stage method that calls itself (or its twin) is one span

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        depth[0] += 1
        if depth[0] == 1:
            clock.mark(what, "start")
        try:
            return method(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                clock.mark(what, "end")

    return wrapper


@contextmanager
def _wrapped(owner: Any, name: str, clock: StageClock, what: str) -> Iterator[None]:
    """`owner.name` wrapped for the block (an instance attribute over the class's method); as it was after."""
    if owner is None or not callable(getattr(owner, name, None)):
        yield
        return
    own = vars(owner).get(name) if hasattr(owner, "__dict__") else None
    setattr(owner, name, _timed(clock, what, getattr(owner, name)))
    try:
        yield
    finally:
        if own is None:
            delattr(owner, name)
        else:
            setattr(owner, name, own)


@contextmanager
def stage_clock(pipe: Any, device: str) -> Iterator[StageClock]:
    """A clock on the pipeline's stages for one call: mark "call" "start" before it and "call" "end" after it (before
    the call's synchronisation), then read `split()`."""
    clock = StageClock(device)
    with _wrapped(pipe, "encode_prompt", clock, TEXT), _wrapped(getattr(pipe, "vae", None), "decode", clock, VAE):
        yield clock
