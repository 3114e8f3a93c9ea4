"""Every key the registry advertises, pressed on its screen, does something a person can see.

For each action in `tui/actions.py` the test opens its screen on the demo data, presses the
key (after whatever makes the key meaningful, e.g. a filter before "clear filter"), and checks
that the screen, the state behind it, the clipboard, a program it hands the terminal to, or
the app's exit changed. A new action without a case here fails `test_every_action_has_a_case`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input

from tests.support.ui_demo import DEV_KEY, DEV_SET, copy_job, make_demo_app, settle, shared_demo
from tui.actions import ACTIONS
from tui.app import EvaldeskApp
from tui.messages import OpenView
from tui.screens.audit import AuditScreen
from tui.screens.confirm import ConfirmScreen
from tui.screens.experiments import ExperimentsScreen
from tui.screens.help import HelpScreen
from tui.screens.log import LogScreen
from tui.screens.monitor import MonitorScreen
from tui.screens.trials import TrialsScreen
from widgets.checklist import Checklist
from widgets.log_tail import LogTail

SERA_KEY = "demo::terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00"
SWE_KEY = "demo::swebench-verified-random-100_claude-sonnet-4-5_2026-11-20__16-00-00"
SIZE = (120, 40)


def fingerprint(app: EvaldeskApp) -> tuple[Any, ...]:
    """What a person could notice: which screen, where the cursor is, what is filtered …"""
    s = app.screen
    parts: list[Any] = [type(s).__name__, len(app.screen_stack), app.paused, app.clipboard, len(app.event_log),
                        app.focused.id if app.focused else None]
    if isinstance(s, ExperimentsScreen):
        t = s.query_one(DataTable)
        parts += [s.sort_col, s.sort_reverse, s.filter.text, s.query_one("#filter", Input).display, t.cursor_row,
                  sorted(s.marks)]
    elif isinstance(s, TrialsScreen):
        tail = s.query_one(LogTail)
        parts += [s.grouped, s.status_filter, s.focus_filter, s.file_index, s._panel, s.table.cursor,
                  tail.wrap, tail.follow, tail.current_match, s.has_class("-show-diagnose"),
                  tail.has_class("-searching"), tail.title, s.has_class("-zoom-log"), sorted(s.marks)]
    elif isinstance(s, AuditScreen):
        parts += [s.query_one(Checklist).highlighted]
    elif isinstance(s, MonitorScreen):
        parts += [s.index, s.query_one("#mon-running", DataTable).cursor_row]
    elif isinstance(s, LogScreen):
        parts += [s.query_one(DataTable).cursor_row]
    elif isinstance(s, HelpScreen):
        parts += [s.query_one("#help-keys", DataTable).scroll_y]
    elif type(s).__name__ == "JournalScreen":
        parts += [s.query_one(DataTable).cursor_row]
    elif type(s).__name__ == "DescribeScreen":
        parts += [s.query_one("#describe").scroll_y]
    elif isinstance(s, ConfirmScreen):
        parts += [s.query_one("#preview").scroll_y]
    return tuple(parts)


Step = Callable[[Pilot[Any]], Awaitable[None]]


def keys(*ks: str) -> Step:
    async def go(pilot: Pilot[Any]) -> None:
        for k in ks:
            await pilot.press(k)
            await settle(pilot, 2)
    return go


async def select(pilot: Pilot[Any], key: str) -> None:
    screen = pilot.app.screen
    assert isinstance(screen, ExperimentsScreen)
    index = [r.key for r in screen.shown].index(key)
    screen.query_one(DataTable).move_cursor(row=index, animate=False)
    await pilot.pause()


async def to_audit(pilot: Pilot[Any]) -> None:
    await select(pilot, DEV_KEY)
    await keys("a")(pilot)


async def to_trials(pilot: Pilot[Any]) -> None:
    await select(pilot, SERA_KEY)
    await keys("enter")(pilot)
    await settle(pilot, 4)


async def to_monitor(pilot: Pilot[Any]) -> None:
    # two experiments, so ] and [ have somewhere to go
    pilot.app.post_message(OpenView("monitor", [SWE_KEY, DEV_KEY]))
    await settle(pilot, 4)
    assert isinstance(pilot.app.screen, MonitorScreen)


async def to_confirm(pilot: Pilot[Any]) -> None:
    await to_audit(pilot)
    checklist = pilot.app.screen.query_one(Checklist)
    checklist.highlighted = [i.id for i in checklist.items].index("duplicates")
    await keys("x")(pilot)
    await settle(pilot, 4)
    assert isinstance(pilot.app.screen, ConfirmScreen)


async def home(pilot: Pilot[Any]) -> None:
    return None


async def to_log(pilot: Pilot[Any]) -> None:
    for i in range(3):  # something to move through
        pilot.app.record("information", "test", f"notice {i}", notify=False)
    await keys("L")(pilot)


async def to_recovery(pilot: Pilot[Any]) -> None:
    from services.remediations.recovery import Pending
    from tui.screens.recovery import RecoveryScreen

    pending = Pending(id="20261120T180000000000Z-dedupe-abcdef", action="dedupe", target="/jobs/j",
                      status="applying", n_done=3, n_steps=22)
    pilot.app.push_screen(RecoveryScreen(pending))
    await settle(pilot, 2)


async def to_lock(pilot: Pilot[Any]) -> None:
    from datetime import UTC, datetime

    from services.remediations.errors import LockHeld
    from services.remediations.lock import LockOwner
    from tui.screens.recovery import LockScreen

    owner = LockOwner(host="elsewhere", pid=1, user="bob", started_at=datetime(2026, 11, 20, tzinfo=UTC))
    held = LockHeld(owner, "/jobs/j/.evaldesk-lock", "held for 7.0 h, over the 6 h limit", target="/jobs/j")
    pilot.app.push_screen(LockScreen("dedupe", held, datetime(2026, 11, 20, 7, tzinfo=UTC)))
    await settle(pilot, 2)


async def to_command(pilot: Pilot[Any]) -> None:
    """The output view of a command a write ran (here: one that has run and ended)."""
    from tui.context import CommandRun
    from tui.screens.command_log import CommandLogScreen

    app = pilot.app
    run = CommandRun(SWE_KEY, "resume", "harbor jobs resume -p /jobs/j", None, app.now())
    run.state = "done"
    app.command_runs[SWE_KEY] = run
    app.push_screen(CommandLogScreen(SWE_KEY))
    await settle(pilot, 2)


async def to_results(pilot: Pilot[Any]) -> None:
    from tui.screens.results import ResultsScreen

    pilot.app.push_screen(ResultsScreen(SWE_KEY))
    await settle(pilot, 2)


async def to_inputs(pilot: Pilot[Any]) -> None:
    from services.remediations.inputs import InputField
    from tui.screens.inputs import InputsScreen

    fields = [InputField(name="max_out_len", label="max-out-len", guidance="≤ max-model-len − 8K", suggested=2048),
              InputField(name="batch_size", label="batch size", guidance="from max-num-seqs", suggested=16)]
    pilot.app.push_screen(InputsScreen("Launch gsm8k", fields))
    await settle(pilot, 2)


async def to_report(pilot: Pilot[Any]) -> None:
    from tui.screens.report import ReportScreen

    pilot.app.push_screen(ReportScreen("/reports/dev_set.html", ["dev_set_v2: score 0.620, 294/300 valid"]))
    await settle(pilot, 2)


async def to_journal(pilot: Pilot[Any]) -> None:
    from tui.screens.journal import JournalScreen

    app = pilot.app
    for i in range(3):  # a few writes to move through
        app.journal.append(f"dedupe:{'begin' if i else 'apply'}", f"/jobs/j{i}", before=[], after=[])
    app.push_screen(JournalScreen())
    await settle(pilot, 2)


SCREENS: dict[str, Step] = {
    "report": to_report, "recovery": to_recovery, "lock": to_lock, "command": to_command, "results": to_results,
    "inputs": to_inputs,
    "global": home, "experiments": home, "audit": to_audit, "trials": to_trials, "monitor": to_monitor,
    "confirm": to_confirm, "help": keys("question_mark"), "log": to_log, "describe": keys("d"),
    "journal": to_journal,
}


@dataclass
class Case:
    before: Step | None = None  # what makes the key meaningful
    check: Callable[[EvaldeskApp, tuple[Any, ...], tuple[Any, ...], Path], bool] | None = None
    writes: bool = False  # needs a private copy of the demo job
    env: dict[str, str] = field(default_factory=dict)


def changed(app: EvaldeskApp, a: tuple[Any, ...], b: tuple[Any, ...], tmp: Path) -> bool:
    return a != b


def exited(app: EvaldeskApp, a: tuple[Any, ...], b: tuple[Any, ...], tmp: Path) -> bool:
    return app._exit_renderables is not None or app.return_code is not None  # type: ignore[attr-defined]


def scanned(app: EvaldeskApp, a: tuple[Any, ...], b: tuple[Any, ...], tmp: Path) -> bool:
    return app.scan_count > 1


def ran(name: str) -> Callable[[EvaldeskApp, tuple[Any, ...], tuple[Any, ...], Path], bool]:
    def check(app: EvaldeskApp, a: tuple[Any, ...], b: tuple[Any, ...], tmp: Path) -> bool:
        marker = tmp / f"{name}.ran"
        return marker.exists() and marker.read_text().strip() != ""
    return check


def moved_down_first(k: str = "j") -> Step:
    return keys(k)


CASES: dict[str, Case] = {
    "app.help": Case(),
    "app.command": Case(),
    "app.palette": Case(),
    "app.log": Case(),
    "app.refresh": Case(check=scanned),
    "app.pause": Case(),
    "app.quit_ctrl_c": Case(check=exited),
    "experiments.open": Case(),
    "experiments.audit": Case(),
    "experiments.monitor": Case(),
    "experiments.filter": Case(),
    "experiments.clear_filter": Case(before=keys("slash", "d", "e", "v", "enter")),
    "experiments.sort_next": Case(),
    "experiments.sort_reverse": Case(),
    "experiments.cursor_down": Case(),
    "experiments.cursor_up": Case(before=keys("j", "j")),
    "experiments.cursor_top": Case(before=keys("j", "j")),
    "experiments.cursor_bottom": Case(),
    "experiments.copy": Case(),
    "experiments.shell": Case(check=ran("shell")),
    "experiments.quit": Case(check=exited),
    **{f"experiments.sort_{col}": Case() for col in
       ("source", "id", "benchmark", "model", "state", "progress", "score", "errors", "verdict", "age")},
    "audit.run": Case(),
    "audit.run_enter": Case(),
    "audit.undo": Case(),  # nothing to undo yet: it says so (a log entry)
    "audit.trials": Case(),
    "audit.back": Case(),
    "audit.back_q": Case(),
    "audit.cursor_down": Case(before=keys("g")),
    "audit.cursor_up": Case(before=keys("G")),
    "audit.cursor_top": Case(before=keys("G")),
    "audit.cursor_bottom": Case(before=keys("g")),
    "audit.copy": Case(),
    "trials.group": Case(),
    "trials.status": Case(),
    "trials.attempts": Case(),
    "trials.same_failure": Case(before=keys("s", "s")),  # on an errored trial
    "trials.panel": Case(),
    "trials.file_log": Case(before=keys("2")),
    "trials.file_exception": Case(),
    "trials.file_stdout": Case(),
    "trials.file_stderr": Case(),
    "trials.file_agent": Case(),
    "trials.search": Case(),
    "trials.next_match": Case(before=keys("slash", "I", "N", "F", "O", "enter")),
    "trials.prev_match": Case(before=keys("slash", "I", "N", "F", "O", "enter")),
    "trials.wrap": Case(),
    "trials.follow": Case(before=keys("slash", "I", "N", "F", "O", "enter")),
    "trials.back": Case(),
    "trials.back_q": Case(),
    "trials.cursor_down": Case(),
    "trials.cursor_up": Case(before=keys("j", "j")),
    "trials.cursor_top": Case(before=keys("j", "j")),
    "trials.cursor_bottom": Case(),
    "trials.copy": Case(),
    "trials.pager": Case(check=ran("pager")),
    "trials.editor": Case(check=ran("editor")),
    "trials.shell": Case(check=ran("shell")),
    "monitor.next": Case(),
    "monitor.prev": Case(),
    "monitor.trials": Case(),
    "monitor.audit": Case(),
    "monitor.back": Case(),
    "monitor.back_q": Case(),
    "monitor.cursor_down": Case(),
    "monitor.cursor_up": Case(before=keys("j")),
    "monitor.cursor_top": Case(before=keys("j")),
    "monitor.cursor_bottom": Case(),
    "monitor.copy": Case(),
    "confirm.yes": Case(writes=True),
    "confirm.no": Case(),
    "confirm.escape": Case(),
    "confirm.scroll_down": Case(),
    "confirm.scroll_up": Case(before=keys("pagedown")),
    "confirm.scroll_page_down": Case(),
    "confirm.scroll_page_up": Case(before=keys("pagedown")),
    "help.close": Case(),
    "help.scroll_down": Case(),
    "help.scroll_up": Case(before=keys("pagedown")),
    "help.scroll_page_down": Case(),
    "help.scroll_page_up": Case(before=keys("pagedown")),
    "log.close": Case(),
    "log.close_q": Case(),
    "log.clear": Case(),
    "log.cursor_down": Case(),
    "log.cursor_up": Case(before=keys("j")),
    "log.cursor_top": Case(before=keys("j")),
    "log.cursor_bottom": Case(),
    "log.copy": Case(),
    "audit.output": Case(),  # no command ran yet: it says so (a log entry)
    "trials.resume": Case(before=keys("s", "s")),  # the errored trials shown: a preview opens
    "command.monitor": Case(),
    "command.audit": Case(),
    "command.back": Case(),
    "command.back_q": Case(),
    "experiments.results": Case(),  # a Harbor job has no results view: it says so (a log entry)
    "trials.results": Case(),
    "results.trials": Case(),
    "results.audit": Case(),
    "results.back": Case(),
    "results.back_q": Case(),
    "inputs.submit": Case(),
    "inputs.cancel": Case(),
    "recovery.finish": Case(),
    "recovery.rollback": Case(),
    "recovery.later": Case(),
    "recovery.escape": Case(),
    "lock.break": Case(),
    "lock.close": Case(),
    "experiments.report": Case(),  # the report is written and its dialog opens
    "audit.report": Case(),
    "report.open": Case(),  # the opener is started, or the console says there is none (a log entry)
    "report.close": Case(),
    "report.close_q": Case(),
    "experiments.describe": Case(),
    "describe.close": Case(),
    "describe.scroll_down": Case(),
    "describe.scroll_up": Case(before=keys("pagedown")),
    "describe.scroll_page_down": Case(),
    "describe.scroll_page_up": Case(before=keys("pagedown")),
    "trials.focus": Case(),
    "experiments.mark": Case(),
    "experiments.clear_marks": Case(before=keys("space")),
    "experiments.invert_marks": Case(),
    "experiments.dedupe": Case(before=keys("j", "space", "space")),  # two marked: one combined preview
    "experiments.resume": Case(),
    "experiments.undo": Case(),  # nothing to undo yet: the preview says so and offers nothing
    "trials.mark": Case(),
    "trials.clear_marks": Case(before=keys("space")),
    "trials.invert_marks": Case(),
    "journal.close": Case(),
    "journal.close_q": Case(),
    "journal.cursor_down": Case(),
    "journal.cursor_up": Case(before=keys("j")),
    "journal.cursor_top": Case(before=keys("j")),
    "journal.cursor_bottom": Case(),
    "trials.zoom": Case(),
}


def test_every_action_has_a_case() -> None:
    assert sorted(set(a.id for a in ACTIONS) - set(CASES)) == []
    assert sorted(set(CASES) - set(a.id for a in ACTIONS)) == []


def _recorder(tmp: Path, name: str) -> str:
    """A stand-in program that notes its arguments (pager, editor, shell)."""
    path = tmp / f"fake-{name}"
    path.write_text(f"#!/bin/sh\necho \"$PWD $*\" > {tmp / (name + '.ran')}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


async def reset_home(pilot: Pilot[Any]) -> None:
    """Back to a fresh-looking home screen: one app serves many cases, each from the same start."""
    app = pilot.app
    while len(app.screen_stack) > 2:
        app.pop_screen()
        await pilot.pause()
    home_screen = app.screen
    assert isinstance(home_screen, ExperimentsScreen), type(home_screen)
    home_screen.sort_col, home_screen.sort_reverse = "age", False
    home_screen.marks.clear()
    home_screen._apply_filter("")
    home_screen.query_one("#filter", Input).display = False
    home_screen.query_one(DataTable).focus()
    home_screen.query_one(DataTable).move_cursor(row=0, animate=False)
    app.paused = False
    await settle(pilot, 2)


def _groups() -> list[tuple[str, list[str]]]:
    """Cases that can share one app, and those that need their own (they quit or write)."""
    shared: dict[str, list[str]] = {}
    alone: list[str] = []
    for action_id, case in CASES.items():
        if case.writes or case.check is exited:
            alone.append(action_id)
        else:
            screen = next(a.screen for a in ACTIONS if a.id == action_id)
            shared.setdefault(screen, []).append(action_id)
    return sorted(shared.items()) + [(a, [a]) for a in sorted(alone)]


@pytest.mark.parametrize(("group", "action_ids"), _groups(), ids=[g for g, _ in _groups()])
async def test_keys_do_what_they_say(group: str, action_ids: list[str], tmp_path: Path,
                                     tmp_path_factory: pytest.TempPathFactory,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for name, var in (("pager", "PAGER"), ("editor", "EDITOR"), ("shell", "SHELL")):
        monkeypatch.setenv(var, _recorder(tmp_path, name))
    monkeypatch.delenv("VISUAL", raising=False)
    writes = any(CASES[a].writes for a in action_ids)
    jobs = copy_job(tmp_path_factory, tmp_path, DEV_SET) if writes else shared_demo(tmp_path_factory)
    app = make_demo_app(jobs, tmp_path)
    failures: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for action_id in action_ids:
            spec = next(a for a in ACTIONS if a.id == action_id)
            case = CASES[action_id]
            await reset_home(pilot)
            for marker in tmp_path.glob("*.ran"):
                marker.unlink()
            await SCREENS[spec.screen](pilot)
            if case.before is not None:
                await case.before(pilot)
            before = fingerprint(app)
            key = spec.key.split(",")[0]
            await pilot.press(key)
            if case.check is exited:
                if app.return_code != 0:
                    failures.append(f"{action_id} ({key}) did not leave the console")
                break
            await settle(pilot, 3)
            after = fingerprint(app)
            if not (case.check or changed)(app, before, after, tmp_path):
                failures.append(f"{action_id} ({key}) changed nothing: {before}")
    assert failures == []


def test_recorders_are_executable(tmp_path: Path) -> None:
    assert os.access(_recorder(tmp_path, "x"), os.X_OK)
