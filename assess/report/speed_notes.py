"""What a cell's speed figures cannot say by themselves: whether its cache engaged, and when its compile pays.

Both are read from the samples' own records (samples.jsonl, or the index's `samples` rows: the same
column names), so `assess status` (run directories) and `assess report` / the climb (the index) say the same.

- Cache engagement: the denoising steps and hooked units (blocks, attention layers) each rendered sample
  computed and reused (render/axes/caches/_engagement.py). A cache cell whose samples never reused a
  step rendered what `cache=none` renders, at the hooks' cost: "the cache never engaged".
- Compile break-even: compiling costs its compile time once per process (cold: graphs compiled from
  nothing; warm: every graph loaded from inductor's artefact cache on disk, as a second process finds it);
  it pays after n* = compile_s / (eager warm latency - compiled warm latency) images, against the cell's
  eager twin (the same cell with compile=none, when rendered). "never pays" when compiled is not faster.
  The index computes it (its `compile_break_even` view, assess/index/database.py); this module words it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Row = Mapping[str, Any]  # a sample by column name: a dict (SampleRecord.as_dict) or the index's sqlite3.Row
NEVER_ENGAGED = "the cache never engaged"


@dataclass(frozen=True)
class CacheEngagement:
    """Summed over a cell's rendered samples that carry counts."""

    n: int
    steps_computed: int
    steps_reused: int
    blocks_computed: int
    blocks_reused: int

    @property
    def engaged(self) -> bool:
        return self.steps_reused > 0 or self.blocks_reused > 0

    def note(self, label: str, steps: int | None) -> str:
        """"fbcache(threshold=0.3) at 4 steps: 0 of 4 steps reused, the cache never engaged"."""
        where = f"{label} at {steps} steps" if steps else label
        total = self.steps_computed + self.steps_reused
        per = f" (mean of {self.n} images)" if self.n > 1 else ""
        if not self.engaged:
            return f"{where}: 0 of {_num(total / self.n)} steps reused, {NEVER_ENGAGED}"
        units = self.blocks_computed + self.blocks_reused
        return (f"{where}: {_num(self.steps_reused / self.n)} of {_num(total / self.n)} steps reused{per}, "
                f"{_num(self.blocks_reused / self.n)} of {_num(units / self.n)} hooked units")


def _num(value: float) -> str:
    return f"{value:.3g}"


def cache_engagement(samples: Iterable[Row]) -> CacheEngagement | None:
    """The engagement of a cell's samples rendered by a cache (None: none of them was counted)."""
    counted = [s for s in samples if not s["reused_from"] and s["steps_computed"] is not None]
    if not counted:
        return None
    total = {k: sum(int(s[k] or 0) for s in counted)
             for k in ("steps_computed", "steps_reused", "blocks_computed", "blocks_reused")}
    return CacheEngagement(len(counted), **total)


def cache_label(cell: Mapping[str, Any]) -> str:
    """How a run's cell (run.json "cell") names its cache: fbcache(threshold=0.3)."""
    from render.axes.caches import AXIS

    return AXIS.label(cell["cache"])


def engagement_note(cell: Mapping[str, Any], samples: Iterable[Row]) -> str | None:
    """The engagement line of a cache cell, None for cache=none or samples without counts."""
    if (cell.get("cache") or {}).get("name", "none") == "none":
        return None
    found = cache_engagement(samples)
    return None if found is None else found.note(cache_label(cell), cell.get("steps"))


# -- compile --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompileCost:
    cold_s: float | None  # a first call's compile time with graphs compiled from nothing (cache misses)
    warm_s: float | None  # a first call's compile time with every graph from the artefact cache (hits only)
    compiled_s: float | None  # the compiled cell's median warm latency
    eager_s: float | None  # its eager twin's median warm latency (None: no eager twin rendered)

    @property
    def saving_s(self) -> float | None:
        return None if self.compiled_s is None or self.eager_s is None else self.eager_s - self.compiled_s

    def break_even(self, compile_s: float | None) -> float | None:
        """Images after which compiling pays; None when unknown or never."""
        saving = self.saving_s
        return None if compile_s is None or saving is None or saving <= 0 else compile_s / saving

    def note(self) -> str:
        times = ", ".join(f"{what} {_secs(v)}" for what, v in (("cold", self.cold_s), ("warm artefact cache", self.warm_s))
                          if v is not None) or "no compiling call recorded"
        if self.eager_s is None:
            return f"compile {times}; break-even: no eager twin (render the same cell with compile=none)"
        saving = self.saving_s
        if saving is None or saving <= 0:
            return (f"compile {times}; never pays: compiled {_secs(self.compiled_s)} vs eager {_secs(self.eager_s)} "
                    "per image (warm medians)")
        pays = ", ".join(f"{n:.0f} images ({what})" for what, n in (("cold", self.break_even(self.cold_s)),
                                                                    ("warm", self.break_even(self.warm_s)))
                         if n is not None)
        return f"compile {times}; pays after {pays}: saves {_secs(saving)} per image"


def _secs(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g} s"


def compile_costs(index: Any, split: str | None = None) -> dict[tuple[str, str], CompileCost]:
    """(cell key, split) -> the compile cost of every compiled cell in the index (its `compile_break_even` view)."""
    rows = index.query("SELECT * FROM compile_break_even" + (" WHERE split = ?" if split else ""), (split,) if split else ())
    return {(r["cell_key"], r["split"]): CompileCost(r["compile_cold_s"], r["compile_warm_s"], r["compiled_latency_s"],
                                                   r["eager_latency_s"]) for r in rows}
