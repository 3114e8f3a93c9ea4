"""The log tail against real files on disk: follow, pause, resume, search, wrap, big and bad files."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App, ComposeResult
from textual.pilot import Pilot

from services.transport.fs import LocalFS
from widgets.log_tail import ErrorReader, FSReader, LogTail


class TailApp(App[None]):
    def __init__(self, path: Path | None = None, chunk: int = 64 * 1024) -> None:
        super().__init__()
        self.path = path
        self.chunk = chunk
        self.opened_at: float | None = None

    def compose(self) -> ComposeResult:
        yield LogTail(poll_interval=0.05, chunk=self.chunk)

    def on_mount(self) -> None:
        tail = self.query_one(LogTail)
        tail.view.focus()
        if self.path is not None:
            self.started = time.perf_counter()
            tail.open(FSReader(LocalFS(), str(self.path)), self.path.name)

    def on_log_tail_opened(self, message: LogTail.Opened) -> None:
        self.opened_at = time.perf_counter()


async def wait_for(pilot: Pilot[None], cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


def write_lines(path: Path, start: int, end: int, mode: str = "a") -> None:
    with path.open(mode) as fh:
        for i in range(start, end):
            fh.write(f"line {i:05d} INFO step done\n")


async def test_follows_stops_on_scroll_up_and_resumes_on_end(tmp_path: Path) -> None:
    log = tmp_path / "trial.log"
    write_lines(log, 1, 51, "w")
    app = TailApp(log)
    async with app.run_test(size=(80, 20)) as pilot:
        tail = app.query_one(LogTail)
        await wait_for(pilot, lambda: app.opened_at is not None)
        await wait_for(pilot, lambda: tail.visible_lines()[-1].startswith("line 00050"))
        assert "following" in tail.query_one("#logtail-status").render().plain  # type: ignore[union-attr]

        write_lines(log, 51, 56)
        await wait_for(pilot, lambda: tail.visible_lines()[-1].startswith("line 00055"))

        await pilot.press("up", "up")
        assert tail.follow is False
        write_lines(log, 56, 61)
        await wait_for(pilot, lambda: len(tail.lines) == 60)
        await pilot.pause()
        shown = "\n".join(tail.visible_lines())
        assert "line 00060" not in shown, "a paused view must not jump to new lines"
        status = tail.query_one("#logtail-status").render().plain  # type: ignore[union-attr]
        assert "paused, 5 new" in status

        await pilot.press("end")
        assert tail.follow is True
        await wait_for(pilot, lambda: tail.visible_lines()[-1].startswith("line 00060"))

        # a line written in two parts shows as it grows and is not duplicated when it ends
        with log.open("a") as fh:
            fh.write("half a li")
        await wait_for(pilot, lambda: tail.visible_lines()[-1] == "half a li")
        with log.open("a") as fh:
            fh.write("ne\n")
        await wait_for(pilot, lambda: tail.lines[-1] == "half a line")
        assert tail.lines.count("half a line") == 1


async def test_a_line_that_brings_a_scrollbar_stays_in_sight_while_following(tmp_path: Path) -> None:
    # the first line wider than the view makes a horizontal scrollbar take a row after the view
    # was scrolled to the end: following must still show that line, and so must the next ones
    log = tmp_path / "trial.log"
    write_lines(log, 1, 41, "w")
    app = TailApp(log)
    async with app.run_test(size=(40, 12)) as pilot:
        tail = app.query_one(LogTail)
        await wait_for(pilot, lambda: tail.visible_lines()[-1].startswith("line 00040"))
        assert not tail.view.show_horizontal_scrollbar
        with log.open("a") as fh:
            fh.write("wide " + "x" * 80 + "\n")
        await wait_for(pilot, lambda: tail.view.show_horizontal_scrollbar)
        await wait_for(pilot, lambda: tail.visible_lines()[-1].startswith("wide xxx"))
        assert tail.view.scroll_y == tail.view.max_scroll_y and tail.follow
        write_lines(log, 41, 43)
        await wait_for(pilot, lambda: tail.visible_lines()[-1].startswith("line 00042"))


async def test_search_highlights_and_steps_with_n_and_shift_n(tmp_path: Path) -> None:
    log = tmp_path / "trial.log"
    lines = [f"{i:03d} ok" for i in range(100)]
    for i in (10, 40, 70):
        lines[i] = f"{i:03d} ERROR boom"
    log.write_text("\n".join(lines) + "\n")
    app = TailApp(log)
    async with app.run_test(size=(80, 20)) as pilot:
        tail = app.query_one(LogTail)
        await wait_for(pilot, lambda: app.opened_at is not None)
        await pilot.press("slash")
        await pilot.press(*"error")
        await pilot.press("enter")
        await pilot.pause()
        assert tail.current_match is not None and tail.current_match[0] == 70
        assert any("070 ERROR boom" in x for x in tail.visible_lines())
        assert tail.follow is False
        await pilot.press("N")
        assert tail.current_match[0] == 40
        await pilot.press("N")
        assert tail.current_match[0] == 10
        assert any("010 ERROR boom" in x for x in tail.visible_lines())
        await pilot.press("n")
        assert tail.current_match[0] == 40
        await pilot.press("n")
        assert tail.current_match[0] == 70
        await pilot.press("n")
        assert tail.current_match[0] == 10  # past the last match: on from the top, like vi


async def test_search_takes_a_regex_and_falls_back_to_text(tmp_path: Path) -> None:
    log = tmp_path / "trial.log"
    lines = [f"{i:03d} ok" for i in range(50)]
    lines[20] = "020 ERROR code=137"
    lines[10] = "010 warning [retry 2]"
    log.write_text("\n".join(lines) + "\n")
    app = TailApp(log)
    async with app.run_test(size=(80, 20)) as pilot:
        tail = app.query_one(LogTail)
        await wait_for(pilot, lambda: app.opened_at is not None)
        tail.search(r"code=\d+")
        await wait_for(pilot, lambda: tail.current_match is not None)
        assert tail.current_match is not None and tail.current_match[0] == 20
        tail.search("[retry")  # not a valid regex: searched as text
        await wait_for(pilot, lambda: tail.current_match is not None)
        assert tail.current_match is not None and tail.current_match[0] == 10


async def test_wrap_toggle_splits_long_lines(tmp_path: Path) -> None:
    log = tmp_path / "trial.log"
    long = "x" * 150 + "END"
    log.write_text(f"short\n{long}\n")
    app = TailApp(log)
    async with app.run_test(size=(60, 12)) as pilot:
        tail = app.query_one(LogTail)
        await wait_for(pilot, lambda: app.opened_at is not None)
        await pilot.pause()
        assert not any("END" in x for x in tail.visible_lines())
        await pilot.press("w")
        await pilot.pause()
        shown = [x for x in tail.visible_lines() if x]
        assert shown[0] == "short"
        assert len(shown) >= 3 and shown[-1].endswith("END")
        await pilot.press("w")
        await pilot.pause()
        assert [x for x in tail.visible_lines() if x][1].startswith("xxxx")


async def test_big_log_opens_from_the_end_and_pages_backwards(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    line = "2026-11-20 12:00:00,000 INFO harbor.trial: episode tokens in=12345 out=678 ok ok ok\n"
    n = 20 * 1024 * 1024 // len(line) + 1
    with log.open("w") as fh:
        fh.write("".join(f"{i:07d} {line}" for i in range(n)))
    size = log.stat().st_size
    assert size > 20 * 1024 * 1024
    app = TailApp(log, chunk=256 * 1024)
    async with app.run_test(size=(100, 30)) as pilot:
        tail = app.query_one(LogTail)
        await wait_for(pilot, lambda: app.opened_at is not None)
        assert app.opened_at is not None
        assert app.opened_at - app.started < 1.0
        assert tail.visible_lines()[-1].startswith(f"{n - 1:07d}")
        loaded = len(tail.lines)
        assert loaded < n // 10, "opening must read only the end of the file"
        first = tail.first_offset
        assert first > size - 300 * 1024
        assert tail.lines[0].startswith(f"{n - loaded:07d}")  # starts on a whole line

        await pilot.press("pageup", "home")
        await wait_for(pilot, lambda: tail.first_offset < first)
        second = tail.first_offset
        assert first - second <= 256 * 1024, "pages backwards one chunk at a time"
        # the view stays on the lines it showed; the earlier chunk lands above them
        assert tail.view.scroll_y > 0
        await pilot.press("home")
        await wait_for(pilot, lambda: tail.first_offset < second)
        assert len(tail.lines) > loaded
        # lines stay contiguous across chunk seams
        nums = [int(x[:7]) for x in tail.lines]
        assert nums == list(range(nums[0], nums[0] + len(nums)))
        assert tail.follow is False


async def test_missing_file_then_created(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    app = TailApp(log)
    async with app.run_test(size=(80, 12)) as pilot:
        tail = app.query_one(LogTail)
        await wait_for(pilot, lambda: app.opened_at is not None)
        assert "no such file" in tail.visible_lines()[0]
        write_lines(log, 1, 4, "w")
        await wait_for(pilot, lambda: len(tail.lines) == 3)


async def test_binary_log_is_not_shown(tmp_path: Path) -> None:
    log = tmp_path / "core.log"
    log.write_bytes(b"ELF\x00\x01\x02" * 1000)
    app = TailApp(log)
    async with app.run_test(size=(80, 12)) as pilot:
        tail = app.query_one(LogTail)
        await wait_for(pilot, lambda: app.opened_at is not None)
        assert "binary" in tail.visible_lines()[0]
        assert tail.lines == []


async def test_control_sequences_are_stripped(tmp_path: Path) -> None:
    log = tmp_path / "color.log"
    log.write_bytes(b"\x1b[31mred\x1b[0m text\tok\nprogress 10%\rprogress 100%\n\xff\xfe bad utf8\n")
    app = TailApp(log)
    async with app.run_test(size=(80, 12)) as pilot:
        tail = app.query_one(LogTail)
        await wait_for(pilot, lambda: app.opened_at is not None)
        assert tail.lines[0] == "red text    ok"
        assert tail.lines[1] == "progress 100%"
        assert tail.lines[2].endswith(" bad utf8")


async def test_reader_failure_is_shown_not_raised(tmp_path: Path) -> None:
    app = TailApp()
    async with app.run_test(size=(80, 12)) as pilot:
        tail = app.query_one(LogTail)
        tail.open(ErrorReader("path escapes the job dir"), "../../etc/passwd")
        await wait_for(pilot, lambda: app.opened_at is not None)
        assert "cannot read ../../etc/passwd: path escapes the job dir" in tail.visible_lines()[0]


class LateReader:
    """An FSReader whose replies come late, each read its own delay, as over SFTP: the file
    grows while the first read is in flight, and the second read answers after the first."""

    def __init__(self, path: Path, delays: list[float]) -> None:
        self.inner = FSReader(LocalFS(), str(path))
        self.path = path
        self.delays = delays
        self.reads: list[tuple[int, int]] = []

    async def size(self) -> int | None:
        return await self.inner.size()

    async def read(self, offset: int, length: int) -> bytes:
        import asyncio

        n = len(self.reads)
        self.reads.append((offset, length))
        data = await self.inner.read(offset, length)
        if n == 0:
            write_lines(self.path, 21, 26)  # appended after the first read took its bytes
        if n < len(self.delays):
            await asyncio.sleep(self.delays[n])
        return data


async def test_a_late_first_reply_does_not_show_the_file_twice(tmp_path: Path) -> None:
    log = tmp_path / "trial.log"
    write_lines(log, 1, 21, "w")
    app = TailApp()
    async with app.run_test(size=(80, 40)) as pilot:
        tail = app.query_one(LogTail)
        reader = LateReader(log, delays=[0.3, 0.6])
        tail.open(reader, "trial.log")
        await wait_for(pilot, lambda: app.opened_at is not None)
        await wait_for(pilot, lambda: len(tail.lines) >= 25)
        await pilot.pause(0.8)  # every late reply has landed, and several more polls
        assert tail.lines == [f"line {i:05d} INFO step done" for i in range(1, 26)]
        # every byte was read once: the polls started where the first read ended
        starts = [o for o, _ in reader.reads]
        assert starts[0] == 0 and len(set(starts)) == len(starts), reader.reads


async def test_hostile_log_content_never_reaches_the_terminal_raw(tmp_path: Path) -> None:
    from services.core.text import is_term_safe

    log = tmp_path / "evil.log"
    log.write_bytes(
        b"\x1b]0;owned title\n"  # an OSC left open: it must not swallow the next line
        b"after the title\n"
        b"\xc2\x9b31m C1 CSI\x1b[2J clear \x1b[31mred\x1b[0m\n"
        b"bell\x07 del\x7f bytes \xff\xfe\n"
    )
    app = TailApp(log)
    async with app.run_test(size=(80, 12)) as pilot:
        tail = app.query_one(LogTail)
        await wait_for(pilot, lambda: app.opened_at is not None)
        assert tail.lines == [
            "\\x1b]0;owned title",
            "after the title",
            "\\x9b31m C1 CSI clear red",
            "bell\\x07 del\\x7f bytes \\xff\\xfe",
        ]
        shown = tail.visible_lines()
        assert all(is_term_safe(line) for line in shown), shown
        svg = app.export_screenshot()
        assert is_term_safe(svg)
