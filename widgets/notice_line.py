"""Notices in a line of the screen's own, above the footer: the content above moves up while
one shows, and is never covered (as a toast would cover the table's last rows or the detail
lines). The newest notice shows; the log (L) keeps every one."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.notifications import Notification
from textual.timer import Timer
from textual.widgets import Static

STYLES = {"error": "bold red", "warning": "bold yellow", "information": ""}


class NoticeLine(Static):
    DEFAULT_CSS = """
    NoticeLine {
        height: 1;
        padding: 0 1;
        background: $boost;
        display: none;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._notices: Iterable[Notification] = ()
        self._expiry: Timer | None = None

    def show(self, notifications: Iterable[Notification]) -> None:
        """Show the newest of `notifications` (a live collection: read again when that one expires)."""
        self._notices = notifications
        if self._expiry is not None:
            self._expiry.stop()
            self._expiry = None
        live = [n for n in notifications if not n.has_expired]
        self.display = bool(live)
        if not live:
            return
        n = live[-1]
        text = Text()
        if n.title:
            text.append(f"{n.title}: ", style="bold")
        text.append(Text(n.message.replace("\n", " "), style=STYLES.get(n.severity, "")))
        if len(live) > 1:
            text.append(f"  (+{len(live) - 1}, L: log)", style="dim")
        text.truncate(max(1, (self.size.width or self.app.size.width) - 2), overflow="ellipsis")
        self.update(text)
        # gone when it expires
        self._expiry = self.set_timer(max(0.1, n.time_left), lambda: self.show(self._notices))
