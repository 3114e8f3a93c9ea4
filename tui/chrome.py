"""The one-line console header every screen shows: where the data comes from, when it was
last read, whether writes are off, and the progress of scans under way."""

from __future__ import annotations

import time
from collections.abc import Iterable

from rich.text import Text
from textual.widget import Widget

from services.core.models import Experiment
from services.core.text import term_safe
from tui.context import console


def bar(done: int, total: int | None, width: int) -> str:
    if not total or width <= 0:
        return ""
    filled = max(0, min(width, round(width * done / total)))
    return "━" * filled + "╺" + "─" * max(0, width - filled - 1) if filled < width else "━" * width


FRESH_ENOUGH_S = 10  # below this, "verified … ago" says nothing a person needs


def verified_age(experiments: Iterable[Experiment]) -> int | None:
    """Seconds since the least recently verified finished trial was checked against its files,
    when that is worth saying."""
    oldest = min((e.verified_at for e in experiments if e.verified_at is not None), default=None)
    if oldest is None:
        return None
    age = int(time.time() - oldest.timestamp())
    return age if age >= FRESH_ENOUGH_S else None


class ConsoleHeader(Widget):
    DEFAULT_CSS = """
    ConsoleHeader {
        dock: top;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    """

    def __init__(self, title: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.title = title

    def render(self) -> Text:
        app = console(self)
        width = self.size.width or 80
        text = Text.assemble((" evaldesk ", "bold reverse"), (f" {term_safe(self.title)} ", "bold"))
        # the indicators a person must not miss go at the right and are never cut; where the
        # data comes from and when it was read take the room left between
        flags = Text()
        if app.paused:
            flags.append(" │ ", style="dim")
            flags.append(" PAUSED ", style="bold black on yellow")
        for label, (count, reason) in list(app.poll_failures.items())[:1]:
            flags.append(" │ ", style="dim")
            wait = app.next_poll_in.get(label)
            retry = f", retry in {wait:.0f}s" if wait and wait >= 10 else f", retry in {wait:.1f}s" if wait else ""
            down = Text(f"{term_safe(label)[:14]} down ×{count}: {term_safe(reason)}{retry}", style="bold red")
            down.truncate(max(16, width // 3), overflow="ellipsis")
            flags.append(down)
        if app.read_only:
            flags.append(" │ ", style="dim")
            flags.append(" READ-ONLY ", style="bold black on yellow")
        if app.error_count:
            flags.append(" │ ", style="dim")
            flags.append(f"{app.error_count} err (L)", style="bold red")
        middle = Text()
        # a source's label is its path or URL: shown escaped, like every name from outside
        labels = [term_safe(s.label) for s in app.sources] or ["no sources"]
        middle.append("│ ", style="dim")
        src = ", ".join(labels)
        if len(src) > 24:
            src = f"{labels[0][:18]}… +{len(labels) - 1}" if len(labels) > 1 else src[:23] + "…"
        middle.append(src)
        scans = app.scan_state
        if scans:
            label, (done, total) = next(iter(scans.items()))
            label = term_safe(label)
            pct = f" {100 * done // total}%" if total else ""
            middle.append(" │ ", style="dim")
            middle.append(f"scanning {label[:12]} {done:,}/{total:,}" if total else f"scanning {label[:12]}…")
            middle.append(pct)
            middle.append(" " + bar(done, total, 8), style="bold blue")
        elif app.last_refresh is not None:
            middle.append(" │ ", style="dim")
            middle.append(f"read {app.last_refresh.astimezone().strftime('%H:%M:%S')}")
            fresh = verified_age(app.experiments())
            if fresh is not None:
                # a poll re-checks finished trials on a rotation; say how old the oldest check is
                middle.append(f" · finished verified {fresh}s ago", style="dim")
        room = width - len(text) - len(flags)
        if room < len(middle):
            middle.truncate(max(0, room), overflow="ellipsis")
        text.append(middle)
        text.append(flags)
        text.truncate(width, overflow="ellipsis")
        return text
