"""The poller: re-armed after each poll, backoff with the reason kept, pause/resume, refresh-now."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.core.models import Snapshot
from services.harbor.source import HarborSource
from services.monitor.poller import Poller, default_interval
from tests.support.playback import T0, JobPlayback


async def _until(cond, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    async def spin() -> None:
        while not cond():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(spin(), timeout)


async def test_backoff_after_failing_polls_then_recovery(tmp_path: Path) -> None:
    root = tmp_path / "jobs"
    source = HarborSource(root)  # not there yet: a real SourceUnavailable from the scan
    seen: list[Snapshot] = []
    errors: list[str] = []
    poller = Poller(source, seen.append, interval=1.0, max_backoff=5.0, on_error=errors.append,
                    clock=lambda: T0)
    assert await poller.poll_once() is None
    assert poller.failures == 1 and not poller.healthy
    assert poller.last_error is not None and "no such directory" in poller.last_error
    assert errors == [poller.last_error]
    assert poller.next_delay == 2.0
    await poller.poll_once()
    assert (poller.failures, poller.next_delay) == (2, 4.0)
    await poller.poll_once()
    assert (poller.failures, poller.next_delay) == (3, 5.0)  # capped
    JobPlayback(root)
    snap = await poller.poll_once()
    assert snap is not None and len(snap.experiments) == 1 and seen == [snap]
    assert (poller.failures, poller.next_delay) == (0, 1.0)
    assert poller.last_ok is not None and poller.polls == 4
    assert "no such directory" in (poller.last_error or "")  # the reason stays readable
    await source.close()


async def test_a_failing_handler_does_not_back_off(tmp_path: Path) -> None:
    JobPlayback(tmp_path / "jobs")
    source = HarborSource(tmp_path / "jobs")

    def boom(snap: Snapshot) -> None:
        raise RuntimeError("screen gone")

    poller = Poller(source, boom, interval=1.0)
    assert await poller.poll_once() is not None
    assert poller.failures == 0 and poller.next_delay == 1.0
    assert poller.last_error == "handling the snapshot failed: RuntimeError: screen gone"
    await source.close()


async def test_pause_resume_and_refresh_now(tmp_path: Path) -> None:
    JobPlayback(tmp_path / "jobs")
    source = HarborSource(tmp_path / "jobs")
    seen: list[Snapshot] = []
    poller = Poller(source, seen.append, interval=0.01)
    poller.start()
    try:
        await _until(lambda: len(seen) >= 3)  # re-armed after every poll
        poller.pause()
        await _until(lambda: not poller.busy)
        paused_at = len(seen)
        await asyncio.sleep(0.2)  # twenty intervals: nothing while paused
        assert len(seen) == paused_at and poller.paused
        poller.refresh_now()  # one poll on demand, still paused after it
        await _until(lambda: len(seen) == paused_at + 1)
        await _until(lambda: not poller.busy)
        await asyncio.sleep(0.1)
        assert len(seen) == paused_at + 1
        poller.resume()
        await _until(lambda: len(seen) >= paused_at + 3)
        assert poller.running
    finally:
        await poller.stop()
        await source.close()
    assert not poller.running


async def test_refresh_now_cuts_a_long_wait_short(tmp_path: Path) -> None:
    JobPlayback(tmp_path / "jobs")
    source = HarborSource(tmp_path / "jobs")
    seen: list[Snapshot] = []
    poller = Poller(source, seen.append, interval=3600)
    poller.start()
    try:
        await _until(lambda: len(seen) == 1)
        poller.refresh_now()
        await _until(lambda: len(seen) == 2)
    finally:
        await poller.stop()
        await source.close()


def test_default_intervals(tmp_path: Path) -> None:
    assert default_interval(HarborSource(tmp_path)) == 10.0
    with pytest.raises(ValueError):
        Poller(HarborSource(tmp_path), lambda s: None, interval=-1)
