"""`:journal`: every write evaldesk made, newest first, one summarised line each (the rows of
`evaldesk --batch journal`); the highlighted write whole below."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from services.core.text import term_safe
from services.leaderboard.client import redact
from tui.actions import bindings_for
from tui.chrome import ConsoleHeader
from tui.navigation import move
from widgets.footer import KeyFooter


class JournalScreen(Screen[None]):
    SCREEN_ID = "journal"
    BINDINGS = bindings_for("journal")
    CSS_PATH = "journal.tcss"

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield ConsoleHeader("Journal")
        yield DataTable(id="journal-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="journal-detail-box"):
            yield Static("", id="journal-detail")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col, width in (("when", 19), ("user", 10), ("action", 18), ("target", None)):
            table.add_column(col, key=col, width=width)
        self.run_worker(self._load, thread=True, name="journal")
        table.focus()

    def _load(self) -> None:
        from tui.batch_leaderboard import journal_rows

        rows = journal_rows(list(self.app.journal.entries()))  # type: ignore[attr-defined]
        self.app.call_from_thread(self._fill, rows)

    def _fill(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        table = self.query_one(DataTable)
        table.clear()
        for r in rows:
            what = f"{r['action']}:{r['event'] or ''}" + (f" {r['op']}" if r.get("op") else "")
            table.add_row(r["at"][:19], Text(term_safe(r["user"])[:10]), Text(term_safe(what)),
                          Text(term_safe(redact(str(r["target"])))))
        if not rows:
            self.query_one("#journal-detail", Static).update("no writes yet")
        self._detail()

    @on(DataTable.RowHighlighted)
    def _detail(self) -> None:
        from tui.batch_leaderboard import summary

        table = self.query_one(DataTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return
        r = self.rows[table.cursor_row]
        lines = [f"record {r['record'] or '—'} · {r['at']} · {r['user']}", f"target  {r['target']}",
                 f"before  {summary(r['before'], r['after'])}", f"after   {summary(r['after'], r['before'])}"]
        if r.get("error"):
            lines.append(f"error   {r['error']}")
        self.query_one("#journal-detail", Static).update(Text(term_safe(redact("\n".join(lines)),
                                                                        keep_newlines=True)))

    def action_cursor(self, how: str) -> None:
        move(self.query_one(DataTable), how)

    def action_close(self) -> None:
        self.app.pop_screen()
