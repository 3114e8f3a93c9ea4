"""j / k / g / G in every list, whatever widget draws it: the screen's action asks the focused
list to move, in the words that widget understands."""

from __future__ import annotations

from textual.widget import Widget

# for each move, the first action the widget has wins
_ACTIONS: dict[str, tuple[str, ...]] = {
    "down": ("cursor_down", "line_down"),
    "up": ("cursor_up", "line_up"),
    "top": ("first_row", "first", "home", "scroll_top"),
    "bottom": ("last_row", "last", "end", "scroll_bottom"),
}


def move(widget: Widget | None, how: str) -> bool:
    """Move `widget`'s cursor; False when it has no such move."""
    if widget is None:
        return False
    for name in _ACTIONS[how]:
        action = getattr(widget, f"action_{name}", None)
        if callable(action):
            action()
            return True
    return False
