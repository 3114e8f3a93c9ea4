"""Poll one Source on its own interval, re-armed after each poll finishes.

Pure asyncio, so the console and the headless monitor share it. The next poll is scheduled
only once the previous one (and its handler) is done, so a slow scan never piles up polls;
a failing poll backs off exponentially and keeps its reason for the screen to show.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from datetime import datetime

from services.core.models import Snapshot
from services.core.source import Source, SourceUnavailable
from services.core.times import utc_now
from services.monitor.state import Clock

SnapshotHandler = Callable[[Snapshot], Awaitable[None] | None]
ErrorHandler = Callable[[str], Awaitable[None] | None]

# Local disk is cheap to stat; anything reached over a network gets a gentler default.
DEFAULT_INTERVALS: dict[str, float] = {"harbor": 10.0}
REMOTE_INTERVAL_S = 30.0


def default_interval(source: Source) -> float:
    return DEFAULT_INTERVALS.get(getattr(source, "kind", ""), REMOTE_INTERVAL_S)


def backoff_delay(interval: float, failures: int, cap: float = 300.0) -> float:
    """Seconds until the next poll of a source that failed `failures` times in a row."""
    if failures <= 0:
        return interval
    return float(min((interval or 1.0) * 2**failures, max(cap, interval)))


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, SourceUnavailable):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "the scan timed out"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _maybe_await(value: Awaitable[None] | None) -> None:
    if inspect.isawaitable(value):
        await value


class Poller:
    def __init__(
        self,
        source: Source,
        on_snapshot: SnapshotHandler,
        *,
        interval: float | None = None,
        on_error: ErrorHandler | None = None,
        max_backoff: float = 300.0,
        timeout: float | None = 120.0,
        clock: Clock = utc_now,
    ) -> None:
        self.source = source
        self.interval = float(interval if interval is not None else default_interval(source))
        if self.interval < 0:
            raise ValueError("interval must be ≥ 0 seconds")
        self.on_snapshot = on_snapshot
        self.on_error = on_error
        self.max_backoff = max(max_backoff, self.interval)
        self.timeout = timeout
        self.clock = clock
        self.polls = 0
        self.failures = 0  # consecutive
        self.last_error: str | None = None
        self.last_error_at: datetime | None = None
        self.last_ok: datetime | None = None
        self.last_duration_s: float | None = None
        self.next_delay = self.interval
        self._paused = False
        self._forced = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._busy = asyncio.Lock()

    # -- state -------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def busy(self) -> bool:
        """A poll (or its handler) is in flight."""
        return self._busy.locked()

    @property
    def healthy(self) -> bool:
        return self.failures == 0

    def backoff_delay(self, failures: int) -> float:
        return backoff_delay(self.interval, failures, self.max_backoff)

    # -- control -----------------------------------------------------------------------
    def start(self) -> None:
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"poll {self.source.label}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def pause(self) -> None:
        self._paused = True
        self._wake.set()

    def resume(self) -> None:
        self._paused = False
        self._wake.set()

    def refresh_now(self) -> None:
        """Poll at once, even while paused or backing off, checking every trial against its files
        (a source that re-verifies finished trials on a rotation does them all this time)."""
        verify_all = getattr(self.source, "verify_all", None)
        if callable(verify_all):
            verify_all()
        self._forced = True
        self._wake.set()

    # -- polling -----------------------------------------------------------------------
    async def poll_once(self) -> Snapshot | None:
        """One poll and its handler; returns the snapshot, or None when it failed."""
        async with self._busy:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            self.polls += 1
            try:
                if self.timeout:
                    snap = await asyncio.wait_for(self.source.scan(), self.timeout)
                else:
                    snap = await self.source.scan()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.last_duration_s = loop.time() - t0
                self.failures += 1
                self.last_error = describe_error(exc)
                self.last_error_at = self.clock()
                self.next_delay = self.backoff_delay(self.failures)
                if self.on_error is not None:
                    await _maybe_await(self.on_error(self.last_error))
                return None
            self.last_duration_s = loop.time() - t0
            self.failures = 0
            self.next_delay = self.interval
            self.last_ok = self.clock()
            try:
                await _maybe_await(self.on_snapshot(snap))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # the source is fine; what consumes it is not — report without backing off
                self.last_error = f"handling the snapshot failed: {describe_error(exc)}"
                self.last_error_at = self.clock()
                if self.on_error is not None:
                    await _maybe_await(self.on_error(self.last_error))
            return snap

    async def _run(self) -> None:
        while True:
            if self._paused and not self._forced:
                await self._wait(None)
                continue
            self._forced = False
            await self.poll_once()
            await self._sleep_until_due()

    async def _sleep_until_due(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.next_delay
        while True:
            if self._forced:
                return
            left = deadline - loop.time()
            if not self._paused and left <= 0:
                return
            await self._wait(None if self._paused else left)

    async def _wait(self, timeout: float | None) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)
