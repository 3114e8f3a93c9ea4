"""A log viewer that tails a file through an async byte-range reader.

It never reads a whole file: opening reads the last chunk, scrolling up pages backwards one
chunk at a time, and following polls the size and reads only the appended bytes. The reader
is all it knows about where the bytes live, so a local file and one behind SSH look the same.

Follow mode works like `tail -f` in a pager: new lines scroll into view while following;
scrolling up stops following (the view stays put while lines keep arriving) and End resumes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

from rich.segment import Segment
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Input, Static

from services.core.text import strip_sequences, term_safe

CHUNK = 256 * 1024
# Longer lines are cut for display: a minified JSON blob must not make every frame slow.
MAX_LINE_CHARS = 8_000
# A trailing line without newline is re-read on each poll until it ends; past this it is kept.
MAX_PARTIAL = 1024 * 1024
# One poll reads at most this much; a burst bigger than that is read over the next polls.
MAX_APPEND_READ = 4 * 1024 * 1024



def regex_problem(text: str) -> str | None:
    """Why `text` is not a valid regex (it is then searched for as typed), or None."""
    try:
        re.compile(text)
    except re.error as exc:
        return str(exc)
    return None


def _search_pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(text), re.IGNORECASE)


class ByteReader(Protocol):
    """Where the log's bytes come from."""

    async def size(self) -> int | None:
        """Current size in bytes, or None when the file does not exist."""
        ...

    async def read(self, offset: int, length: int) -> bytes: ...


class FSReader:
    """A ByteReader over anything with `stat(path)` and `read_bytes(path, offset, length)`."""

    def __init__(self, fs: object, path: str) -> None:
        self.fs = fs
        self.path = path

    async def size(self) -> int | None:
        st = await self.fs.stat(self.path)  # type: ignore[attr-defined]
        if st is None or st.is_dir:
            return None
        return int(st.size)

    async def read(self, offset: int, length: int) -> bytes:
        data: bytes = await self.fs.read_bytes(self.path, offset, length)  # type: ignore[attr-defined]
        return data


class ErrorReader:
    """A reader that only reports why there is nothing to read (a refused path, say)."""

    def __init__(self, message: str) -> None:
        self.message = message

    async def size(self) -> int | None:
        raise ValueError(self.message)

    async def read(self, offset: int, length: int) -> bytes:
        raise ValueError(self.message)


def clean_line(raw: str) -> str:
    """What a terminal can show of one log line: colours dropped, every other control character,
    an unfinished escape sequence included, shown as a visible escape (never sent raw)."""
    if "\r" in raw:
        # progress bars rewrite the line with \r; what a terminal shows is the last rewrite
        parts = [p for p in raw.split("\r") if p]
        raw = parts[-1] if parts else ""
    raw = strip_sequences(raw)
    if "\t" in raw:
        raw = raw.expandtabs(4)
    raw = term_safe(raw)
    if len(raw) > MAX_LINE_CHARS:
        raw = f"{raw[:MAX_LINE_CHARS]} … ({len(raw) - MAX_LINE_CHARS:,} more characters)"
    return raw


def _decode(data: bytes) -> str:
    # bytes that are not UTF-8 are kept (and shown as \xNN by term_safe), not replaced
    return data.decode("utf-8", errors="surrogateescape")


def split_lines(data: bytes) -> list[str]:
    return [clean_line(x) for x in _decode(data).split("\n")]


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


@dataclass
class _Opened:
    generation: int
    size: int | None
    data: bytes
    start: int
    error: str | None = None


class LogView(ScrollView, can_focus=True):
    """The scrolling lines of a LogTail; renders only what is visible (Line API)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "logview--match",
        "logview--current-match",
        "logview--notice",
    }
    DEFAULT_CSS = """
    LogView {
        background: $surface;
        scrollbar-size-vertical: 1;
    }
    LogView > .logview--match { background: $warning 40%; }
    LogView > .logview--current-match { background: $accent; color: $text; text-style: bold; }
    LogView > .logview--notice { color: $text-muted; text-style: italic; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "line_up", "Up", show=False),
        Binding("down,j", "line_down", "Down", show=False),
        Binding("pageup", "page_up_log", "Page up", show=False),
        Binding("pagedown", "page_down_log", "Page down", show=False),
        Binding("home", "home", "Top of what is loaded (loads more)", show=False),
        Binding("end", "end", "End: follow new lines", show=False),
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
    ]

    def __init__(self, owner: LogTail, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.owner = owner

    def render_line(self, y: int) -> Strip:
        return self.owner._render_visual_line(self, y)

    # Every user-initiated move upwards stops following; only End restarts it.
    def action_line_up(self) -> None:
        self.owner.follow = False
        self.scroll_to(y=self.scroll_y - 1, animate=False, immediate=True, force=True)

    def action_line_down(self) -> None:
        self.scroll_to(y=self.scroll_y + 1, animate=False, immediate=True, force=True)

    def action_page_up_log(self) -> None:
        self.owner.follow = False
        self.scroll_to(y=self.scroll_y - max(1, self.size.height - 1), animate=False, immediate=True, force=True)

    def action_page_down_log(self) -> None:
        self.scroll_to(y=self.scroll_y + max(1, self.size.height - 1), animate=False, immediate=True, force=True)

    def action_home(self) -> None:
        self.owner.follow = False
        self.scroll_to(y=0, animate=False, immediate=True, force=True)

    def action_end(self) -> None:
        self.owner.follow = True
        self.owner.scroll_to_end()

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.owner.follow = False

    # The view's room changes while the LogTail's size does not when a scrollbar appears with
    # the lines that made it needed, after they were scrolled to (under load, after the settle
    # that follows the scroll). A following view settles on its last line again.
    def watch_show_horizontal_scrollbar(self, shown: bool) -> None:
        self._scrollbars_changed()

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        self._scrollbars_changed()

    def _scrollbars_changed(self) -> None:
        if self.owner.follow:
            self.owner.call_after_refresh(self.owner._settle_end)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value < old_value:
            self.owner._maybe_page_back()


class LogTail(Vertical):
    """A titled, searchable, following view of one file at a time.

    `open(reader, title)` shows another file; the reader supplies sizes and byte ranges.
    """

    DEFAULT_CSS = """
    LogTail { height: 1fr; }
    LogTail > LogView { height: 1fr; }
    LogTail > #logtail-status { height: 1; background: $panel; color: $text-muted; padding: 0 1; }
    LogTail > #logtail-search { height: 3; display: none; }
    LogTail.-searching > #logtail-search { display: block; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search the log", key_display="/"),
        Binding("n", "next_match", "Next match", show=False),
        Binding("N", "prev_match", "Previous match", show=False),
        Binding("w", "toggle_wrap", "Wrap lines"),
    ]

    follow: reactive[bool] = reactive(True)
    wrap: reactive[bool] = reactive(False)

    class Opened(Message):
        """A file's last chunk was read (or it could not be): for tests and timings."""

        def __init__(self, log_tail: LogTail, title: str, error: str | None) -> None:
            super().__init__()
            self.log_tail = log_tail
            self.title = title
            self.error = error

    class _Loaded(Message):
        def __init__(self, result: _Opened) -> None:
            super().__init__()
            self.result = result

    class _Appended(Message):
        def __init__(self, generation: int, size: int | None, offset: int, data: bytes,
                     error: str | None) -> None:
            super().__init__()
            self.generation = generation
            self.size = size
            self.offset = offset
            self.data = data
            self.error = error

    class _Paged(Message):
        def __init__(self, generation: int, chunk_start: int, end: int, data: bytes,
                     error: str | None) -> None:
            super().__init__()
            self.generation = generation
            self.chunk_start = chunk_start
            self.end = end
            self.data = data
            self.error = error

    def __init__(self, *, poll_interval: float = 0.5, chunk: int = CHUNK, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.poll_interval = poll_interval
        self.chunk = chunk
        self.reader: ByteReader | None = None
        self.title = ""
        self._generation = 0
        self._lines: list[str] = []
        self._partial = ""
        self._first_offset = 0  # byte offset where _lines[0] starts
        self._end_offset = 0  # byte offset just past the last complete line
        self._file_size: int | None = None
        self._notice = "no file selected"
        self._binary = False
        self._max_width = 0
        self._wrap_index: list[tuple[int, int]] = []
        self._paging = False
        self._polling = False
        self._loading = False  # the first read of a file is under way: polls wait for it
        self._poll_timer: Timer | None = None
        self._search = ""
        self._search_re: re.Pattern[str] | None = None
        self._match: tuple[int, int, int] | None = None  # line, start, end
        self._search_up_pending = False
        self._new_since_unfollow = 0
        self.on_status: Callable[[str], None] | None = None

    def compose(self) -> ComposeResult:
        yield LogView(self, id="logtail-view")
        yield Input(placeholder="search (enter: find, esc: cancel)", id="logtail-search")
        yield Static("", id="logtail-status")

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    # ------------------------------------------------------------------ public API
    def open(self, reader: ByteReader, title: str) -> None:
        """Show `reader`'s file from its end, following it."""
        self._generation += 1
        self.reader = reader
        self.title = title
        self._lines = []
        self._partial = ""
        self._first_offset = self._end_offset = 0
        self._file_size = None
        self._binary = False
        self._max_width = 0
        self._match = None
        self._search_up_pending = False
        self._paging = False
        self._polling = False
        self._loading = True
        self._new_since_unfollow = 0
        self._notice = "reading …"
        self.follow = True
        self._relayout()
        self._open_worker(self._generation, reader)
        if self._poll_timer is None:
            self._poll_timer = self.set_interval(self.poll_interval, self._poll)

    def clear(self, notice: str = "no file selected") -> None:
        self._generation += 1
        self._loading = False
        self.reader = None
        self.title = ""
        self._lines = []
        self._partial = ""
        self._notice = notice
        self._relayout()

    @property
    def lines(self) -> list[str]:
        """The lines read so far, oldest first (the trailing unfinished line included)."""
        return [*self._lines, self._partial] if self._partial else list(self._lines)

    @property
    def first_offset(self) -> int:
        return self._first_offset

    @property
    def file_size(self) -> int | None:
        return self._file_size

    @property
    def notice(self) -> str:
        return self._notice

    @property
    def current_match(self) -> tuple[int, int, int] | None:
        return self._match

    def visible_lines(self) -> list[str]:
        """The text of the lines on screen, top to bottom (for tests and screenshots)."""
        view = self.view
        out = []
        for y in range(view.scrollable_content_region.height):
            strip = self._render_visual_line(view, y)
            out.append("".join(seg.text for seg in strip).rstrip())
        return out

    def scroll_to_end(self) -> None:
        view = self.view
        view.scroll_to(y=view.max_scroll_y, animate=False, immediate=True, force=True)
        self._new_since_unfollow = 0
        self._update_status()
        # a horizontal scrollbar appearing with these lines takes a row: settle after layout
        self.call_after_refresh(self._settle_end)

    def _settle_end(self) -> None:
        if self.follow and self.is_mounted:
            view = self.view
            if view.scroll_y != view.max_scroll_y:
                view.scroll_to(y=view.max_scroll_y, animate=False, immediate=True, force=True)

    # ------------------------------------------------------------------ workers (IO only)
    @work(exclusive=True, group="logtail-open", exit_on_error=False)
    async def _open_worker(self, generation: int, reader: ByteReader) -> None:
        try:
            size = await reader.size()
            if size is None:
                self.post_message(self._Loaded(_Opened(generation, None, b"", 0)))
                return
            start = max(0, size - self.chunk)
            data = await reader.read(start, size - start) if size else b""
            self.post_message(self._Loaded(_Opened(generation, size, data, start)))
        except Exception as exc:  # the reader may be remote: any failure is shown, never raised
            self.post_message(self._Loaded(_Opened(generation, None, b"", 0, error=_describe(exc))))

    @work(exclusive=True, group="logtail-poll", exit_on_error=False)
    async def _poll_worker(self, generation: int, reader: ByteReader, offset: int) -> None:
        try:
            size = await reader.size()
            data = b""
            if size is not None and size > offset:
                data = await reader.read(offset, min(size - offset, MAX_APPEND_READ))
            self.post_message(self._Appended(generation, size, offset, data, None))
        except Exception as exc:
            self.post_message(self._Appended(generation, None, offset, b"", _describe(exc)))

    @work(exclusive=True, group="logtail-page", exit_on_error=False)
    async def _page_worker(self, generation: int, reader: ByteReader, end: int) -> None:
        start = max(0, end - self.chunk)
        try:
            data = await reader.read(start, end - start)
            self.post_message(self._Paged(generation, start, end, data, None))
        except Exception as exc:
            self.post_message(self._Paged(generation, start, end, b"", _describe(exc)))

    # ------------------------------------------------------------------ handlers (state)
    @on(_Loaded)
    def _on_loaded(self, message: _Loaded) -> None:
        r = message.result
        if r.generation != self._generation:
            return
        message.stop()
        self._loading = False
        if r.error is not None:
            self._notice = f"cannot read {self.title}: {r.error}"
        elif r.size is None:
            self._notice = f"{self.title}: no such file (yet)"
        elif b"\x00" in r.data[:65536]:
            self._binary = True
            self._file_size = r.size
            self._notice = f"{self.title} is binary ({human_bytes(r.size)}): not shown"
        else:
            self._file_size = r.size
            self._ingest_tail(r.data, r.start)
            self._notice = "empty file" if not r.size else ""
        self._relayout()
        self.scroll_to_end()
        self.post_message(self.Opened(self, self.title, self._notice or None))

    def _ingest_tail(self, data: bytes, start: int) -> None:
        if start > 0:
            cut = data.find(b"\n")
            if cut < 0:
                # one line longer than a chunk: show its end rather than nothing
                cut = -1
            data = data[cut + 1:]
            start += cut + 1
        last_nl = data.rfind(b"\n")
        complete, partial = data[: last_nl + 1], data[last_nl + 1:]
        self._first_offset = start
        self._end_offset = start + len(complete)
        self._lines = split_lines(complete[:-1]) if complete else []
        self._partial = clean_line(_decode(partial)) if partial else ""
        self._max_width = max((len(x) for x in self._lines), default=0)

    def _poll(self) -> None:
        # before the first read lands, the end offset is not known: a poll from 0 would read the
        # file a second time
        if self.reader is None or self._polling or self._binary or self._loading:
            return
        self._polling = True
        self._poll_worker(self._generation, self.reader, self._end_offset)

    @on(_Appended)
    def _on_appended(self, message: _Appended) -> None:
        message.stop()
        if message.generation != self._generation:
            return
        self._polling = False
        if message.offset != self._end_offset:
            # a late reply (over SFTP replies may come in any order) for bytes already shown,
            # or not contiguous with them: appending it would show them twice or leave a hole
            return
        if message.error is not None:
            if not (self._lines or self._partial):
                self._notice = f"cannot read {self.title}: {message.error}"
                self._relayout()
            return  # a transient failure keeps what is shown
        if message.size is None:
            return  # still missing, or gone: keep what is shown
        if self.reader is not None and (message.size < self._end_offset or self._file_size is None):
            # truncated, rotated, or created since we looked: start over from its end
            self.open(self.reader, self.title)
            return
        self._file_size = message.size
        data = message.data
        if not data:
            self._update_status()
            return
        if b"\x00" in data[:65536]:
            self._binary = True
            self._notice = f"{self.title} became binary: not shown"
            self._relayout()
            return
        last_nl = data.rfind(b"\n")
        if last_nl < 0 and len(data) < MAX_PARTIAL:
            new_partial = clean_line(_decode(data))
            if new_partial != self._partial:
                self._partial = new_partial
                self._relayout(keep_bottom=self.follow)
            return
        if last_nl < 0:
            last_nl = len(data) - 1
        added = split_lines(data[:last_nl])
        self._lines.extend(added)
        self._partial = clean_line(_decode(data[last_nl + 1:]))
        self._end_offset = message.offset + last_nl + 1
        self._max_width = max(self._max_width, max((len(x) for x in added), default=0))
        self._notice = ""
        if not self.follow:
            self._new_since_unfollow += len(added)
        self._relayout(keep_bottom=self.follow)

    def _maybe_page_back(self) -> None:
        view = self.view
        if (self.reader is None or self._paging or self._first_offset <= 0
                or view.scroll_y > max(2, view.size.height)):
            return
        self._paging = True
        self._page_worker(self._generation, self.reader, self._first_offset)

    @on(_Paged)
    def _on_paged(self, message: _Paged) -> None:
        message.stop()
        if message.generation != self._generation:
            return
        self._paging = False
        if message.end != self._first_offset:
            return  # a page for a start that has moved since: its lines are not the ones above
        if message.error is not None:
            self._notice = f"cannot read earlier part: {message.error}"
            self._update_status()
            return
        data, start = message.data, message.chunk_start
        if start > 0:
            cut = data.find(b"\n")
            if cut >= 0:
                data = data[cut + 1:]
                start += cut + 1
        # the chunk ends exactly where the loaded lines begin, so its last byte is a newline
        body = data[:-1] if data.endswith(b"\n") else data
        added = split_lines(body) if data else []
        if not data:
            added = []
        before = self._visual_count()
        self._lines[:0] = added
        self._first_offset = start
        self._max_width = max(self._max_width, max((len(x) for x in added), default=0))
        if self._match is not None:
            line, s, e = self._match
            self._match = (line + len(added), s, e)
        self._rebuild_wrap()
        grown = self._visual_count() - before
        view = self.view
        view.virtual_size = Size(self._virtual_width(), self._visual_count())
        view.scroll_to(y=view.scroll_y + grown, animate=False, immediate=True, force=True)
        view.refresh()
        self._update_status()
        if self._search_up_pending:
            self._search_up_pending = False
            self._find(direction=-1, from_line=len(added))
        else:
            # keep loading while the view still sits at the top (Home, fast scrolling)
            self.call_after_refresh(self._maybe_page_back)

    # ------------------------------------------------------------------ search
    def action_search(self) -> None:
        self.add_class("-searching")
        box = self.query_one("#logtail-search", Input)
        box.value = self._search
        box.focus()

    @on(Input.Submitted, "#logtail-search")
    def _on_search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.remove_class("-searching")
        self.search(event.value)
        self.view.focus()

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and self.has_class("-searching"):
            event.stop()
            event.prevent_default()
            self.remove_class("-searching")
            self.view.focus()

    def search(self, pattern: str) -> None:
        """Highlight `pattern` (a case-insensitive regex, or plain text when it is not a valid one,
        as the experiments filter reads it) and go to the last match above the view's bottom."""
        self._search = pattern
        self._search_re = _search_pattern(pattern) if pattern else None
        self._match = None
        if self._search_re is None:
            self.view.refresh()
            self._update_status()
            return
        problem = regex_problem(pattern)
        if problem:
            self.notify(f"{pattern!r} is not a valid regex ({problem}): searching for the text as typed",
                        severity="warning", markup=False)
        self.follow = False
        view = self.view
        bottom_line = self._line_at_visual(int(view.scroll_y) + max(0, view.size.height - 1))
        self._find(direction=-1, from_line=bottom_line + 1)

    def action_next_match(self) -> None:
        self._step_match(+1)

    def action_prev_match(self) -> None:
        self._step_match(-1)

    def _step_match(self, direction: int) -> None:
        if self._search_re is None:
            self.notify("no search: press / first", severity="warning")
            return
        self.follow = False
        if self._match is None:
            view = self.view
            top = self._line_at_visual(int(view.scroll_y))
            self._find(direction, from_line=top if direction > 0 else top + 1, from_col=0)
            return
        line, start, _ = self._match
        self._find(direction, from_line=line, from_col=start + (1 if direction > 0 else 0))

    def _find(self, direction: int, from_line: int, from_col: int = 0) -> None:
        """Move to the nearest match from (from_line, from_col); upwards it loads earlier chunks."""
        rx = self._search_re
        if rx is None:
            return
        lines = self.lines
        if direction > 0:
            for i in range(max(0, from_line), len(lines)):
                m = rx.search(lines[i], from_col if i == from_line else 0)
                if m:
                    self._goto_match(i, m.start(), m.end())
                    return
            # like vi: past the last match, carry on from the top of what is loaded
            for i in range(0, min(max(0, from_line) + 1, len(lines))):
                m = rx.search(lines[i])
                if m:
                    self.notify("search hit the bottom, continued from the top", timeout=2)
                    self._goto_match(i, m.start(), m.end())
                    return
            self.notify(term_safe(f"no match for {self._search!r} in what is loaded"), severity="warning", markup=False)
        else:
            for i in range(min(from_line, len(lines) - 1), -1, -1):
                limit = from_col if i == from_line else None
                text = lines[i] if limit is None else lines[i][:limit]
                found = list(rx.finditer(text))
                if found:
                    m = found[-1]
                    self._goto_match(i, m.start(), m.end())
                    return
            if self._first_offset > 0 and self.reader is not None:
                self._search_up_pending = True
                if not self._paging:
                    self._paging = True
                    self._page_worker(self._generation, self.reader, self._first_offset)
                self._update_status(extra="searching earlier …")
                return
            for i in range(len(lines) - 1, max(-1, from_line - 1), -1):
                found = list(rx.finditer(lines[i]))
                if found:
                    self.notify("search hit the top, continued from the bottom", timeout=2)
                    self._goto_match(i, found[-1].start(), found[-1].end())
                    return
            self.notify(term_safe(f"no match for {self._search!r} in the file"), severity="warning", markup=False)
        self.view.refresh()
        self._update_status()

    def _goto_match(self, line: int, start: int, end: int) -> None:
        self._match = (line, start, end)
        view = self.view
        vis = self._visual_of(line, start)
        height = max(1, view.size.height)
        if not (view.scroll_y <= vis < view.scroll_y + height):
            view.scroll_to(y=max(0, vis - height // 2), animate=False, immediate=True, force=True)
        if not self.wrap:
            width = max(1, view.size.width)
            if not (view.scroll_x <= start and end <= view.scroll_x + width):
                view.scroll_to(x=max(0, start - width // 3), animate=False, immediate=True, force=True)
        view.refresh()
        self._update_status()

    # ------------------------------------------------------------------ wrap
    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap

    def watch_wrap(self, wrap: bool) -> None:
        if not self.is_mounted:
            return
        anchor = self._line_at_visual(int(self.view.scroll_y))
        self._relayout()
        if self.follow:
            self.scroll_to_end()
        else:
            self.view.scroll_to(y=self._visual_of(anchor, 0), x=0, animate=False, immediate=True, force=True)

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self._new_since_unfollow = 0
        if self.is_mounted:
            self._update_status()

    def on_resize(self, event: events.Resize) -> None:
        if self.wrap:
            self._relayout(keep_bottom=self.follow)
        elif self.follow:
            self.call_after_refresh(self._settle_end)

    # ------------------------------------------------------------------ layout and rendering
    def _wrap_width(self) -> int:
        # The room a scrollbar takes is kept free whether or not it shows: when wrapping made
        # the log long enough for one to appear, a width taken without it lost a character at
        # every wrap point.
        if not self.is_mounted:
            return 80
        view = self.view
        return max(10, view.size.width - view.styles.scrollbar_size_vertical)

    def _rebuild_wrap(self) -> None:
        if not self.wrap:
            self._wrap_index = []
            return
        width = self._wrap_width()
        index: list[tuple[int, int]] = []
        append = index.append
        for i, line in enumerate(self.lines):
            n = len(line)
            if n <= width:
                append((i, 0))
            else:
                for s in range(0, n, width):
                    append((i, s))
        self._wrap_index = index

    def _visual_count(self) -> int:
        if self.wrap:
            return len(self._wrap_index)
        return len(self._lines) + (1 if self._partial else 0)

    def _virtual_width(self) -> int:
        return self._wrap_width() if self.wrap else self._max_width + 1

    def _line_at_visual(self, y: int) -> int:
        if self.wrap:
            if not self._wrap_index:
                return 0
            return self._wrap_index[max(0, min(y, len(self._wrap_index) - 1))][0]
        return max(0, min(y, self._visual_count() - 1))

    def _visual_of(self, line: int, col: int) -> int:
        if not self.wrap:
            return line
        import bisect

        return max(0, bisect.bisect_right(self._wrap_index, (line, col)) - 1)

    def _relayout(self, keep_bottom: bool = False) -> None:
        if not self.is_mounted:
            return
        self._rebuild_wrap()
        view = self.view
        view.virtual_size = Size(self._virtual_width(), self._visual_count())
        if keep_bottom:
            self.scroll_to_end()
        view.refresh()
        self._update_status()

    def _update_status(self, extra: str = "") -> None:
        if not self.is_mounted:
            return
        parts = [self.title or "—"]
        if self._file_size is not None:
            parts.append(human_bytes(self._file_size))
            if self._first_offset > 0:
                parts.append(f"from byte {self._first_offset:,} (scroll up for more)")
        if self.reader is not None and not self._binary:
            if self.follow:
                parts.append("following")
            else:
                more = f", {self._new_since_unfollow} new" if self._new_since_unfollow else ""
                parts.append(f"paused{more} — End follows")
        if self.wrap:
            parts.append("wrap")
        if self._search:
            parts.append(f"/{self._search}")
        if extra:
            parts.append(extra)
        # the title is a file name from the job dir, the search what was typed: both shown escaped
        text = term_safe(" · ".join(parts))
        self.query_one("#logtail-status", Static).update(Text(text, no_wrap=True, overflow="ellipsis"))
        if self.on_status is not None:
            self.on_status(text)

    def _render_visual_line(self, view: LogView, y: int) -> Strip:
        width = view.scrollable_content_region.width
        base = view.rich_style
        vis = int(view.scroll_y) + y
        lines_total = self._visual_count()
        if (self._notice and not self._lines and not self._partial) or self._binary:
            if y == 0:
                notice = view.get_component_rich_style("logview--notice")
                return Strip([Segment(term_safe(self._notice), base + notice)]).adjust_cell_length(width, base)
            return Strip.blank(width, base)
        if vis >= lines_total:
            return Strip.blank(width, base)
        if self.wrap:
            line_no, col = self._wrap_index[vis]
            source = self.lines[line_no] if line_no < len(self._lines) else self._partial
            text_str = source[col: col + self._wrap_width()]
            x0 = 0
        else:
            line_no, col = vis, 0
            text_str = self._lines[vis] if vis < len(self._lines) else self._partial
            x0 = int(view.scroll_x)
        text = Text(text_str, style=base, no_wrap=True, end="")
        if self._search_re is not None and text_str:
            match_style = view.get_component_rich_style("logview--match")
            cur_style = view.get_component_rich_style("logview--current-match")
            full = self.lines[line_no]
            for m in self._search_re.finditer(full):
                s, e = m.start() - col, m.end() - col
                if e <= 0 or s >= len(text_str):
                    continue
                is_cur = self._match is not None and self._match[0] == line_no and self._match[1] == m.start()
                text.stylize(cur_style if is_cur else match_style, max(0, s), min(len(text_str), e))
        segments = list(text.render(self.app.console))
        strip = Strip(segments)
        if x0:
            strip = strip.crop(x0, x0 + width)
        return strip.adjust_cell_length(width, base).simplify()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "is a directory"
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
