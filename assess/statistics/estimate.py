"""A point estimate with its interval: the one shape every statistic of hypergrid reports (a leaf module)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval (None when it cannot be had: see note)."""

    value: float
    low: float | None
    high: float | None
    n: int
    p_value: float | None = None
    note: str | None = None

    @property
    def excludes_zero(self) -> bool:
        """The interval lies on one side of 0 (a difference the data see)."""
        return self.low is not None and self.high is not None and (self.high < 0 or self.low > 0)

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n,
                "p_value": self.p_value, "note": self.note}
