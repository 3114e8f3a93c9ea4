"""Builds the console on the bundled demo jobs written into a test's tmp dir, with a fixed
clock so ages, refresh times and audits are the same on every run."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from textual.worker import WorkerFailed

from services.config import Config
from services.demo import DEMO_NOW, write_demo
from services.sources.base import Source
from services.sources.harbor import HarborSource
from tui.app import EvaldeskApp

FIXED_NOW: datetime = DEMO_NOW + timedelta(minutes=5)
DEV_SET = "dev_set_v2_gpt-5-mini_2026-11-19__08-30-00"
DEV_KEY = f"demo::{DEV_SET}"


def make_demo_app(
    tmp_path: Path,
    *,
    read_only: bool = False,
    sources: list[Source] | None = None,
) -> EvaldeskApp:
    jobs = tmp_path / "jobs"
    if not jobs.exists():
        write_demo(jobs)
    config = Config(journal_path=str(tmp_path / "journal.jsonl"))
    if sources is None:
        sources = [HarborSource(jobs, config.policy, label="demo")]
    return EvaldeskApp(sources, config, read_only, now=FIXED_NOW, poll=False, cursor_blink=False)


async def settle(pilot: object, rounds: int = 6) -> None:
    """Let workers finish and the messages they posted be handled (they can chain: a write
    posts its result, whose handler starts a re-scan, whose result re-renders screens)."""
    app = pilot.app  # type: ignore[attr-defined]
    for _ in range(rounds):
        try:
            await app.workers.wait_for_complete()
        except WorkerFailed:
            pass  # reported by the app's own handler; tests check the log
        await pilot.pause()  # type: ignore[attr-defined]
