"""After a source's first big read, the console hands the heap it freed back to the system once."""

from __future__ import annotations

from pathlib import Path

import pytest

import tui.app
from tests.support.ui_demo import make_demo_app, settle, shared_demo


async def test_the_first_big_read_of_a_source_gives_back_its_freed_memory_once(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[int] = []
    monkeypatch.setattr(tui.app, "give_back_memory", lambda: given.append(1))
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        counted = sum(e.counts.total + e.counts.running + e.counts.copies for e in app.experiments())
        assert given == []  # (the demo is below TRIM_MIN_TRIALS)
        monkeypatch.setattr(tui.app, "TRIM_MIN_TRIALS", counted)
        await pilot.press("r")
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
    assert given == [1]
