"""Everything the console noticed: worker failures (with their traceback, kept here and
never printed on the terminal), unreadable files, refused writes and what writes did."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from services.core.text import term_safe
from tui.actions import bindings_for
from tui.chrome import ConsoleHeader
from tui.context import ConsoleState, console
from tui.messages import ClearLog
from tui.navigation import move
from widgets.footer import KeyFooter

LEVEL_STYLES = {"error": "bold red", "warning": "yellow", "information": "green"}


class LogScreen(Screen[None]):
    SCREEN_ID = "log"
    BINDINGS = bindings_for("log")
    CSS_PATH = "log.tcss"

    def compose(self) -> ComposeResult:
        yield ConsoleHeader("Log")
        yield DataTable(id="log-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="log-detail-box"):
            yield Static("", id="log-detail")
        yield KeyFooter()

    @property
    def evaldesk(self) -> ConsoleState:
        return console(self)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("time", width=8, key="time")
        table.add_column("level", width=7, key="level")
        table.add_column("where", width=16, key="where")
        table.add_column("message", key="message")
        self._fill()
        table.focus()

    def on_screen_resume(self) -> None:
        self._fill()

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        entries = list(reversed(self.evaldesk.event_log))
        for i, e in enumerate(entries):
            table.add_row(
                e.at.astimezone().strftime("%H:%M:%S"),
                Text(e.level[:7], style=LEVEL_STYLES.get(e.level, "")),
                Text(term_safe(e.where)[:16]),
                Text(term_safe(e.message)),
                key=str(i),
            )
        if not entries:
            self.query_one("#log-detail", Static).update(Text("Nothing logged yet.", style="dim"))
        else:
            self._show(0)

    def _show(self, index: int) -> None:
        entries = list(reversed(self.evaldesk.event_log))
        if 0 <= index < len(entries):
            e = entries[index]
            # the message is one line (a newline in a name in it is shown as ⏎); the detail, a
            # traceback say, keeps its lines
            detail = term_safe(e.message) + ("\n\n" + term_safe(e.detail, keep_newlines=True) if e.detail else "")
            self.query_one("#log-detail", Static).update(Text(detail))

    @on(DataTable.RowHighlighted)
    def _on_highlight(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    def action_cursor(self, how: str) -> None:
        move(self.query_one(DataTable), how)

    def action_copy(self) -> None:
        entries = list(reversed(self.evaldesk.event_log))
        row = self.query_one(DataTable).cursor_row
        if 0 <= row < len(entries):
            self.app.copy_to_clipboard(entries[row].message)
            self.notify("copied the message", timeout=2)

    def action_close(self) -> None:
        self.dismiss()

    def action_clear(self) -> None:
        self.post_message(ClearLog())
        self.call_after_refresh(self._fill)
