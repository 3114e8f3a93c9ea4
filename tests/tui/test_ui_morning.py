"""The morning job at 80x24, as an operator does it with marks and `:`: open, find what can be
registered, dedupe and resume the rest in one go each, read the journal, write the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.journal import Journal
from tests.support.standin_tools import Standins
from tests.support.ui_demo import DEV_SET, copy_job, make_demo_app, settle
from tests.tui.test_ui_resume import QWEN, SERA, demo_tasks, standins, wait_for  # noqa: F401
from tui.screens.confirm import ConfirmScreen
from tui.screens.experiments import ExperimentsScreen

OPENTHINKER = "terminal_bench_2_laion-OpenThinker-Agent-8B_2026-11-19__12-00-00"


async def command(pilot: object, text: str) -> None:
    await pilot.press("colon", *text, "enter")  # type: ignore[attr-defined]
    await settle(pilot, 3)


async def filter_rows(pilot: object, text: str) -> None:
    await pilot.press("slash", *text, "enter")  # type: ignore[attr-defined]
    await settle(pilot, 2)


async def test_the_morning_job_with_marks_and_the_command_line(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, standins: Standins) -> None:  # noqa: F811
    for job in (DEV_SET, QWEN, SERA, OPENTHINKER):
        jobs = copy_job(tmp_path_factory, tmp_path, job)
    app = make_demo_app(jobs, tmp_path)
    journal = Journal(app.config.journal_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        home = app.screen
        assert isinstance(home, ExperimentsScreen) and len(home.rows) == 4
        app.clear_notifications()

        # what can be registered today
        await filter_rows(pilot, "finalize")
        assert [r.exp.id for r in home.shown] == [OPENTHINKER]
        await pilot.press("escape")
        await settle(pilot, 2)

        # dedupe what needs it: mark the rows the filter shows, clear the filter, one confirmation
        await filter_rows(pilot, "dedupe")
        await pilot.press("asterisk", "escape")
        await settle(pilot, 2)
        assert home.marked_keys() == [f"demo::{DEV_SET}"] and len(home.shown) == 4
        await command(pilot, "dedupe")
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert "dedupe on 1 marked run(s): 1 to change" in "\n".join(dialog.lines)  # type: ignore[attr-defined]
        await pilot.press("y")
        await wait_for(pilot, lambda: any(e.action == "dedupe:apply" for e in journal.entries()))
        await settle(pilot, 4)
        assert (jobs / DEV_SET / ".evaldesk-quarantine").is_dir()

        # resume the rest: both runs in one preview, one confirmation
        await pilot.press("ctrl+space")
        await filter_rows(pilot, "resume")
        await pilot.press("asterisk", "escape")
        await settle(pilot, 2)
        # (SERA's errors are ones a default resume does not re-run: its verdict asks a person instead)
        assert home.marked_keys() == [f"demo::{QWEN}"]
        await command(pilot, "resume")
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        text = "\n".join(dialog.lines)  # type: ignore[attr-defined]
        # each run's plan under its name
        assert "resume on 1 marked run(s)" in text and f"── {QWEN}: 86 step(s)" in text, text[:600]
        await pilot.press("y")
        await wait_for(pilot, lambda: any(e.action == "resume:apply" for e in journal.entries()), 60)
        await settle(pilot, 4)

        # what was written, by name
        await command(pilot, "journal")
        assert type(app.screen).__name__ == "JournalScreen"
        await wait_for(pilot, lambda: len(app.screen.rows) >= 3)  # type: ignore[attr-defined]
        await command(pilot, "ls")  # an alias of :list
        assert app.screen is home

        # the report of the runs marked
        await pilot.press("ctrl+space", "asterisk", "R")
        await settle(pilot, 6)
        assert type(app.screen).__name__ == "ReportScreen", [e.message for e in app.event_log][-5:]
