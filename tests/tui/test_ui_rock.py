"""A Rock run in the console as a person meets it: a row in the list, its tasks with the task
log and the diagnosis, and the retry's dry run with the exact regression.py command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tui.screens.audit import AuditScreen
from tui.screens.confirm import ConfirmScreen
from tui.screens.experiments import ExperimentsScreen
from tui.screens.trials import TrialsScreen
from widgets.checklist import Checklist
from widgets.trial_table import VirtualTable

try:
    from ui_demo import ROCK_KEY, make_full_demo_app, settle, shared_full_demo, snapshot_full_demo, wait_for
except ImportError:  # collected as a package
    from tests.support.ui_demo import (
        ROCK_KEY,
        make_full_demo_app,
        settle,
        shared_full_demo,
        snapshot_full_demo,
        wait_for,
    )

SIZE = (120, 40)
COMMAND = "python3 regression.py retry exp-7f3a9c21 --from-config configs/exp-7f3a9c21.json --filter error"


async def open_rock_trials(pilot: Any) -> TrialsScreen:
    app = pilot.app
    await settle(pilot)
    home = app.screen
    assert isinstance(home, ExperimentsScreen)
    row = [r.key for r in home.shown].index(ROCK_KEY)
    home.query_one("#experiments").move_cursor(row=row)
    await pilot.pause()
    await pilot.press("enter")
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, TrialsScreen)
    await wait_for(pilot, lambda: screen.diagnose.info is not None)
    return screen


async def show_errored(pilot: Any, screen: TrialsScreen) -> None:
    await pilot.press("s", "s")  # status: errored
    await wait_for(pilot, lambda: (t := screen.selected_trial()) is not None and screen.diagnose.info is not None
                   and screen.diagnose.info.title == t.trial_name and bool(screen.log_tail.lines))


async def test_a_rock_run_is_listed_with_its_tasks_log_and_diagnosis(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_full_demo_app(shared_full_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        home = app.screen
        assert isinstance(home, ExperimentsScreen)
        row = next(r for r in home.shown if r.key == ROCK_KEY)
        cells = [row.cell_text(c, False, 40).plain for c in ("source", "id", "benchmark", "state", "progress",
                                                                 "verdict")]
        assert cells == ["demo/rock", "exp-7f3a9c21", "terminal-bench-core", " done ", "30/40", "retry"]
        screen = await open_rock_trials(pilot)
        table = screen.query_one(VirtualTable)
        assert table.row_count == 40
        await show_errored(pilot, screen)
        rows = [table.row_text(i) for i in range(table.row_count)]
        assert len(rows) == 10 and {r[3] for r in rows} == {"errored"}
        trial = screen.selected_trial()
        assert trial is not None and trial.state_raw in ("error", "timeout", "cancelled")
        # the task log (logs/<experiment>/<task>.log) opens under `1`, the diagnosis reads its traceback
        assert screen.log_tail.title == f"{trial.trial_name}/trial.log"
        assert any(f"regression: dispatch {trial.task_name} to sandbox" in line for line in screen.log_tail.lines)
        err = next(i for i, r in enumerate(rows) if r[4] == "RuntimeError")
        for _ in range(err):
            await pilot.press("down")
        await wait_for(pilot, lambda: screen.diagnose.info is not None
                       and screen.diagnose.info.exception_type == "RuntimeError"
                       and bool(screen.diagnose.info.traceback))
        info = screen.diagnose.info
        assert info is not None and info.traceback is not None
        assert "RuntimeError: docker: Error response from daemon: no space left on device" in info.traceback
        assert info.verifier_label == "task log (last lines)"


async def test_the_retry_preview_shows_the_exact_regression_command(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_full_demo_app(shared_full_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_audit(ROCK_KEY)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AuditScreen)
        checklist = screen.query_one(Checklist)
        items = {i.id: i for i in checklist.items}
        assert items["error_gate"].runnable == "retry" and items["duplicates"].runnable is None
        # the audit opens on the first row it can fix
        assert checklist.items[checklist.highlighted or 0].id == "valid_count"
        await pilot.press("x")
        await settle(pilot, 3)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen), [e.message for e in app.event_log]
        text = "\n".join(dialog.lines)
        assert f"  cd {shared_full_demo(tmp_path_factory)}/rock && {COMMAND}" in text
        assert "Tasks (7; RewardFileNotFoundError, RuntimeError): " in text
        assert "Cannot run yet: regression.py is not configured" in text
        # the dialog offers no apply; y only says why again, and nothing runs
        assert not dialog.query("#confirm")
        await pilot.press("y")
        await settle(pilot, 3)
        log = [e.message for e in app.event_log]
        assert any("regression.py is not configured" in m for m in log), log
        assert not any(m.startswith("retry refused") or "started" in m for m in log), log


# ---- snapshots --------------------------------------------------------------------------------

async def _at_trials(pilot: Any) -> None:
    app = pilot.app
    await settle(pilot)
    # the log tail's first poll can race its initial read and show lines twice; a picture must
    # not depend on that race, so the log is read once here (the Pilot test above uses enter)
    app.push_screen(TrialsScreen(ROCK_KEY, poll_interval=3600))
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, TrialsScreen)
    await wait_for(pilot, lambda: screen.diagnose.info is not None)
    await show_errored(pilot, screen)
    pilot.app.clear_notifications()
    await pilot.pause(0.1)


async def _at_retry(pilot: Any) -> None:
    app = pilot.app
    await settle(pilot)
    app.clear_notifications()
    app.open_audit(ROCK_KEY)
    await pilot.pause()
    await pilot.press("x")
    await settle(pilot, 3)
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
    app.clear_notifications()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", ["trials", "retry"])
def test_snapshot(view: str, size: tuple[int, int], snap_compare: Any, tmp_path: Path) -> None:
    app = make_full_demo_app(snapshot_full_demo(), tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=_at_trials if view == "trials" else _at_retry)
