"""`?`: the keys of the screen it was opened from, generated from the action registry and
filterable by typing."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Input, Static

from tui.actions import GLOBAL, ActionSpec, actions_for, bindings_for

KEY_NAMES = {
    "question_mark": "?", "slash": "/", "colon": ":", "escape": "esc", "enter": "enter",
    "ctrl+p": "ctrl+p", "space": "space",
}
SCREEN_TITLES = {"experiments": "Experiments", "audit": "Audit", "confirm": "Confirm", "log": "Log",
                 "help": "Help", GLOBAL: "Everywhere"}


def key_label(spec: ActionSpec, keymap: dict[str, str]) -> str:
    key = keymap.get(spec.id, spec.key)
    if key == spec.key and spec.key_display:
        return spec.key_display if spec.key_display != "⏎" else "enter"
    return ",".join(KEY_NAMES.get(k, k) for k in key.split(","))


class HelpScreen(ModalScreen[None]):
    SCREEN_ID = "help"
    BINDINGS = bindings_for("help")
    CSS_PATH = "help.tcss"

    def __init__(self, for_screen: Screen[object] | None = None) -> None:
        super().__init__()
        self.scope = getattr(for_screen, "SCREEN_ID", GLOBAL)
        self.entries: list[tuple[str, str, str, str]] = []
        self._show_ids = False

    def compose(self) -> ComposeResult:
        with Vertical(id="help") as box:
            box.border_title = f"Keys — {SCREEN_TITLES.get(self.scope, self.scope)}"
            yield Input(placeholder="type to filter keys", id="help-filter")
            yield DataTable(id="help-keys", cursor_type="row", show_cursor=False)
            yield Static("esc closes · ctrl+p or : opens the command palette", id="help-hint")

    def on_mount(self) -> None:
        keymap = getattr(self.app, "keymap", {}) or {}
        seen = set()
        specs = actions_for(self.scope)
        # this screen's keys first, then the ones that work everywhere
        specs = [a for a in specs if a.screen != GLOBAL] + [a for a in specs if a.screen == GLOBAL]
        for spec in specs:
            sig = (spec.key, spec.action)
            if sig in seen:
                continue
            seen.add(sig)
            where = "" if spec.screen != GLOBAL else "everywhere"
            self.entries.append((key_label(spec, keymap), spec.long, where, spec.id))
        self.entries.append(("ctrl+q", "Quit evaldesk", "everywhere", ""))
        table = self.query_one(DataTable)
        table.add_column("key", width=7, key="key")
        # the id is what [keys] in the config remaps; shown where there is room for it
        self._show_ids = self.app.size.width >= 100
        # the text wraps in a column as wide as the box allows, never cut (help.tcss: 90%, ≤ 100;
        # the scrollbar takes 2)
        box = min(100, self.app.size.width * 9 // 10) - 4
        ids = 30 if self._show_ids else 0
        table.add_column("does", key="does", width=max(20, box - 9 - 2 - 3 - ids - (2 if ids else 0)))
        if self._show_ids:
            table.add_column(Text("id, for [keys]"), key="id", width=ids)
        inp = self.query_one(Input)
        inp.cursor_blink = getattr(self.app, "cursor_blink", True)
        self._fill("")
        inp.focus()

    def _fill(self, query: str) -> None:
        table = self.query_one(DataTable)
        table.clear()
        q = query.strip().lower()
        for key, does, where, binding_id in self.entries:
            if q and q not in f"{key} {does} {where} {binding_id}".lower():
                continue
            cell = Text(does)
            if where:
                cell.append(f" · {where}", style="dim")
            if q:
                cell.highlight_words([q], style="reverse", case_sensitive=False)
            if self._show_ids:
                table.add_row(Text(key, style="bold"), cell, Text(binding_id, style="dim"), height=None)
            else:
                table.add_row(Text(key, style="bold"), cell, height=None)

    @on(Input.Changed, "#help-filter")
    def _on_filter(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll(self, move: str) -> None:
        # the filter box keeps focus so typing filters; the arrows and pages move the list
        table = self.query_one("#help-keys", DataTable)
        getattr(table, f"scroll_{move}")(animate=False)
