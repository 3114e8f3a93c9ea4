"""Live monitor of one or more experiments: counts by state over time, pass rate with its
confidence interval against the expected rate, throughput, ETA, tokens and cost, the running
trials sorted by running time with idle and activity, and the fake-execution rules in red.

The figures come from `services.monitor.state.MonitorState`, which the App feeds on every scan
(so the history outlives this screen). Without one, the screen keeps its own, fed from the
snapshots it is sent while open.
"""

from __future__ import annotations

import posixpath
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from services.core.models import Experiment, experiment_key
from services.core.text import term_safe
from services.core.times import fmt_duration, utc_now
from services.monitor.figures import Reading, Sample, wilson_interval
from services.monitor.history import history, joined
from services.monitor.rules import RULE_TITLES, MonitorWarning
from services.monitor.state import MonitorState
from tui.actions import bindings_for
from tui.chrome import ConsoleHeader
from tui.context import ConsoleState, console
from tui.external import copy_location
from tui.messages import OpenView, PollingChanged, SnapshotUpdated
from tui.navigation import move
from widgets.footer import KeyFooter
from widgets.ids import trial_label
from widgets.plots import Line, PlotData, SeriesPlot
from widgets.state_badge import state_badge

STATE_COLORS = {
    "pending": "gray",
    "dispatched": "orange",
    "running": "blue",
    "valid": "green",
    "errored": "red",
}
WIDE_BELOW = 100  # narrower: the pass-rate plot gives its room to the counts plot
SHORT_BELOW = 30  # lower: the figures and the running table share less height


def fmt_rate(p: float | None) -> str:
    return "—" if p is None else f"{100 * p:.1f}%"


def fmt_tokens(n: int) -> str:
    if n >= 1_000_000_000:
        return f"{n / 1e9:.2f}G"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 1_000:
        return f"{n / 1e3:.1f}k"
    return str(n)


def warning_lines(warnings: list[MonitorWarning], width: int) -> Text:
    if not warnings:
        return Text("✓ no fake-execution rule holds (a dispatch · b errors · c pass rate · d timeout)",
                    style="green")
    out = []
    for w in warnings:
        line = Text.assemble((f" ⚠ {w.rule} ", "bold white on red"), " ")
        if width >= 140:
            line.append(f"{RULE_TITLES[w.rule]}: ", style="bold red")
        line.append(term_safe(w.evidence), style="red")
        line.truncate(max(20, width - 2), overflow="ellipsis")
        out.append(line)
    return Text("\n").join(out)


def figures_text(r: Reading, compact: bool = False, window_s: float = 600.0) -> Text:
    """The figures of the latest poll; throughput and ETA come from the trials that finished
    in the last `window_s`, and say so."""
    t = Text()

    def row(label: str, value: str, style: str = "") -> None:
        t.append(f"{label:<11}", style="dim")
        t.append(value + "\n", style=style)

    exp = r.expected if r.expected is not None else "?"
    valid, errored = r.counts.get("valid", 0), r.counts.get("errored", 0)
    if compact:
        row("finished", f"{r.finished}/{exp}, {valid} valid, {r.invalid_errors} err")
    else:
        # the census's words (services.core.census.census_words), as the trials and audit screens say them
        row("finished", f"{r.finished} · {errored} errored")
        row("valid", f"{valid} valid of {exp} expected")
        row("errors", f"{r.invalid_errors} invalid errors")
    row("score", "—" if r.score is None else f"{r.score:.3f}")
    ci = ""
    if r.pass_rate_ci:
        lo, hi = r.pass_rate_ci
        ci = f" CI {100 * lo:.0f}–{100 * hi:.0f}%" if compact else f"  CI {fmt_rate(lo)}–{fmt_rate(hi)}"
    row("pass rate", f"{fmt_rate(r.pass_rate)}{ci}", "bold")
    al = r.alignment
    if al is not None:
        low = al.actual < al.expected
        vs = " vs " if compact else " vs actual "
        row("expected", f"{fmt_rate(al.expected)}{vs}{fmt_rate(al.actual)}", "yellow" if low else "green")
        if not compact:
            row("", f"{term_safe(al.baseline)[:18]}, n={al.compared}", "dim")
    else:
        row("expected", "— (no baseline)", "dim")
    window = fmt_duration(window_s)
    tp = "—" if r.throughput_per_min is None else f"{r.throughput_per_min:.2f}/min, last {window}"
    row("throughput", tp)
    eta = "—" if r.eta_s is None else ("done" if r.eta_s == 0 else f"{fmt_duration(r.eta_s)} at that rate")
    row("ETA", eta)
    row("tokens", fmt_tokens(r.tokens))
    row("cost", "—" if r.cost_usd is None else f"${r.cost_usd:,.2f}")
    if not compact:
        row("timeout", f"{fmt_duration(r.inference_timeout_s)} (rule d at 1.5×)", "dim")
    t.rstrip()
    return t


def time_axis(samples: list[Sample]) -> tuple[list[float], str]:
    """x values before the last sample, in the unit that suits the span (a run's whole life
    can be minutes or days)."""
    last = samples[-1].at
    span = last - samples[0].at
    unit, size = ("days", 86400.0) if span > 3 * 86400 else ("hours", 3600.0) if span > 3 * 3600 else ("min", 60.0)
    return [(s.at - last) / size for s in samples], f"{unit} before the last poll"


def counts_plot(samples: list[Sample]) -> PlotData:
    if not samples:
        return PlotData()
    xs, label = time_axis(samples)
    lines = [Line(state, [float(s.count(state)) for s in samples], color)
             for state, color in STATE_COLORS.items()]
    return PlotData(xs=xs, lines=lines, xlabel=label)


def pass_plot(samples: list[Sample], expected: float | None) -> PlotData:
    if not samples:
        return PlotData()
    xs, label = time_axis(samples)
    rate = [None if s.pass_rate is None else 100 * s.pass_rate for s in samples]
    lo: list[float | None] = []
    hi: list[float | None] = []
    for s in samples:
        ci = wilson_interval(s.pass_rate * s.finished, s.finished) if s.pass_rate is not None else None
        lo.append(100 * ci[0] if ci else None)
        hi.append(100 * ci[1] if ci else None)
    lines = [Line("pass %", rate, "green"), Line("95% CI", lo, "gray"), Line("", hi, "gray")]
    hlines = [(100 * expected, "orange")] if expected is not None else []
    return PlotData(xs=xs, lines=lines, hlines=hlines, ylim=(0, 100), xlabel=label, hline_label="expected")


class _HistoryReady(Message):
    def __init__(self, key: str, samples: list[Sample]) -> None:
        super().__init__()
        self.key = key
        self.samples = samples


class MonitorScreen(Screen[None]):
    SCREEN_ID = "monitor"
    CSS_PATH = "monitor.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [*bindings_for("monitor")]

    def __init__(self, keys: list[str]) -> None:
        super().__init__()
        self.keys = list(keys)
        self.index = 0
        self.paused = False
        self._own: MonitorState | None = None
        # experiment key → its life rebuilt from trial times (services/monitor/history.py)
        self._history: dict[str, list[Sample]] = {}

    @property
    def paused(self) -> bool:
        return bool(getattr(self.app, "paused", False))

    @paused.setter
    def paused(self, value: bool) -> None:
        return None

    @property
    def evaldesk(self) -> ConsoleState:
        return console(self)

    @property
    def key(self) -> str:
        return self.keys[self.index] if self.keys else ""

    @property
    def monitor(self) -> MonitorState:
        shared = getattr(self.app, "monitor", None)
        if isinstance(shared, MonitorState):
            return shared
        if self._own is None:
            app = self.evaldesk
            self._own = MonitorState(getattr(app, "policy", None), clock=getattr(app, "now", utc_now))
        return self._own

    def compose(self) -> ComposeResult:
        yield ConsoleHeader("Monitor")
        yield Static("", id="mon-title", classes="status-line")
        yield Static("", id="mon-warnings")
        with Horizontal(id="mon-plots"):
            yield SeriesPlot("trials by state", id="plot-counts")
            yield SeriesPlot("pass rate %", id="plot-pass")
        with Horizontal(id="mon-body"):
            yield Static("", id="mon-figures")
            yield DataTable(id="mon-running", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#mon-running", DataTable)
        if self._own is not None or not isinstance(getattr(self.app, "monitor", None), MonitorState):
            self._feed_current()
        self._layout(self.app.size.width, self.app.size.height)
        self.render_monitor()
        table.focus()

    # ---- data ---------------------------------------------------------------------------

    def _feed_current(self) -> None:
        """Without the App's monitor, start the series from what the App already holds."""
        app = self.evaldesk
        for key in self.keys:
            exp = app.experiment(key)
            if exp is not None and self.monitor.reading(key) is None:
                self.monitor.feed_experiment(exp)

    @on(SnapshotUpdated)
    def _on_snapshot(self, message: SnapshotUpdated) -> None:
        if self._own is not None:
            for exp in message.snapshot.experiments:
                if experiment_key(exp) in self.keys:
                    self._own.feed_experiment(exp)
        self.render_monitor()

    @on(PollingChanged)
    def _on_polling_changed(self) -> None:
        self.render_monitor()

    def on_resize(self, event: Resize) -> None:
        self._layout(event.size.width, event.size.height)
        self.call_after_refresh(self.render_monitor)

    def _layout(self, width: int, height: int) -> None:
        self.query_one("#plot-pass").display = width >= WIDE_BELOW
        self.set_class(width < WIDE_BELOW, "-narrow")
        self.set_class(height < SHORT_BELOW, "-short")

    @work(thread=True, group="monitor-history", exit_on_error=False)
    def _rebuild_history(self, key: str, exp: Experiment) -> None:
        samples = history(exp, self.evaldesk.now(), self.evaldesk.policy)
        self.post_message(_HistoryReady(key, samples))

    @on(_HistoryReady)
    def _on_history(self, message: _HistoryReady) -> None:
        self._history[message.key] = message.samples
        self.render_monitor()

    # ---- drawing ------------------------------------------------------------------------

    def render_monitor(self) -> None:
        with self.monitor.lock:
            self._render_monitor()

    def _render_monitor(self) -> None:
        key = self.key
        title = self.query_one("#mon-title", Static)
        series = self.monitor.series(key) if key else None
        reading = series.latest if series else None
        exp = self.evaldesk.experiment(key) if key else None
        if series is None or reading is None:
            name = key.split("::", 1)[-1] or "nothing selected"
            title.update(Text(f"{term_safe(name)}: not in the latest scan", style="bold red"))
            self.query_one("#mon-warnings", Static).update("")
            self.query_one("#mon-figures", Static).update("")
            self.query_one("#mon-running", DataTable).clear()
            return
        width = self.size.width or self.app.size.width or 80
        tail = Text(f" · poll {len(series.samples)} at {reading.at.strftime('%H:%M:%S')}", style="dim")
        if len(self.keys) > 1:
            tail.append(f" [{self.index + 1}/{len(self.keys)}]", style="bold")
        if self.paused:
            tail.append(" ")
            tail.append(" PAUSED ", style="bold black on yellow")  # p pauses polling (app-wide)
        head = Text.assemble(state_badge(reading.state.value, compact=True), " ", (term_safe(reading.id), "bold"))
        if exp is not None and width >= WIDE_BELOW:
            model = (exp.model or "—").split("/")[-1]
            head.append(f" · {term_safe(exp.benchmark or '—')} · {term_safe(model)}", style="dim")
        head.truncate(max(10, width - 2 - len(tail.plain)), overflow="ellipsis")
        title.update(head + tail)
        self.query_one("#mon-warnings", Static).update(warning_lines(self.monitor.warnings_for(key), width))
        if key not in self._history and exp is not None:
            self._history[key] = []
            self._rebuild_history(key, exp)
        samples = joined(self._history.get(key, []), list(series.samples))
        self.query_one("#plot-counts", SeriesPlot).show(counts_plot(samples))
        expected = reading.alignment.expected if reading.alignment else None
        self.query_one("#plot-pass", SeriesPlot).show(pass_plot(samples, expected))
        compact = width < WIDE_BELOW or (self.size.height or self.app.size.height) < SHORT_BELOW
        self.query_one("#mon-figures", Static).update(figures_text(reading, compact, self.monitor.window_s))
        self._fill_running(reading)

    def _fill_running(self, reading: Reading) -> None:
        table = self.query_one("#mon-running", DataTable)
        stuck = {w.trial for w in self.monitor.warnings_for(reading.key) if w.rule == "d"}
        # the activity column takes what is left, so the table never scrolls sideways;
        # too narrow for it, it goes
        width = table.size.width or 60
        cols = {"trial": max(24, width // 3), "running": 8, "idle": 7}
        if width < 60:
            cols = {"trial": 18, "running": 7, "idle": 7}
        room = width - sum(cols.values()) - 2 * (len(cols) + 1) - 2
        if room >= 12:
            cols["activity"] = room
        table.clear(columns=True)
        for col, w in cols.items():
            table.add_column(col, key=col, width=w)
        names = [trial_label(term_safe(r.trial_name), cols["trial"]) for r in reading.running]
        for r, name in zip(reading.running, names, strict=True):
            style = "bold red" if r.path in stuck else ("yellow" if r.dispatched else "")
            cells = [
                Text(name, style=style, no_wrap=True, overflow="ellipsis"),
                Text(fmt_duration(r.running_s), style=style, justify="right"),
                Text(fmt_duration(r.idle_s), style="yellow" if r.dispatched else "", justify="right"),
            ]
            if "activity" in cols:
                act = r.activity or ("(dispatched, no activity)" if r.dispatched else "")
                # the activity is a log's last line: its colours dropped, any other control escaped
                cells.append(Text(term_safe(act, drop_sequences=True), style="dim", no_wrap=True, overflow="ellipsis"))
            table.add_row(*cells, key=r.path)
        table.border_title = f"running {len(reading.running)}"

    # ---- actions ------------------------------------------------------------------------


    def action_cycle(self, step: int) -> None:
        if len(self.keys) > 1:
            self.index = (self.index + step) % len(self.keys)
            self.render_monitor()

    def action_open_trials(self) -> None:
        if self.key:
            self.post_message(OpenView("trials", [self.key]))

    def action_audit(self) -> None:
        if self.key:
            self.post_message(OpenView("audit", [self.key]))

    def action_back(self) -> None:
        self.dismiss()

    def action_cursor(self, how: str) -> None:
        move(self.query_one("#mon-running", DataTable), how)

    def action_copy(self) -> None:
        table = self.query_one("#mon-running", DataTable)
        exp = self.evaldesk.experiment(self.key) if self.key else None
        if exp is None or not table.row_count:
            self.notify("no running trial selected", severity="warning")
            return
        row_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value or ""
        copy_location(self, self.key, posixpath.join(exp.path, row_key))
