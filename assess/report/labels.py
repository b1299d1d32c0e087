"""Labels beside a plot's points that never overlap, placed in time that grows with the points (issue 45: a report of
5,000 cells once spent minutes here, asking matplotlib every placed label's extent for every new one).

Each label is tried at a list of offsets from its point and kept at the first where its box overlaps no placed
label's; a label with no free offset joins the nearest point's label ("2,5") and that label is placed again. The boxes
are computed, not drawn: a one-line label in one font is its first character's box at the anchor, as wide as the sum
of its characters' advances (each measured once by matplotlib, plus a margin), so a test for overlap is arithmetic on a
grid of the boxes near it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels

MARGIN_PX = 2.0  # added on every side of a computed box: a drawn label's extent is never larger than its box
GRID_PX = 48.0  # the side of a grid cell of the placed boxes


class _Measure:
    """A label's box in display pixels, from per-character widths measured once on this axes' renderer."""

    def __init__(self, ax: Any, renderer: Any, style: dict[str, Any]) -> None:
        self.ax, self.renderer, self.style = ax, renderer, style
        self.widths: dict[str, float] = {}
        self.px_per_point = ax.figure.dpi / 72
        self.base = self._extent("0", (0.0, 0.0))  # the box of a one-character label at offset 0 from its point

    def _extent(self, text: str, at: tuple[float, float]) -> Box:
        label = self.ax.annotate(text, at, xycoords="figure pixels", textcoords="offset points", xytext=(0, 0),
                                 **self.style)
        box = label.get_window_extent(self.renderer)
        label.remove()
        return box.x0 - at[0], box.y0 - at[1], box.x1 - at[0], box.y1 - at[1]

    def width(self, text: str) -> float:
        for char in set(text) - set(self.widths):
            x0, _, x1, _ = self._extent(char * 8, (0.0, 0.0))
            self.widths[char] = (x1 - x0) / 8
        return sum(self.widths[c] for c in text)

    def box(self, text: str, point: tuple[float, float], offset: tuple[float, float]) -> Box:
        x = point[0] + offset[0] * self.px_per_point
        y = point[1] + offset[1] * self.px_per_point
        x0, y0, _, y1 = self.base
        return (x + x0 - MARGIN_PX, y + y0 - MARGIN_PX, x + x0 + self.width(text) * 1.02 + MARGIN_PX,
                y + y1 + MARGIN_PX)


class _Placed:
    """The placed boxes, kept on a grid so that a new box is tested against its neighbours only."""

    def __init__(self) -> None:
        self.boxes: dict[int, Box] = {}
        self.grid: dict[tuple[int, int], set[int]] = {}

    @staticmethod
    def _cells(box: Box) -> list[tuple[int, int]]:
        x0, y0, x1, y1 = (math.floor(v / GRID_PX) for v in box)
        return [(i, j) for i in range(x0, x1 + 1) for j in range(y0, y1 + 1)]

    def free(self, box: Box) -> bool:
        near = {k for cell in self._cells(box) for k in self.grid.get(cell, ())}
        return not any(_overlap(box, self.boxes[k]) for k in near)

    def add(self, key: int, box: Box) -> None:
        self.boxes[key] = box
        for cell in self._cells(box):
            self.grid.setdefault(cell, set()).add(key)

    def remove(self, key: int) -> None:
        box = self.boxes.pop(key, None)
        if box is not None:
            for cell in self._cells(box):
                self.grid[cell].discard(key)


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place(ax: Any, marks: Sequence[tuple[str, float, float]], offsets: Sequence[tuple[float, float]],
          style: dict[str, Any]) -> None:
    """Annotate each (text, x, y) in data coordinates at the first of `offsets` (points) where its label overlaps
    no other; a label with no free offset joins the nearest point's label, which is placed again."""
    import numpy as np

    if not marks:
        return
    measure = _Measure(ax, ax.figure.canvas.get_renderer(), style)
    shown = np.asarray(ax.transData.transform([(x, y) for _, x, y in marks]), dtype=float)
    groups: dict[int, list[int]] = {i: [i] for i in range(len(marks))}  # a group is known by its first point
    group_of = list(range(len(marks)))
    where: dict[int, tuple[float, float]] = {}  # group -> its label's offset
    placed = _Placed()
    queue = deque(groups)
    while queue:
        key = queue.popleft()
        text = ",".join(marks[i][0] for i in groups[key])
        point = (float(shown[key][0]), float(shown[key][1]))
        offset = next((o for o in offsets if placed.free(measure.box(text, point, o))), None)
        if offset is not None:
            placed.add(key, measure.box(text, point, offset))
            where[key] = offset
            continue
        nearest = _nearest(shown, groups[key], group_of)
        placed.remove(nearest)
        where.pop(nearest, None)
        if nearest in queue:
            queue.remove(nearest)
        for i in groups[key]:
            group_of[i] = nearest
        groups[nearest] += groups.pop(key)
        queue.appendleft(nearest)
    for key, offset in where.items():
        _, x, y = marks[key]
        ax.annotate(",".join(marks[i][0] for i in groups[key]), (x, y), textcoords="offset points", xytext=offset,
                    **style)


def _nearest(shown: Any, members: list[int], group_of: list[int]) -> int:
    """The group of the point nearest to any of `members` that is not one of them."""
    import numpy as np

    distances = np.min(np.linalg.norm(shown[None, :, :] - shown[members][:, None, :], axis=2), axis=0)
    distances[members] = np.inf
    return group_of[int(np.argmin(distances))]
