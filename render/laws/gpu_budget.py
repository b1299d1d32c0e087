"""An experiment's budget: the one type the config schema, the frozen rule, the renderer's guard and the climb share.

It is the Hydra schema of `experiment.budget` (a YAML value is type-checked at composition) and, instantiated,
the validated value: `Budget(...)`, `Budget.of(node_or_record)` refuse a budget out of range, so the renderer
and assess refuse the same values with the same words. Its ceiling formula lives here once (`navigable_s`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from omegaconf import MISSING

from render.errors import RenderError


class BudgetError(RenderError, ValueError):
    """An experiment budget value out of its range."""


# The final's estimate is a median per sample times its samples; what navigation keeps for it is that much more, so
# that a climb stopped on budget can run its final though its cells render slower than their history (a loaded
# machine: the README's demo on two busy cores fell 2 % short without it).
FINAL_MARGIN = 1.25


@dataclass
class Budget:
    gpu_hours: float = MISSING  # ceiling for the whole experiment (measured from its samples' latencies and load times)
    reserve_gpu_hours: float = 0.0  # kept back for the final holdout run: only `assess climb --final` may use it
    price_per_gpu_hour: Optional[float] = None  # optional: report costs in money too

    def __post_init__(self) -> None:
        if self.gpu_hours is MISSING or self.gpu_hours == MISSING:  # the schema's default, before composition
            return
        self.gpu_hours = _number("gpu_hours", self.gpu_hours)
        self.reserve_gpu_hours = _number("reserve_gpu_hours", self.reserve_gpu_hours or 0.0)
        if self.price_per_gpu_hour is not None:
            self.price_per_gpu_hour = _number("price_per_gpu_hour", self.price_per_gpu_hour)
        if self.gpu_hours <= 0:
            raise BudgetError(f"experiment.budget.gpu_hours={self.gpu_hours}: must be > 0")
        if not 0 <= self.reserve_gpu_hours < self.gpu_hours:
            raise BudgetError(f"experiment.budget.reserve_gpu_hours={self.reserve_gpu_hours}: must be >= 0 and below "
                              f"gpu_hours ({self.gpu_hours})")
        if self.price_per_gpu_hour is not None and self.price_per_gpu_hour < 0:
            raise BudgetError(f"experiment.budget.price_per_gpu_hour={self.price_per_gpu_hour}: must be >= 0 (or null)")

    @classmethod
    def of(cls, values: Any) -> "Budget":
        """A composed `experiment.budget` node, a rule's budget record or a plain mapping, validated."""
        if isinstance(values, Budget):
            return values
        from omegaconf import DictConfig, OmegaConf

        plain: Mapping[str, Any] = OmegaConf.to_container(values, resolve=True) if isinstance(values, DictConfig) \
            else dict(values or {})  # type: ignore[assignment]
        if plain.get("gpu_hours") in (None, MISSING):
            raise BudgetError("experiment.budget.gpu_hours is missing: give the experiment's ceiling in GPU-hours")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in plain.items() if k in names})

    def record(self) -> dict[str, Any]:
        """The budget as the frozen rule records it (the ledger's bytes: keep the keys and their types)."""
        return dataclasses.asdict(self)

    @property
    def limit_s(self) -> float:
        return self.gpu_hours * 3600.0

    @property
    def reserve_s(self) -> float:
        return self.reserve_gpu_hours * 3600.0

    def kept_s(self, final_estimate_s: float | None = None) -> float:
        """Kept back for the final: the reserve, or the final's current estimate with its margin when that is larger
        (a reserve written before the machine's speed was known must not leave the final short)."""
        return max(self.reserve_s, (final_estimate_s or 0.0) * FINAL_MARGIN)

    def kept_text(self, final_estimate_s: float | None = None) -> str:
        """What is kept for the final, as a refusal says it: the reserve, or the final's estimate with its margin."""
        kept = self.kept_s(final_estimate_s)
        if kept <= self.reserve_s:
            return f"reserve {self.reserve_gpu_hours:.4f} h kept for the final"
        return (f"{kept / 3600:.4f} h kept for the final (its estimate with a margin of {FINAL_MARGIN:g}, more than "
                f"the reserve {self.reserve_gpu_hours:.4f} h)")

    def navigable_s(self, final: bool, final_estimate_s: float | None = None) -> float:
        """The device seconds a launch may reach: the budget less what is kept for the final (kept_s), which only
        the final may spend."""
        return self.limit_s - (0.0 if final else self.kept_s(final_estimate_s))

    def cost(self, seconds: float) -> str:
        """` ($x.yz)` for `seconds` of device time when the budget is priced, else ''."""
        return f" (${seconds / 3600 * self.price_per_gpu_hour:.2f})" if self.price_per_gpu_hour else ""


def _number(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or isinstance(value, bool):
        raise BudgetError(f"experiment.budget.{name}={value!r}: expected a finite number")
    return number
