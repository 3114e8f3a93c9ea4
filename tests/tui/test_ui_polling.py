"""Each source is polled on its own interval, re-armed after each scan; a failing source backs
off and says why in the header; `p` pauses polling and resumes it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from services.core.config import Config
from services.harbor.source import HarborSource
from tests.support.ui_demo import DEV_SET, copy_job, settle, use_utc
from tui.app import EvaldeskApp
from tui.chrome import ConsoleHeader


def _app(jobs: Path, interval: float) -> EvaldeskApp:
    use_utc()
    config = Config(poll_interval_s=interval)
    src = HarborSource(jobs, config.policy, label="live")
    return EvaldeskApp([src], config, poll=True, cursor_blink=False)


def _header(app: EvaldeskApp) -> str:
    return str(app.screen.query_one(ConsoleHeader).render())


async def _wait_until(pilot: object, cond: object, limit: float = 10.0) -> None:
    app = pilot.app  # type: ignore[attr-defined]
    waited = 0.0
    while not cond() and waited < limit:  # type: ignore[operator]
        await pilot.pause(0.05)  # type: ignore[attr-defined]
        waited += 0.05
    assert cond(), f"condition not met within {limit}s; header: {_header(app)}"  # type: ignore[operator]


async def test_polls_rearm_pause_and_resume(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    jobs = copy_job(tmp_path_factory, tmp_path)
    app = _app(jobs, interval=0.2)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        scans = app.last_refresh
        await _wait_until(pilot, lambda: app.last_refresh != scans)  # the timer re-armed and fired
        await pilot.press("p")
        await settle(pilot)
        assert app.paused and "PAUSED" in _header(app)
        frozen = app.last_refresh
        await pilot.pause(0.8)  # four intervals: no poll while paused
        assert app.last_refresh == frozen
        await pilot.press("r")  # a read now goes through even while paused
        await settle(pilot)
        assert app.last_refresh != frozen and app.paused
        await pilot.press("p")
        await settle(pilot)
        assert not app.paused and "PAUSED" not in _header(app)


async def test_a_failing_source_backs_off_shows_why_and_recovers(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    jobs = copy_job(tmp_path_factory, tmp_path)
    app = _app(jobs, interval=0.1)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        assert app.experiment(f"live::{DEV_SET}") is not None
        aside = tmp_path / "aside"
        shutil.move(str(jobs), str(aside))
        await _wait_until(pilot, lambda: app.poll_failures.get("live", (0, ""))[0] >= 2)
        count, reason = app.poll_failures["live"]
        assert "no such directory" in reason
        # backing off: the next poll waits longer than the interval, doubling per failure
        assert app.next_poll_in["live"] >= 0.1 * 2**count * 0.99
        assert "live down ×" in _header(app) and "no such directory" in _header(app)
        # the last good snapshot stays on screen
        assert app.experiment(f"live::{DEV_SET}") is not None
        errors = [e for e in app.event_log if e.level == "error"]
        assert len(errors) == 1, "a source that stays down is reported once, not on every poll"
        shutil.move(str(aside), str(jobs))
        await pilot.press("r")
        await _wait_until(pilot, lambda: "live" not in app.poll_failures)
        assert "down" not in _header(app)
