"""Line plots of named series over time, drawn with plotext in the terminal.

Data-agnostic: a caller hands x values (minutes, negative = in the past) and named series;
the plot redraws itself from them on every resize, so it always fills its box.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
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
    hline_label: str = ""


# plotext colour names → Rich colours, so the legend line matches the lines drawn
_RICH = {"gray": "grey62", "orange": "dark_orange", "blue": "dodger_blue2", "green": "green3", "red": "red3",
         "white": "white", "yellow": "yellow"}


def legend_text(data: PlotData) -> Text:
    """The series names in their colours, on one line of their own."""
    out = Text(no_wrap=True, overflow="ellipsis")
    for line in data.lines:
        if not line.label:
            continue
        if out:
            out.append("  ")
        out.append("━ ", style=_RICH.get(line.color, line.color))
        out.append(line.label)
    for _y, color in data.hlines:
        out.append("  ")
        out.append("┄ ", style=_RICH.get(color, color))
        out.append(data.hline_label or "expected")
    return out


class _Plot(PlotextPlot):
    def __init__(self, owner: SeriesPlot) -> None:
        super().__init__()
        self.owner = owner

    def on_mount(self) -> None:
        super().on_mount()
        self.owner.draw()


class SeriesPlot(Vertical):
    """A titled multi-line plot; `show(PlotData)` replaces what it draws. The legend is a line
    under the plot: drawn inside it (plotext's way) it covers the data it explains."""

    DEFAULT_CSS = """
    SeriesPlot {
        width: 1fr;
        height: 1fr;
        min-height: 5;
    }
    SeriesPlot > _Plot { height: 1fr; }
    SeriesPlot > .plot-legend { height: 1; padding: 0 1; }
    """

    def __init__(self, title: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.data = PlotData()

    def compose(self) -> ComposeResult:
        yield _Plot(self)
        yield Static("", classes="plot-legend")

    @property
    def plt(self) -> Any:
        return self.query_one(_Plot).plt

    def show(self, data: PlotData) -> None:
        self.data = data
        if self.is_mounted:
            self.draw()

    def draw(self) -> None:
        plot = self.query_one(_Plot)
        plt = plot.plt
        plt.clear_figure()
        d = self.data
        plt.title(self.title)
        xs = list(d.xs)
        drawn = False
        for line in d.lines:
            pts = [(x, y) for x, y in zip(xs, line.values, strict=False) if y is not None]
            if not pts:
                continue
            plt.plot([p[0] for p in pts], [p[1] for p in pts], color=line.color, marker="braille")
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
        plot.refresh()
        self.query_one(".plot-legend", Static).update(legend_text(d) if drawn else Text(""))
