"""Home: one row per experiment from every source, filterable and sortable by keyboard."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from services.core.census import census_words
from services.core.models import AuditReport, Experiment, State, Verdict
from services.core.text import term_safe
from services.core.times import as_utc
from tui.actions import EXPERIMENT_COLUMNS, bindings_for
from tui.batch_table import Column, column_widths
from tui.chrome import ConsoleHeader, bar
from tui.context import ConsoleState, console
from tui.external import copy_location
from tui.messages import CommandChanged, HandOver, OpenView, RequestReport, SnapshotUpdated
from tui.navigation import move
from widgets.footer import KeyFooter
from widgets.ids import run_labels, shorten
from widgets.log_tail import regex_problem
from widgets.state_badge import state_badge
from widgets.verdict_style import verdict_style


def id_labels(exps: list[Experiment], width: int) -> list[str]:
    """The id column of the rows on screen: benchmark, model and date, or whatever else tells
    them apart, at any width (the full id is in the detail line and `d`). The rule is the batch
    tables' (widgets/ids.run_labels)."""
    return run_labels([(term_safe(e.id), e.benchmark_from_dir, e.model) for e in exps], width)


RUNNING_WORDS = {"resume": "resuming", "rerun": "re-running"}
# the audit column holds every verdict word whole, and the word of a command evaldesk runs ("re-running…")
VERDICT_WIDTH = max([len(v) for v in get_args(Verdict)] + [len(w) + 1 for w in RUNNING_WORDS.values()])


COMPACT_BELOW = 110  # columns; narrower terminals drop source/benchmark/model into the detail line


@dataclass(frozen=True)
class RowFilter:
    """`/` filter: a case-insensitive regex (plain text when it is not a valid one); `!` inverts."""

    text: str
    pattern: re.Pattern[str] | None
    invert: bool

    @classmethod
    def parse(cls, text: str) -> RowFilter:
        invert = text.startswith("!")
        body = text[1:] if invert else text
        if not body:
            return cls(text, None, invert)
        try:
            pattern = re.compile(body, re.IGNORECASE)
        except re.error:
            pattern = re.compile(re.escape(body), re.IGNORECASE)
        return cls(text, pattern, invert)

    def matches(self, cells: list[str]) -> bool:
        if self.pattern is None:
            return True
        hit = any(self.pattern.search(c) for c in cells)
        return hit != self.invert


def format_age(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


@dataclass
class Row:
    key: str
    exp: Experiment
    report: AuditReport | None
    age_s: float | None
    eta_s: float | None = None  # from the live monitor, for running experiments
    command: str | None = None  # "resuming", "re-running": a command evaldesk runs for it now
    cached_s: float | None = None  # shown from the last read, this many seconds old; None: fresh

    @property
    def error_fraction(self) -> float | None:
        if self.report is not None and self.report.error_fraction is not None:
            return self.report.error_fraction
        c = self.exp.counts
        return c.invalid_errors / c.total if c.total else None

    def sort_value(self, col: str) -> Any:
        e = self.exp
        values: dict[str, Callable[[], Any]] = {
            "source": lambda: e.source_label,
            "id": lambda: e.id,
            "benchmark": lambda: e.benchmark or "",
            "model": lambda: e.model or "",
            "state": lambda: list(State).index(e.state),
            "progress": lambda: (e.counts.valid / e.counts.expected) if e.counts.expected else None,
            "score": lambda: e.score,
            "errors": lambda: self.error_fraction,
            "verdict": lambda: self.report.verdict if self.report else None,
            "age": lambda: self.age_s,
        }
        return values[col]()

    def cell_text(self, col: str, compact: bool, width: int) -> Text:
        e = self.exp
        c = e.counts
        # ids, names and labels come from job dirs: escaped before they are measured or cut
        if col == "source":
            return Text(term_safe(e.source_label))
        if col == "id":
            return Text(shorten(term_safe(e.id), width))
        if col == "benchmark":
            b = term_safe(e.benchmark or "—")
            return Text(b if len(b) <= width else b[: width - 1] + "…")
        if col == "model":
            m = term_safe((e.model or "—").split("/")[-1] if e.model else "—")
            return Text(m if len(m) <= width else m[: width - 1] + "…")
        if col == "state":
            return state_badge(e.state.value, e.state_raw, compact=True)
        if col == "progress":
            expected = c.expected if c.expected is not None else "?"
            text = Text(f"{c.valid}/{expected}")
            if e.state in (State.running, State.dispatched, State.pending) and c.expected:
                eta = f" {format_age(self.eta_s)}" if self.eta_s is not None else ""
                room = max(0, width - len(text.plain) - 1 - len(eta))
                if room >= 3:
                    text.append(" " + bar(c.total, c.expected, room), style="blue")
                if eta and len(text.plain) + len(eta) <= width:
                    text.append(eta, style="dim")
            return text
        if col == "score":
            return Text("—" if e.score is None else f"{e.score:.3f}", justify="right")
        if col == "errors":
            frac = self.error_fraction
            if frac is None:
                return Text("—", justify="right")
            # red where the error gate fails: the policy's limit, judged by the check that owns it
            over = self.report is not None and any(c.id == "error_gate" and c.status == "fail"
                                                   for c in self.report.checks)
            return Text(f"{100 * frac:.1f}", style="bold red" if over else "", justify="right")
        if col == "verdict":
            if self.command is not None:
                # a resume or re-run evaldesk runs for this row: that is its state for now
                word = f"{self.command}…"
                return Text(word if len(word) <= width else word[: width - 1] + "…", style="bold blue")
            if self.report is None:
                return Text("…", style="dim")
            v = self.report.verdict
            return Text(v, style=verdict_style(v))
        if col == "age":
            # a row kept from a source that is down says so where the eye looks for freshness
            if e.stale_since is not None:
                return Text("stale", style="bold yellow", justify="right")
            return Text(format_age(self.age_s), justify="right")
        raise KeyError(col)


# fixed widths; id, benchmark and model share what is left (and source when it says something)
WIDE = {"state": 6, "progress": 13, "score": 5, "errors": 5, "verdict": VERDICT_WIDTH, "age": 3}
NARROW = {"state": 6, "progress": 9, "score": 5, "errors": 5, "verdict": VERDICT_WIDTH, "age": 3}
FLEXIBLE = ("source", "id", "benchmark", "model")
COMPACT_COLS = ("source", "id", "state", "progress", "score", "errors", "verdict", "age")


class ExperimentsScreen(Screen[None]):
    SCREEN_ID = "experiments"
    CSS_PATH = "experiments.tcss"
    BINDINGS = bindings_for("experiments")

    def __init__(self) -> None:
        super().__init__()
        self.sort_col = "age"
        self.sort_reverse = False
        self.filter = RowFilter.parse("")
        self.last_filter = ""
        self._filter_before_edit = ""
        self.compact: bool | None = None
        self.rows: list[Row] = []
        self.shown: list[Row] = []
        self.marks: set[str] = set()  # row keys marked with space

    @property
    def evaldesk(self) -> ConsoleState:
        return console(self)

    def compose(self) -> ComposeResult:
        yield ConsoleHeader("Experiments")
        yield Static("", id="status", classes="status-line")
        yield DataTable(id="experiments", cursor_type="row", zebra_stripes=True)
        yield Static("", id="detail", classes="detail-line")
        yield Input(placeholder="filter: text or regex, ! inverts — enter keeps, esc cancels", id="filter")
        yield KeyFooter()

    def on_mount(self) -> None:
        flt = self.query_one("#filter", Input)
        flt.display = False
        flt.cursor_blink = self.evaldesk.cursor_blink
        self.rebuild()
        self.query_one(DataTable).focus()

    # ---- data ---------------------------------------------------------------------------

    @on(SnapshotUpdated)
    def _on_snapshot(self, message: SnapshotUpdated) -> None:
        self.rebuild()

    @on(CommandChanged)
    def _on_command(self) -> None:
        self.rebuild()

    def on_resize(self, event: Resize) -> None:
        compact = event.size.width < COMPACT_BELOW
        if compact != self.compact:
            self.rebuild()

    def selected_key(self) -> str | None:
        table = self.query_one(DataTable)
        if not self.shown or table.cursor_row < 0 or table.cursor_row >= len(self.shown):
            return None
        return self.shown[table.cursor_row].key

    def _columns(self, width: int, rows: list[Row] | None = None) -> list[tuple[str, int]]:
        compact = width < COMPACT_BELOW
        rows = self.rows if rows is None else rows
        several = len({r.exp.source_label for r in rows}) > 1
        # one source is named in the header: its column would say the same on every row
        cols = [c for c, _ in EXPERIMENT_COLUMNS if (not compact or c in COMPACT_COLS)
                and (c != "source" or several)]
        fixed = dict(NARROW if compact else WIDE)
        if any(r.exp.stale_since is not None for r in rows):
            fixed["age"] = len("stale")  # a row kept from a source that is down says so whole
        natural = {"source": [term_safe(r.exp.source_label) for r in rows],
                   "id": [term_safe(r.exp.id) for r in rows],
                   "benchmark": [term_safe(r.exp.benchmark or "—") for r in rows],
                   "model": [term_safe((r.exp.model or "—").split("/")[-1]) for r in rows]}
        # a fixed column is as wide as `fixed` says, whatever its key's length: the flexible ones get the rest
        spec = [Column(c if c in FLEXIBLE else c[: fixed[c]], flexible=c in FLEXIBLE,
                       weight={"id": 3, "source": 1}.get(c, 2)) for c in cols]
        longest = max(len(rows), 1)
        table = [[(natural[c][i] if c in natural and i < len(rows) else "x" * fixed.get(c, 0)) for c in cols]
                 for i in range(longest)]
        # cell padding is 1 each side: 2 a column, where the batch rule counts 2 between columns (one fewer);
        # a vertical scrollbar takes 2 columns once the rows outgrow the screen
        scrollbar = 2 if len(rows) > max(0, (self.size.height or 24) - 7) else 0
        widths = column_widths(spec, table, width - 2 - scrollbar)
        return [(c, w if c in FLEXIBLE else fixed[c]) for c, w in zip(cols, widths, strict=True)]

    def rebuild(self) -> None:
        app = self.evaldesk
        now = as_utc(app.now())
        rows = []
        for exp in app.experiments():
            key = f"{exp.source_label}::{exp.id}"
            ref = as_utc(exp.finished_at or exp.updated_at or exp.started_at)
            age = (now - ref).total_seconds() if ref and now else None
            reading = app.monitor.reading(key) if exp.state == State.running else None
            run = getattr(app, "command_runs", {}).get(key)
            doing = RUNNING_WORDS.get(run.action, run.action) if run is not None and run.running else None
            cached = as_utc(getattr(app, "cached_at", {}).get(key))
            cached_s = (now - cached).total_seconds() if cached is not None and now else None
            rows.append(Row(key, exp, app.audit(key), age, reading.eta_s if reading else None, doing, cached_s))
        self.rows = rows
        self._render_table()

    def _render_table(self) -> None:
        table = self.query_one(DataTable)
        width = self.size.width or self.app.size.width or 80
        compact = width < COMPACT_BELOW
        table_cursor = table.cursor_row
        # the cursor stays on the first row while rows come in, until it is moved
        keep = self.selected_key() if table_cursor > 0 else None
        columns = self._columns(width)
        self.compact = compact

        by_id = sorted(self.rows, key=lambda r: r.exp.id)
        known = [r for r in by_id if r.sort_value(self.sort_col) is not None]
        # rows without a value sort last in both directions
        ordered = sorted(known, key=lambda r: r.sort_value(self.sort_col), reverse=self.sort_reverse)
        ordered += [r for r in by_id if r.sort_value(self.sort_col) is None]
        flt = self.filter
        visible = []
        rendered: list[list[Text]] = []
        monitor = getattr(self.evaldesk, "monitor", None)
        for row in ordered:
            # the filter also sees the columns hidden at this width, and the whole id
            plain = [row.cell_text(c, compact, 200).plain for c, _ in EXPERIMENT_COLUMNS]
            if flt.matches(plain):
                visible.append(row)
        id_width = dict(columns).get("id", 20)
        # a gutter for signs while any row needs one: ✓ marked (bold), ◷ from the last read (dim)
        gutter = any(r.key in self.marks or r.cached_s is not None for r in visible)
        for row, label in zip(visible, id_labels([r.exp for r in visible], id_width - 2 * gutter), strict=True):
            mark = row.key in self.marks
            sign = ("✓ " if mark else "◷ " if row.cached_s is not None else "  ") if gutter else ""
            style = "bold" if mark else "dim" if row.cached_s is not None else ""
            cells = [Text(sign + label, style=style) if c == "id" else row.cell_text(c, compact, w)
                     for c, w in columns]
            if monitor is not None and monitor.warnings_for(row.key):
                # a fake-execution rule holds (services/monitor/rules.py): the whole row turns red
                for cell in cells:
                    cell.stylize("bold red")
            if flt.pattern is not None and not flt.invert:
                for cell in cells:
                    cell.highlight_regex(flt.pattern, style="reverse")
            rendered.append(cells)
        self.shown = visible
        table.clear(columns=True)
        labels = dict(EXPERIMENT_COLUMNS)
        for col, w in columns:
            label = labels[col]
            if col == self.sort_col:
                label += " ▼" if self.sort_reverse else " ▲"
            table.add_column(label, width=w, key=col)
        for row, cells in zip(visible, rendered, strict=True):
            table.add_row(*cells, key=row.key)
        if keep is not None:
            for i, row in enumerate(visible):
                if row.key == keep:
                    table.move_cursor(row=i, animate=False)
                    break
        else:
            table.move_cursor(row=0, animate=False)
        self._update_status()
        self._update_detail()

    def _update_status(self) -> None:
        labels = dict(EXPERIMENT_COLUMNS)
        text = Text()
        total, shown = len(self.rows), len(self.shown)
        text.append(f"{shown} of {total} experiments" if shown != total else f"{total} experiments")
        text.append(f" · sort {labels[self.sort_col]} {'▼' if self.sort_reverse else '▲'}", style="dim")
        marked = len(self.marked_keys())
        if marked:
            text.append(f" · {marked} marked", style="bold")
            text.append(" (a R D X U act on them, ctrl+space clears)", style="dim")
        if self.filter.pattern is not None:
            text.append(" · filter ", style="dim")
            text.append(term_safe(self.filter.text), style="bold")
            body = self.filter.text[1:] if self.filter.invert else self.filter.text
            if regex_problem(body):
                text.append(" (not a regex: matched as text)", style="yellow")
        elif not self.rows:
            text.append(" · reading sources…" if self.evaldesk.scan_state else " · none found", style="dim")
        cached = [r.cached_s for r in self.rows if r.cached_s is not None]
        if cached:
            text.append(f" · ◷ {len(cached)} from the last read, {format_age(max(cached))} old", style="yellow")
        # one progress line per source being read (the header names only the first)
        for label, (done, total) in list(getattr(self.evaldesk, "scan_state", {}).items())[:4]:
            text.append(f"\n  reading {term_safe(label)}: ", style="dim")
            text.append(f"{done:,}/{total:,} " + bar(done, total, 10) if total else "listing…", style="dim")
        self.query_one("#status", Static).update(text)

    def scan_progress(self) -> None:
        """The app saw a source's scan move on: the progress lines follow."""
        if self.query("#status"):  # not yet composed: its mount draws the status line anyway
            self._update_status()

    def _update_detail(self) -> None:
        key = self.selected_key()
        row = next((r for r in self.shown if r.key == key), None)
        detail = self.query_one("#detail", Static)
        if row is None:
            detail.update("")
            return
        e, c = row.exp, row.exp.counts
        line1 = Text.assemble((term_safe(e.source_label), "bold"), " · ", term_safe(e.id))
        if e.stale_since is not None:
            age = format_age((self.evaldesk.now() - e.stale_since).total_seconds())
            line1.append(f"  STALE: last read {age} ago, the source is down", style="bold yellow")
        failing = self.evaldesk.poll_failures.get(e.source_label)
        if failing is not None:
            # the header has room for a few words of it; the whole reason goes here
            count, reason = failing
            stale = line1.plain.split("  STALE", 1)[1] if "  STALE" in line1.plain else ""
            line1 = Text.assemble((e.source_label, "bold"), " · ", (f"down ×{count}: {term_safe(reason)}", "bold red"))
            if stale:
                line1.append(f" · STALE{stale}", style="bold yellow")
        after = row.report.trials.get("valid_after_dedupe") if row.report is not None else None
        line2 = Text(f"{term_safe(e.benchmark or '—')} · {term_safe(e.model or '—')} · "
                     f"{census_words(c, valid_after_dedupe=after)} · n_rep {c.n_rep or '?'}")
        if row.eta_s is not None:
            line2.append(f" · ETA {format_age(row.eta_s)}")
        monitor = getattr(self.evaldesk, "monitor", None)
        warnings = monitor.warnings_for(row.key) if monitor is not None else []
        if warnings:
            w = warnings[0]
            more = f" (+{len(warnings) - 1} more, m to monitor)" if len(warnings) > 1 else ""
            line2 = Text(f"⚠ rule {w.rule}: {term_safe(w.evidence)}{more}", style="bold red")
        detail.update(Text("\n").join([line1, line2]))

    @on(DataTable.RowHighlighted)
    def _on_highlight(self) -> None:
        self._update_detail()

    @on(DataTable.RowSelected)
    def _on_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_trials()

    # ---- actions ------------------------------------------------------------------------

    def action_open_trials(self) -> None:
        key = self.selected_key()
        if key:
            self.post_message(OpenView("trials", [key]))

    # ---- marks ----------------------------------------------------------------------------

    def marked_keys(self) -> list[str]:
        """The marked rows that still exist, in the order shown."""
        known = {r.key for r in self.rows}
        self.marks &= known
        return [r.key for r in self.shown if r.key in self.marks] + sorted(
            k for k in self.marks if k not in {r.key for r in self.shown})

    def _targets(self) -> list[str]:
        marked = self.marked_keys()
        key = self.selected_key()
        return marked or ([key] if key else [])

    def action_mark(self) -> None:
        key = self.selected_key()
        if key is None:
            return
        self.marks ^= {key}
        self._render_table()
        move(self.query_one(DataTable), "down")

    def action_clear_marks(self) -> None:
        self.marks.clear()
        self._render_table()

    def action_invert_marks(self) -> None:
        self.marks ^= {r.key for r in self.shown}
        self._render_table()

    def action_write_marked(self, action: str) -> None:
        keys = self._targets()
        if keys:
            self.app.write_marked(action, keys)  # type: ignore[attr-defined]

    def action_audit(self) -> None:
        marked = self.marked_keys()
        if len(marked) > 1:
            from tui.screens.describe import DescribeScreen, audit_fields

            self.app.push_screen(DescribeScreen(f"Audit of {len(marked)} marked run(s)",
                                                audit_fields(self.evaldesk, marked)))
            return
        key = marked[0] if marked else self.selected_key()
        if key:
            self.post_message(OpenView("audit", [key]))

    def action_results(self) -> None:
        key = self.selected_key()
        if key:
            self.post_message(OpenView("results", [key]))

    def action_report(self) -> None:
        keys = self._targets()
        if keys:
            self.post_message(RequestReport(keys))

    def action_monitor(self) -> None:
        key = self.selected_key()
        self.post_message(OpenView("monitor", [key] if key else []))

    def action_describe(self) -> None:
        key = self.selected_key()
        row = next((r for r in self.shown if r.key == key), None)
        if row is not None:
            from tui.screens.describe import DescribeScreen, describe_fields

            self.app.push_screen(DescribeScreen(row.exp.id, describe_fields(row.exp, row.report)))

    def action_cursor(self, how: str) -> None:
        move(self.query_one(DataTable), how)

    def action_copy(self) -> None:
        key = self.selected_key()
        exp = self.evaldesk.experiment(key) if key else None
        if key and exp is not None:
            copy_location(self, key, exp.path)

    def action_shell(self) -> None:
        key = self.selected_key()
        exp = self.evaldesk.experiment(key) if key else None
        if key and exp is not None:
            self.post_message(HandOver("shell", key, exp.path))

    def action_sort_by(self, col: str) -> None:
        if col == self.sort_col:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_col, self.sort_reverse = col, False
        self._render_table()

    def action_sort_next(self) -> None:
        cols = [c for c, _ in EXPERIMENT_COLUMNS]
        self.sort_col = cols[(cols.index(self.sort_col) + 1) % len(cols)]
        self.sort_reverse = False
        self._render_table()

    def action_sort_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._render_table()

    def action_filter(self) -> None:
        flt = self.query_one("#filter", Input)
        self._filter_before_edit = self.filter.text
        flt.display = True
        flt.value = self.filter.text or self.last_filter
        flt.focus()
        flt.select_all()
        if flt.value != self.filter.text:
            self._apply_filter(flt.value)

    def action_clear_filter(self) -> None:
        flt = self.query_one("#filter", Input)
        if flt.display:
            # esc while editing: back to the filter that was active before `/`
            self._apply_filter(self._filter_before_edit)
            flt.display = False
            self.query_one(DataTable).focus()
        elif self.filter.pattern is not None:
            self._apply_filter("")

    def apply_filter(self, text: str) -> None:
        """Show only the rows `text` matches (as `/` does), from `:` too."""
        self._apply_filter(text)

    def focus_after_command(self) -> None:
        self.query_one(DataTable).focus()

    def _apply_filter(self, text: str) -> None:
        self.filter = RowFilter.parse(text)
        if self.filter.pattern is not None:
            self.last_filter = text
        self._render_table()

    @on(Input.Changed, "#filter")
    def _on_filter_changed(self, event: Input.Changed) -> None:
        if event.input.display:
            self._apply_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _on_filter_submitted(self, event: Input.Submitted) -> None:
        self._apply_filter(event.value)
        event.input.display = False
        self.query_one(DataTable).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # while the filter or the command line is typed in, letters (and enter) belong to it
        if action in ("quit", "sort_next", "sort_reverse", "sort_by", "audit", "monitor", "filter", "report",
                      "open_trials", "describe", "mark", "invert_marks", "write_marked", "clear_marks"):
            return not isinstance(self.focused, Input)
        return True
