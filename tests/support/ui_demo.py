"""Builds the console on the bundled demo jobs with a fixed clock, so ages, refresh times
and audits are the same on every run.

Writing the demo costs seconds on a busy disk, so tests that only read share one copy per
session; tests that write get their own copy of the job they change.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from textual.worker import WorkerFailed

from services.core.config import Config
from services.core.source import Source
from services.core.times import DEMO_NOW
from services.harbor.demo import write_demo
from services.harbor.source import HarborSource
from tui.app import EvaldeskApp

FIXED_NOW: datetime = DEMO_NOW + timedelta(minutes=5)
DEV_SET = "dev_set_v2_gpt-5-mini_2026-11-19__08-30-00"
DEV_KEY = f"demo::{DEV_SET}"

_shared: Path | None = None


def use_utc() -> None:
    """Harbor's job times are naive local time; pin the zone so figures do not move."""
    os.environ["TZ"] = "UTC"
    time.tzset()


def shared_demo(factory: pytest.TempPathFactory) -> Path:
    global _shared
    if _shared is None:
        _shared = factory.mktemp("demo") / "jobs"
        write_demo(_shared)
    return _shared


def copy_job(factory: pytest.TempPathFactory, dest: Path, job: str = DEV_SET) -> Path:
    """A private jobs folder holding one demo job, for tests that change files."""
    jobs = dest / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    shutil.copytree(shared_demo(factory) / job, jobs / job, symlinks=True)
    return jobs


def make_demo_app(
    jobs: Path,
    state: Path,
    *,
    read_only: bool = False,
    sources: list[Source] | None = None,
) -> EvaldeskApp:
    use_utc()
    config = Config(journal_path=str(state / "journal.jsonl"))
    if sources is None:
        sources = [HarborSource(jobs, config.policy, label="demo")]
    return EvaldeskApp(sources, config, read_only, now=FIXED_NOW, poll=False, cursor_blink=False)


async def settle(pilot: object, rounds: int = 6) -> None:
    """Let workers finish and the messages they posted be handled (they chain: a write
    posts its result, whose handler starts a re-scan, whose result re-renders screens)."""
    app = pilot.app  # type: ignore[attr-defined]
    for _ in range(rounds):
        # a failure is reported by the app's own handler; tests read the log
        with contextlib.suppress(WorkerFailed):
            await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]


async def wait_for(pilot: object, cond: Callable[[], bool], timeout: float = 10.0) -> None:
    """Pause until `cond()` holds; fail the test if it does not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)  # type: ignore[attr-defined]


_shared_full: Path | None = None
ROCK_KEY = "demo/rock::exp-7f3a9c21"
OPENTHINKER_KEY = "demo::terminal_bench_2_laion-OpenThinker-Agent-8B_2026-11-19__12-00-00"


def shared_full_demo(factory: pytest.TempPathFactory) -> Path:
    """Every backend's demo data (Harbor job dirs, the Rock work dir, the alignment baseline)."""
    global _shared_full
    if _shared_full is None:
        from services.core.registry import write_demo as write_all

        _shared_full = factory.mktemp("fulldemo") / "demo"
        write_all(_shared_full, DEMO_NOW)
    return _shared_full


def make_full_demo_app(root: Path, state: Path, *, baselines: bool = True) -> EvaldeskApp:
    """The console as `evaldesk` opens the demo: every backend's sources, the demo's baseline."""
    from services.core.registry import demo_sources

    use_utc()
    config = Config(journal_path=str(state / "journal.jsonl"))
    return EvaldeskApp(demo_sources(config, root), config, False, now=FIXED_NOW, poll=False, cursor_blink=False,
                       baseline_dirs=[str(root / "baselines")] if baselines else [])


def _fixed_demo(name: str, write: Callable[[Path], object]) -> Path:
    """A demo at a fixed path under the temp dir, written once per test run: a screen that
    names a path then reads the same on every run. One test run's processes (pytest-xdist
    workers) share it; a new run writes it afresh."""
    root = Path(tempfile.gettempdir()) / name
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
    mark = root.with_name(root.name + ".run")
    with open(root.with_name(root.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (mark.is_file() and mark.read_text() == run):
            shutil.rmtree(root, ignore_errors=True)
            write(root)
            mark.write_text(run)
    return root


def snapshot_full_demo() -> Path:
    """The full demo at a fixed path: a preview that names the work dir, as the retry's does."""
    global _snapshot_full
    if _snapshot_full is None:
        from services.core.registry import write_demo as write_all

        _snapshot_full = _fixed_demo("evaldesk-snapshot-demo", lambda root: write_all(root, DEMO_NOW))
    return _snapshot_full


def snapshot_jobs() -> Path:
    """The demo's Harbor jobs at a fixed path: the describe popup shows a run's path."""
    global _snapshot_jobs
    if _snapshot_jobs is None:
        _snapshot_jobs = _fixed_demo("evaldesk-snapshot-jobs", write_demo)
    return _snapshot_jobs


_snapshot_jobs: Path | None = None


_snapshot_full: Path | None = None
