"""A table that draws only the rows on screen, so 100k trial attempts open as fast as 100.

`VirtualTable` knows nothing about trials: it asks a callback for the cells of row i when
that row becomes visible (Line API: one `render_line` per screen line). The stock DataTable
builds every row up front (21 s for 100k rows, DESIGN 9); this one costs the same for any
number of rows once the caller has an index of them.

`trial_cells`/`TRIAL_COLUMNS` and `group_cells`/`GROUP_COLUMNS` are the trial screen's two
views, kept here so every screen that lists trials formats them the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Literal

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from services.core.models import Trial, TrialStatus
from services.core.text import term_safe
from services.core.times import as_utc

Cell = str | tuple[str, str]  # text, or (text, component class that styles it)


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    justify: Literal["left", "right"] = "left"


class VirtualTable(ScrollView, can_focus=True):
    """A fixed header line over `row_count` rows whose cells come from `cells(i)`."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "vtable--header",
        "vtable--cursor",
        "vtable--cursor-blurred",
        "vtable--good",
        "vtable--bad",
        "vtable--warn",
        "vtable--muted",
        "vtable--marked",
    }
    DEFAULT_CSS = """
    VirtualTable {
        background: $surface;
        scrollbar-size-vertical: 1;
    }
    VirtualTable > .vtable--header { background: $panel; color: $text; text-style: bold; }
    VirtualTable > .vtable--cursor { background: $accent; color: $text; }
    VirtualTable > .vtable--cursor-blurred { background: $accent 40%; }
    VirtualTable > .vtable--good { color: $success; }
    VirtualTable > .vtable--bad { color: $error; }
    VirtualTable > .vtable--warn { color: $warning; }
    VirtualTable > .vtable--muted { color: $text-muted; }
    VirtualTable > .vtable--marked { text-style: bold; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up_rows", "Page up", show=False),
        Binding("pagedown", "page_down_rows", "Page down", show=False),
        Binding("home", "first_row", "First row", show=False),
        Binding("end", "last_row", "Last row", show=False),
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
        Binding("enter", "select_row", "Select", show=False),
    ]

    cursor: reactive[int] = reactive(0, always_update=True, repaint=False)

    class Highlighted(Message):
        def __init__(self, table: VirtualTable, index: int) -> None:
            super().__init__()
            self.table = table
            self.index = index

        @property
        def control(self) -> VirtualTable:
            return self.table

    class Selected(Message):
        def __init__(self, table: VirtualTable, index: int) -> None:
            super().__init__()
            self.table = table
            self.index = index

        @property
        def control(self) -> VirtualTable:
            return self.table

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.columns: list[Column] = []
        self.row_count = 0
        self._cells: Callable[[int], Sequence[Cell]] = lambda i: ()
        self._cache: dict[int, Sequence[Cell]] = {}
        self._styles: dict[str, Style] = {}
        self.empty_text = "no rows"

    # ------------------------------------------------------------------ data
    def set_data(self, columns: Sequence[Column], row_count: int, cells: Callable[[int], Sequence[Cell]],
                 cursor: int = 0) -> None:
        self.columns = list(columns)
        self.row_count = row_count
        self._cells = cells
        self._cache.clear()
        width = sum(c.width for c in self.columns) + max(0, len(self.columns) - 1) + 1
        self.virtual_size = Size(width, row_count + 1)
        self.cursor = max(0, min(cursor, row_count - 1))
        self.refresh()

    def row_cells(self, index: int) -> Sequence[Cell]:
        cached = self._cache.get(index)
        if cached is None:
            if len(self._cache) > 2048:
                self._cache.clear()
            cached = self._cache[index] = self._cells(index)
        return cached

    def row_text(self, index: int) -> list[str]:
        return [c if isinstance(c, str) else c[0] for c in self.row_cells(index)]

    # ------------------------------------------------------------------ cursor
    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, self.row_count - 1)) if self.row_count else 0

    def watch_cursor(self, old: int, new: int) -> None:
        if not self.is_mounted:
            return
        body = self.body_height
        if new < self.scroll_y:
            self.scroll_to(y=new, animate=False, immediate=True, force=True)
            self.refresh()
        elif new >= self.scroll_y + body:
            self.scroll_to(y=new - body + 1, animate=False, immediate=True, force=True)
            self.refresh()
        else:
            # the view did not move: only the two rows the cursor left and reached change
            for index in (old, new):
                if 0 <= index < self.row_count:
                    self.refresh_line(index + 1)  # (line 0 is the header)
        if self.row_count:
            self.post_message(self.Highlighted(self, new))

    @property
    def body_height(self) -> int:
        """Rows of data on screen (the header line and any scrollbar excluded)."""
        return max(1, self.scrollable_content_region.height - 1)

    def action_cursor_up(self) -> None:
        self.cursor -= 1

    def action_cursor_down(self) -> None:
        self.cursor += 1

    def action_page_up_rows(self) -> None:
        self.cursor -= self.body_height

    def action_page_down_rows(self) -> None:
        self.cursor += self.body_height

    def action_first_row(self) -> None:
        self.cursor = 0

    def action_last_row(self) -> None:
        self.cursor = self.row_count - 1

    def action_select_row(self) -> None:
        if self.row_count:
            self.post_message(self.Selected(self, self.cursor))

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self.cursor = int(self.scroll_y) + event.y - 1

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()

    # ------------------------------------------------------------------ rendering
    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(name, partial=True)
        return style

    def _line(self, cells: Sequence[Cell], base: Style) -> list[Segment]:
        segments: list[Segment] = []
        for n, column in enumerate(self.columns):
            cell = cells[n] if n < len(cells) else ""
            text, style_name = (cell, None) if isinstance(cell, str) else cell
            # cells carry names from job dirs: whatever the caller passed, no control reaches the screen
            text = term_safe(text)
            width = column.width
            if cell_len(text) > width:
                text = set_cell_size(text, width - 1) + "…" if width > 1 else text[:width]
            elif column.justify == "right":
                text = " " * (width - cell_len(text)) + text
            else:
                text = set_cell_size(text, width)
            style = base + self._style(style_name) if style_name else base
            segments.append(Segment(text, style))
            segments.append(Segment(" ", base))
        return segments

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        scroll_x = int(self.scroll_x)
        if y == 0:
            header = base + self._style("vtable--header")
            cells: list[Cell] = [c.label for c in self.columns]
            strip = Strip(self._line(cells, header))
            return strip.crop(scroll_x, scroll_x + width).adjust_cell_length(width, header)
        index = int(self.scroll_y) + y - 1
        if self.row_count == 0:
            if y == 1:
                muted = base + self._style("vtable--muted")
                return Strip([Segment(f" {self.empty_text}", muted)]).adjust_cell_length(width, base)
            return Strip.blank(width, base)
        if index >= self.row_count:
            return Strip.blank(width, base)
        line_base = base
        if index == self.cursor:
            line_base = base + self._style("vtable--cursor" if self.has_focus else "vtable--cursor-blurred")
        strip = Strip(self._line(self.row_cells(index), line_base))
        return strip.crop(scroll_x, scroll_x + width).adjust_cell_length(width, line_base)


# ---------------------------------------------------------------------- trial formatting
def fmt_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "—"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def fmt_tokens(n: int | None) -> str:
    if n is None:
        return "—"
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n // 1000}k"
    return f"{n:,}"


def fmt_reward(r: float | None) -> str:
    if r is None:
        return "—"
    return f"{r:g}" if float(r).is_integer() else f"{r:.3f}"


def fmt_cost(c: float | None) -> str:
    return "—" if c is None else f"${c:.2f}"


def trial_tokens(t: Trial) -> int | None:
    if t.n_input_tokens is None and t.n_output_tokens is None:
        return None
    return (t.n_input_tokens or 0) + (t.n_output_tokens or 0)


STATUS_STYLE = {
    TrialStatus.valid: "vtable--good",
    TrialStatus.errored: "vtable--bad",
    TrialStatus.running: "vtable--warn",
}


def _widest(values: Sequence[str | None], cap: int, floor: int) -> int:
    return max(floor, min(cap, max(map(len, filter(None, values)), default=0)))


def trial_columns(trials: Sequence[Trial]) -> list[Column]:
    """Columns sized to the data (capped), so 80 columns show the most useful part first."""
    return [
        Column("task", "task", _widest([t.task_name for t in trials], 32, 4)),
        Column("attempt", "#", 2, "right"),
        Column("reward", "reward", 6, "right"),
        Column("status", "state", 7),
        Column("exception", "exception", _widest([t.exception_type for t in trials], 26, 9)),
        Column("class", "class", _widest([t.failure_class for t in trials], 22, 5)),
        Column("duration", "time", 7, "right"),
        Column("tokens", "tokens", 6, "right"),
        Column("cost", "cost", 7, "right"),
        Column("trial", "trial", _widest([t.trial_name for t in trials], 42, 5)),
    ]


def trial_cells(t: Trial, now: datetime | None = None) -> tuple[Cell, ...]:
    duration = t.duration_s
    running = t.status == TrialStatus.running
    if running and duration is None and now is not None and t.started_at is not None:
        started = as_utc(t.started_at)
        duration = (now - started).total_seconds() if started is not None else None
    status: Cell = (t.status.value, STATUS_STYLE[t.status])
    exc = t.exception_type or ("unreadable" if t.parse_error else "")
    return (
        t.task_name,
        str(t.attempt),
        fmt_reward(t.reward),
        status,
        (exc, "vtable--bad") if exc and t.reward is None else exc,
        (t.failure_class or "", "vtable--muted"),
        fmt_duration(duration) + ("…" if running else ""),
        fmt_tokens(trial_tokens(t)),
        fmt_cost(t.cost_usd),
        (t.trial_name, "vtable--muted"),
    )


MARK = "✓ "  # the list's sign for a marked row (tui/screens/experiments.py)


def marked_columns(columns: Sequence[Column]) -> list[Column]:
    """The columns with a gutter before the first one for the mark sign, so no name is cut for it."""
    first, *rest = columns
    return [Column(first.key, "  " + first.label, first.width + len(MARK), first.justify), *rest]


def marked_cells(cells: Sequence[Cell], marked: bool) -> tuple[Cell, ...]:
    """A row's cells in `marked_columns`: ✓ and bold in the gutter of a marked row, blank otherwise."""
    first, *rest = cells
    text = first if isinstance(first, str) else first[0]
    if marked:
        return ((MARK + text, "vtable--marked"), *rest)
    return ("  " + text if isinstance(first, str) else ("  " + text, first[1]), *rest)


GROUP_COLUMNS = [
    Column("group", "exception / outcome", 32),
    Column("count", "count", 7, "right"),
    Column("share", "share", 6, "right"),
    Column("with", "reward", 6, "right"),
    Column("without", "none", 6, "right"),
    Column("class", "class", 22),
    Column("example", "example message", 60),
]


@dataclass
class Group:
    key: str
    count: int = 0
    with_reward: int = 0
    failure_class: str = ""
    example: str = ""


def group_key(t: Trial) -> str:
    """The diagnose bucket of a trial: its exception type, else what it ended as."""
    if t.exception_type:
        return t.exception_type
    if t.parse_error:
        return "(unreadable result.json)"
    if t.status == TrialStatus.running:
        return "(running)"
    if t.reward is None:
        return "(no reward, no exception)"
    return "(no exception)"


def build_groups(trials: Sequence[Trial], keys: Sequence[str] | None = None) -> list[Group]:
    groups: dict[str, Group] = {}
    for n, t in enumerate(trials):
        key = keys[n] if keys is not None else group_key(t)
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(key, failure_class=t.failure_class or "")
        g.count += 1
        if t.reward is not None:
            g.with_reward += 1
        message = t.exception_message or t.parse_error
        if not g.example and message:
            g.example = message.splitlines()[0]
    # failures first, biggest first; the plain outcomes after them
    return sorted(groups.values(), key=lambda g: (g.key.startswith("("), -g.count, g.key))


def group_cells(g: Group, total: int) -> tuple[Cell, ...]:
    share = f"{100 * g.count / total:.1f}%" if total else "—"
    style = "vtable--muted" if g.key.startswith("(") else "vtable--bad"
    return (
        (g.key, style),
        f"{g.count:,}",
        share,
        f"{g.with_reward:,}",
        f"{g.count - g.with_reward:,}",
        (g.failure_class, "vtable--muted"),
        g.example,
    )
