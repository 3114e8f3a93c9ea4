"""Hostile names through the console, as a person drives it: the list, its detail line and
header, the trials table with log tail and diagnose panel, the audit checklist and the confirm
dialog's preview, the monitor's running trials, toasts and the log screen, the palette.

After every step the whole screen (what the terminal is sent, via the SVG export) holds no
raw control character, and the names show escaped. SVG snapshots of the experiments and
trials screens at 80x24 pin how they look.

Regenerate with: python -m pytest tests/tui/test_ui_hostile.py --snapshot-update
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.harbor.source import HarborSource
from tests.support.hostile import (
    BYTES_NAME,
    JOB_NAME,
    RUNNING_JOB,
    TRIAL_NAMES,
    hostile_job,
    hostile_running_job,
    raw_controls,
)
from tests.support.ui_demo import make_demo_app, settle
from tui.app import EvaldeskApp
from tui.messages import Notice, OpenView
from tui.screens.audit import AuditScreen
from tui.screens.confirm import ConfirmScreen
from tui.screens.monitor import MonitorScreen
from tui.screens.trials import TrialsScreen
from widgets.checklist import Checklist

LABEL = "jobs\x1b]0;src-title"  # the source's label is a path: hostile too
KEY = f"{LABEL}::{JOB_NAME}"
LIVE_KEY = f"{LABEL}::{RUNNING_JOB}"


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "jobs"
    hostile_job(root)
    hostile_running_job(root)
    return root


def hostile_app(jobs: Path, state: Path) -> EvaldeskApp:
    app = make_demo_app(jobs, state)
    app.sources = [HarborSource(jobs, app.policy, label=LABEL)]
    app._sources_by_label = {LABEL: app.sources[0]}
    return app


def screen_text(app: Any) -> str:
    """Every character on screen, in order (the SVG's text runs joined), after checking that
    none of what the terminal is sent is a raw control."""
    import html
    import re

    svg: str = app.export_screenshot()
    assert not raw_controls(svg), f"raw controls reach the terminal: {raw_controls(svg)!r}"
    return html.unescape("".join(re.findall(r">([^<]*)</text>", svg))).replace("\xa0", " ")


async def wait_for(pilot: Any, cond: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await settle(pilot, 2)


async def test_experiments_trials_log_and_diagnose_show_names_escaped(jobs: Path, tmp_path: Path) -> None:
    app = hostile_app(jobs, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.clear_notifications()
        text = screen_text(app)
        assert "\\x1b]0;src-title" in text  # the header's source label
        assert "evil\\x1b]0;owned-" in text  # the id column, the OSC shown, not obeyed
        assert "tb2_evil\\x1b]0;owned-title\\x1b[31m⏎second-line" in text  # the detail line, one row
        assert "\\x9b31mModel" in text

        # the palette reads its prompts as markup: hostile ids neither crash it nor leak
        await pilot.press("ctrl+p")
        await pilot.press(*"audit")
        await settle(pilot, 3)
        screen_text(app)
        await pilot.press("escape")
        await settle(pilot, 2)

        app.open_trials(KEY)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TrialsScreen)
        seen_rows = 0
        for _ in range(len(screen.rows)):
            trial = screen.selected_trial()
            assert trial is not None
            await wait_for(pilot, lambda t=trial: screen.log_tail.reader is not None
                           and t.trial_name in screen.log_tail.title and not screen.log_tail.notice.startswith("read"))
            screen_text(app)
            seen_rows += 1
            await pilot.press("down")
            await settle(pilot, 2)
        assert seen_rows == 8
        text = screen_text(app)
        assert "task-nl__line1⏎line2" in text or "task-bidi__\\u202eexe" in text

        # this trial's log opens an OSC title and never closes it
        index = next(n for n, i in enumerate(screen.rows) if screen.trials[i].path == TRIAL_NAMES[0])
        await pilot.press("home", *["down"] * index)
        await wait_for(pilot, lambda: "after" in screen.log_tail.lines)
        assert screen.log_tail.lines[:2] == ["\\x1b]0;log-title", "after"]
        screen_text(app)

        # the errored trial's diagnosis: exception type and message from its result.json
        await pilot.press("s", "s")  # errored only
        await pilot.press("d")
        await wait_for(pilot, lambda: screen.diagnose.info is not None
                       and screen.diagnose.info.exception_type is not None)
        text = screen_text(app)
        assert "Boom\\x1b[2J\\x9d0;t\\x07Error" in text


async def test_audit_confirm_monitor_toasts_and_log_show_names_escaped(jobs: Path, tmp_path: Path) -> None:
    app = hostile_app(jobs, tmp_path)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        app.clear_notifications()

        app.open_audit(KEY)
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        text = screen_text(app)
        assert "tb2_evil\\x1b]0;owned-title" in text
        assert "Boom\\x1b[2J\\x9d0;t\\x07Error" in text  # the error gate's evidence

        # dedupe's dry run names the dir that is not UTF-8 by its bytes
        checklist = app.screen.query_one(Checklist)
        checklist.highlighted = [i.id for i in checklist.items].index("duplicates")
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        text = screen_text(app)
        assert "task-bytes__\\xff\\xferaw" in text
        await pilot.press("n")
        await settle(pilot, 2)
        assert (jobs / JOB_NAME / BYTES_NAME).is_dir(), "cancelled: nothing moved"
        await pilot.press("escape")
        await settle(pilot, 2)

        # the monitor's running trials: the name and its log's last line
        app.post_message(Notice("warning", f"scan {RUNNING_JOB}", f"cannot read {JOB_NAME}/\udcff: denied"))
        await settle(pilot, 2)
        text = screen_text(app)  # the toast
        assert "▌tb2_evil\\x1b]0;owned-title" in text
        assert "\\xff: denied" in text and "scan tb2_live\\x1b]2;live-title\\x07" in text
        app.clear_notifications()
        app.post_message(OpenView("monitor", [LIVE_KEY]))
        await settle(pilot)
        assert isinstance(app.screen, MonitorScreen)
        text = screen_text(app)
        assert "tb2_live\\x1b]2;live-title\\x07" in text
        assert "task-run__\\x1b[6n\\x9b6n" in text
        await pilot.press("escape")
        await settle(pilot, 2)

        await pilot.press("L")
        await settle(pilot, 2)
        text = screen_text(app)
        assert "scan tb2_live\\x1" in text  # the where column, cut at its width
        assert "owned-title\\x1b[31m⏎second-line_2026-03-02__09-00-00/\\xff: denied" in text  # one line


async def _at_experiments(pilot: Any) -> None:
    await settle(pilot)
    pilot.app.clear_notifications()
    await pilot.pause()


async def _at_trials(pilot: Any) -> None:
    app = pilot.app
    await settle(pilot)
    app.open_trials(KEY)
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, TrialsScreen)
    # the trial whose log opens an OSC title, with its log tail read
    index = next(n for n, i in enumerate(screen.rows) if screen.trials[i].path == TRIAL_NAMES[0])
    await pilot.press(*["down"] * index)
    await wait_for(pilot, lambda: "after" in screen.log_tail.lines)
    app.clear_notifications()
    await pilot.pause(0.1)


@pytest.mark.parametrize("where", ["experiments", "trials"])
def test_hostile_names_snapshot(snap_compare: Callable[..., bool], jobs: Path, tmp_path: Path, where: str) -> None:
    app = hostile_app(jobs, tmp_path)
    run_before = _at_experiments if where == "experiments" else _at_trials
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
