"""Results of one experiment as its source lays them out (services.core.results): tables of
figures, small plots (an AISBench task's latency percentiles), the tool's own summary text.
The source reads what it needs in a worker; this screen only draws what comes back."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static

from services.core.results import ResultView, source_results
from tui.actions import bindings_for
from tui.chrome import ConsoleHeader
from tui.context import ConsoleState, console
from tui.messages import OpenView, SnapshotUpdated
from widgets.footer import KeyFooter
from widgets.plots import Line, PlotData, SeriesPlot
from widgets.state_badge import state_badge


class _ResultsRead(Message):
    def __init__(self, view: ResultView | None, error: str | None) -> None:
        super().__init__()
        self.view = view
        self.error = error


def result_table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", expand=False, padding=(0, 1),
              box=box.SIMPLE_HEAD)
    last = len(columns) - 1
    for i, col in enumerate(columns):
        # figures never wrap; the last column (a status, an error) folds when the screen is narrow
        t.add_column(col, overflow="fold", justify="left" if i in (0, last) else "right", no_wrap=i != last)
    for row in rows:
        t.add_row(*row)
    return t


class ResultsScreen(Screen[None]):
    SCREEN_ID = "results"
    CSS_PATH = "results.tcss"
    BINDINGS = bindings_for("results")

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self.view: ResultView | None = None

    @property
    def evaldesk(self) -> ConsoleState:
        return console(self)

    def compose(self) -> ComposeResult:
        yield ConsoleHeader("Results")
        yield Static("", id="results-title", classes="status-line")
        yield VerticalScroll(Static(Text("reading…", style="dim"), id="results-wait"), id="results-body")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._title()
        self.load()
        self.query_one("#results-body").focus()

    def _title(self) -> None:
        exp = self.evaldesk.experiment(self.key)
        title = self.query_one("#results-title", Static)
        if exp is None:
            title.update(Text(f"{self.key.split('::', 1)[-1]}: not in the latest scan", style="bold red"))
            return
        title.update(Text.assemble(state_badge(exp.state.value, compact=True), " ", (exp.id, "bold"),
                                   (f"  {exp.benchmark or '?'} · {exp.model or '?'}", "dim")))

    @on(SnapshotUpdated)
    def _on_snapshot(self, message: SnapshotUpdated) -> None:
        self._title()
        self.load()

    @work(exclusive=True, group="results-read", exit_on_error=False)
    async def load(self) -> None:
        exp = self.evaldesk.experiment(self.key)
        if exp is None:
            self.post_message(_ResultsRead(None, "the experiment is gone from its source"))
            return
        try:
            view = await source_results(self.evaldesk.source_for(self.key), exp)
        except Exception as exc:  # a source that cannot be read says so here, not as a crash
            self.post_message(_ResultsRead(None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(_ResultsRead(view, None))

    @on(_ResultsRead)
    async def _on_read(self, message: _ResultsRead) -> None:
        body = self.query_one("#results-body", VerticalScroll)
        self.view = message.view
        await body.remove_children()
        if message.view is None:
            why = message.error or "this source lays out nothing beyond its trials: enter opens them"
            await body.mount(Static(Text(why, style="bold red" if message.error else "dim"), id="results-none"))
            return
        v = message.view
        widgets: list[Static | SeriesPlot] = [Static(Text("\n".join(v.lines)), id="results-lines")]
        # the plot first: on a small terminal it is what shows without scrolling
        for i, plot in enumerate(v.plots):
            widgets.append(SeriesPlot(plot.title, id=f"results-plot-{i}", classes="results-plot"))
        for table in v.tables:
            widgets.append(Static(result_table(table.title, table.columns, table.rows), classes="results-table"))
        for text in v.texts:
            widgets.append(Static(Text(text.title, style="bold"), classes="results-text-title"))
            widgets.append(Static(Text(text.text), classes="results-text"))
        for problem in v.problems:
            widgets.append(Static(Text(f"read problem: {problem}", style="yellow")))
        await body.mount_all(widgets)
        for i, plot in enumerate(v.plots):
            self.query_one(f"#results-plot-{i}", SeriesPlot).show(PlotData(
                xs=plot.xs, lines=[Line(ln.label, ln.values, ln.color) for ln in plot.lines], xlabel=plot.xlabel,
                empty_text="no figures"))

    # ---- actions ------------------------------------------------------------------------
    def action_open_trials(self) -> None:
        self.post_message(OpenView("trials", [self.key]))

    def action_audit(self) -> None:
        self.post_message(OpenView("audit", [self.key]))

    def action_back(self) -> None:
        self.dismiss()
