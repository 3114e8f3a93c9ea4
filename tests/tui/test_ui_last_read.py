"""The list opens from the last read at once, each row marked with the age of that read, and
a source's fresh answer replaces its rows when it comes; the read is kept in the XDG state dir."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from services.core.config import Config
from services.core.models import Snapshot
from services.core.source import ProgressFn
from services.harbor.source import HarborSource
from tests.support.ui_demo import FIXED_NOW, make_demo_app, settle, shared_demo, use_utc, wait_for
from tests.tui.test_ui_layout import screen_text
from tui.app import EvaldeskApp
from tui.screens.experiments import ExperimentsScreen


class SlowSource(HarborSource):
    """A source that answers only when told to (a far host, a big folder)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.answer = asyncio.Event()

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        await self.answer.wait()
        return await super().scan(progress)


async def test_the_list_opens_from_the_last_read_then_fills_in(tmp_path: Path,
                                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    jobs = shared_demo(tmp_path_factory)
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        fresh = sorted(e.id for e in app.experiments())
    kept = Path(os.environ["XDG_STATE_HOME"]) / "evaldesk" / "last-read"
    assert len(list(kept.glob("*.json"))) == 1  # one source's, under the test's own XDG_STATE_HOME

    use_utc()
    config = Config(journal_path=str(tmp_path / "journal.jsonl"))
    slow = SlowSource(jobs, config.policy, label="demo")
    again = EvaldeskApp([slow], config, False, now=FIXED_NOW, poll=False, cursor_blink=False)
    async with again.run_test(size=(80, 24)) as pilot:
        # (the source holds its answer back: however long this waits, the rows are the last read's)
        await wait_for(pilot, lambda: bool(again.experiments()) and all(
            part in screen_text(again) for part in ("◷ tb2 SERA-14B", "from the last read", "reading demo")))
        home = again.screen
        assert isinstance(home, ExperimentsScreen)
        assert sorted(e.id for e in again.experiments()) == fresh  # before the source answered
        assert all(r.cached_s is not None for r in home.rows)
        text = screen_text(again)
        assert "◷ tb2 SERA-14B" in text and "from the last read" in text and "reading demo" in text
        assert again.audit(f"demo::{home.rows[0].exp.id}") is not None  # verdicts too
        slow.answer.set()
        await settle(pilot)
        assert again.cached_at == {} and all(r.cached_s is None for r in home.rows)
        assert "from the last read" not in screen_text(again)


def test_each_source_keeps_its_own_read_and_an_unchanged_scan_rewrites_nothing(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    from tui import last_read

    jobs = shared_demo(tmp_path_factory)
    old = Path(os.environ["XDG_STATE_HOME"]) / "evaldesk" / "last-read.json"
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_text('{"version": 1, "sources": {}}')  # every source in one file, as version 1 kept it
    exps = HarborSource(jobs).scan_sync().experiments
    hostile = "a/b\x1b[31m\udcff"
    last_read.save("demo", FIXED_NOW, exps, {})
    last_read.save(hostile, FIXED_NOW, exps[:1], {})
    assert not old.exists()
    kept = last_read.load(["demo", hostile, "never read"])
    assert sorted(kept) == sorted(["demo", hostile])
    assert [e.id for e in kept["demo"][1]] == [e.id for e in exps] and len(kept[hostile][1]) == 1
    assert last_read.path("demo") != last_read.path(hostile)


async def test_a_scan_that_changed_nothing_does_not_keep_the_read_again(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    from tui import last_read

    jobs = shared_demo(tmp_path_factory)
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        kept = Path(last_read.path("demo"))
        before = kept.stat().st_mtime_ns, kept.read_bytes()
        kept.write_bytes(b"{}")  # (so that a rewrite would show)
        await pilot.press("r")  # every trial checked against its files: nothing changed
        await settle(pilot)
        assert app.scan_count >= 2
        assert kept.read_bytes() == b"{}", before
