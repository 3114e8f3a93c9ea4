"""An experiment's results as a source lays them out for people: tables, small plots, text.

Data-agnostic, like the widgets that draw it: a source that has more to show than a score
per trial (per-dataset accuracies, latency percentiles, instance counts, a tool's own summary)
implements `results(exp)`; the console's results view draws whatever comes back.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from services.core.models import Experiment
from services.core.source import Source


class ResultTable(BaseModel):
    title: str
    columns: list[str]
    rows: list[list[str]] = Field(default_factory=list)


class ResultLine(BaseModel):
    label: str
    values: list[float | None]
    color: str = "white"


class ResultPlot(BaseModel):
    """Lines over shared numeric x values (e.g. percentiles 50, 75, 90, 99)."""

    title: str
    xs: list[float]
    lines: list[ResultLine] = Field(default_factory=list)
    xlabel: str = ""
    ylabel: str = ""


class ResultText(BaseModel):
    title: str
    text: str


class ResultView(BaseModel):
    title: str
    lines: list[str] = Field(default_factory=list, description="a few header lines: state, reason, where")
    tables: list[ResultTable] = Field(default_factory=list)
    plots: list[ResultPlot] = Field(default_factory=list)
    texts: list[ResultText] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)


async def source_results(source: Source, exp: Experiment) -> ResultView | None:
    """What the source lays out for `exp`, or None when it has nothing beyond the trials."""
    fn = getattr(source, "results", None)
    if fn is None:
        return None
    view = await fn(exp)
    return view if isinstance(view, ResultView) else None
