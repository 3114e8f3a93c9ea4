"""A keyboard-navigable checklist: one multi-line row per check, with status icon,
evidence and the single recommended action. Data-agnostic: rows are `ChecklistItem`s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rich.console import Group
from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from services.core.text import term_safe

# Emoji icons are two cells wide and missing from some terminal fonts; EVALDESK_ASCII=1
# (or a dumb terminal) switches to ASCII marks that render everywhere.
EMOJI_ICONS = {"pass": "✅", "warn": "⚠️ ", "fail": "❌", "skip": "➖"}
ASCII_ICONS = {"pass": "[ok]", "warn": "[!!]", "fail": "[XX]", "skip": "[--]"}
PLAIN_ICONS = {"pass": "✔", "warn": "!", "fail": "✘", "skip": "–"}
STATUS_STYLES = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def icon_set() -> dict[str, str]:
    """EVALDESK_ICONS=emoji|ascii|plain, EVALDESK_ASCII=1: display switches, not config keys."""
    mode = os.environ.get("EVALDESK_ICONS", "").lower()
    if mode == "emoji":
        return EMOJI_ICONS
    ascii_only = os.environ.get("EVALDESK_ASCII", "").strip().lower() in ("1", "true", "yes", "on")
    if mode == "ascii" or (ascii_only and mode != "plain") or os.environ.get("TERM") == "dumb":
        return ASCII_ICONS
    # single-width marks keep columns aligned in every terminal, including 80x24 ones
    return PLAIN_ICONS


@dataclass(frozen=True)
class ChecklistItem:
    id: str
    status: str  # pass | warn | fail | skip
    title: str
    evidence: str
    action: str | None = None
    runnable: str | None = None  # the id of a fix that can be run from this row


def render_item(item: ChecklistItem, icons: dict[str, str]) -> Group:
    style = STATUS_STYLES.get(item.status, "")
    head = Text.assemble((f"{icons.get(item.status, '?')} ", style), (term_safe(item.title), "bold"))
    if item.runnable:
        head.append(f"  [x: {term_safe(item.runnable)}]", style="reverse")
    parts = [head, Text(f"   {term_safe(item.evidence)}", style="")]
    if item.action:
        parts.append(Text(f"   → {term_safe(item.action)}", style="italic " + style))
    return Group(*parts)


class Checklist(OptionList):
    DEFAULT_CSS = """
    Checklist { height: 1fr; }
    Checklist > .option-list--option { padding: 0 1; }
    """

    def __init__(self, items: list[ChecklistItem] | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.icons = icon_set()
        self.items: list[ChecklistItem] = []
        if items:
            self.set_items(items)

    def set_items(self, items: list[ChecklistItem]) -> None:
        keep = self.highlighted
        self.items = list(items)
        self.clear_options()
        self.add_options([Option(render_item(i, self.icons), id=i.id) for i in self.items])
        if self.items:
            self.highlighted = min(keep or 0, len(self.items) - 1)

    @property
    def selected_item(self) -> ChecklistItem | None:
        if self.highlighted is None or not (0 <= self.highlighted < len(self.items)):
            return None
        return self.items[self.highlighted]
