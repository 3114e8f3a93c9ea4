"""Line plots of named series over time, drawn with plotext in the terminal.

Data-agnostic: a caller hands x values (minutes, negative = in the past) and named series;
the plot redraws itself from them on every resize, so it always fills its box.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from textual_plotext import PlotextPlot


@dataclass(frozen=True)
class Line:
    label: str
    values: Sequence[float | None]
    color: str = "white"


@dataclass
class PlotData:
    xs: Sequence[float] = ()
    lines: Sequence[Line] = ()
    hlines: Sequence[tuple[float, str]] = field(default_factory=list)  # (y, color)
    ylim: tuple[float, float] | None = None
    xlabel: str = "min"
    empty_text: str = "waiting for polls…"


class SeriesPlot(PlotextPlot):
    """A titled multi-line plot; `show(PlotData)` replaces what it draws."""

    DEFAULT_CSS = """
    SeriesPlot {
        width: 1fr;
        height: 1fr;
        min-height: 5;
    }
    """

    def __init__(self, title: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.data = PlotData()

    def show(self, data: PlotData) -> None:
        self.data = data
        self._draw()
        self.refresh()

    def on_mount(self) -> None:
        super().on_mount()
        self._draw()

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        d = self.data
        plt.title(self.title)
        xs = list(d.xs)
        drawn = False
        for line in d.lines:
            pts = [(x, y) for x, y in zip(xs, line.values, strict=False) if y is not None]
            if not pts:
                continue
            plt.plot([p[0] for p in pts], [p[1] for p in pts], label=line.label, color=line.color,
                     marker="braille")
            drawn = True
        for y, color in d.hlines:
            plt.hline(y, color)
        if d.ylim is not None:
            plt.ylim(*d.ylim)
        if xs:
            lo, hi = min(xs), max(xs)
            plt.xlim(lo if lo < hi else hi - 1, hi)
        if not drawn:
            plt.title(f"{self.title} — {d.empty_text}")
        plt.xlabel(d.xlabel)
