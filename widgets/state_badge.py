"""A coloured badge for a normalised state, usable as a table cell or as a widget.

Colours are plain Rich styles so they survive inside DataTable cells; Textual drops them
when NO_COLOR is set, and the word itself always carries the meaning.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from services.core.text import term_safe

STATE_STYLES: dict[str, str] = {
    "pending": "black on yellow",
    "dispatched": "black on bright_yellow",
    "running": "white on blue",
    "finished": "black on green",
    "failed": "white on red",
    "cancelled": "white on bright_black",
    "needs_input": "black on magenta",
    "blocked": "white on dark_orange3",
    "removed": "white on grey35",
}

SHORT: dict[str, str] = {
    "pending": "pend",
    "dispatched": "disp",
    "running": "run",
    "finished": "done",
    "failed": "fail",
    "cancelled": "canc",
    "needs_input": "input",
    "blocked": "block",
    "removed": "gone",
}


def state_badge(state: str, raw: str | None = None, compact: bool = False) -> Text:
    """` running ` on blue; the source's own word follows when it differs from ours."""
    word = SHORT.get(state, state) if compact else state
    text = Text(f" {term_safe(word)} ", style=STATE_STYLES.get(state, "reverse"))
    if raw and raw.lower() != state and not compact:
        text.append(f" {term_safe(raw)}", style="dim")
    return text


class StateBadge(Static):
    DEFAULT_CSS = """
    StateBadge { width: auto; height: 1; }
    """

    def __init__(self, state: str, raw: str | None = None, **kwargs: object) -> None:
        super().__init__(state_badge(state, raw), **kwargs)  # type: ignore[arg-type]
        self.state = state
        self.raw = raw

    def set_state(self, state: str, raw: str | None = None) -> None:
        self.state, self.raw = state, raw
        self.update(state_badge(state, raw))
