"""The console and the write path's recovery, as a person meets it: an unfinished write found
at start is offered as Finish / Roll back / Later; a write stopped by another writer's lock
says who holds it, and only a stale lock can be broken — from that same dialog."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from textual.widgets import Button

from services.core.journal import Journal
from services.remediations.lock import LockOwner
from tests.support.writes import full_tree, run_cli, tree_diff
from tui.actions import bindings_for
from tui.screens.audit import AuditScreen
from tui.screens.recovery import LockScreen, RecoveryScreen

try:
    from ui_demo import DEV_SET, copy_job, make_demo_app, settle
except ImportError:  # collected as a package
    from tests.support.ui_demo import DEV_SET, copy_job, make_demo_app, settle

from services.core.plain import dump
from tests.tui.test_ui_audit import open_dedupe_dialog, quarantined, status_of

SIZE = (120, 40)


@pytest.fixture
def jobs(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return copy_job(tmp_path_factory, tmp_path)


def crashed(jobs: Path, point: str = "step:3") -> str:
    p = run_cli("--batch", "dedupe", "--apply", str(jobs / DEV_SET), env={"EVALDESK_CRASH_AT": point})
    assert p.returncode == -signal.SIGKILL, p.stderr
    [record] = [q.name for q in (jobs / DEV_SET / ".evaldesk-quarantine").iterdir()]
    return record


def text_of(screen: object, selector: str) -> str:
    return str(screen.query_one(selector).render())  # type: ignore[attr-defined]


async def test_an_unfinished_dedupe_is_offered_at_start_and_rolled_back(jobs: Path, tmp_path: Path) -> None:
    d = jobs / DEV_SET
    before = full_tree(d)
    record = crashed(jobs)
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, RecoveryScreen), [e.message for e in app.event_log]
        summary = text_of(dialog, "#summary")
        assert "Action:  dedupe" in summary and f"Target:  {d}" in summary
        assert "Host:    this machine" in summary and "4 of 22 steps done" in summary
        assert f"Record:  {record}" in summary and f"@{socket.gethostname()} pid" in summary
        assert dialog.query_one("#later", Button).has_focus  # a stray enter changes nothing
        await pilot.press("b")
        await settle(pilot)
        assert not isinstance(app.screen, RecoveryScreen)
        assert any(f"rolled back dedupe {record}" in e.message for e in app.event_log)
        assert status_of(app, "duplicates") == "fail"
    assert full_tree(d) == before, tree_diff(before, full_tree(d))
    assert [e.action for e in Journal(tmp_path / "journal.jsonl").entries()][-1] == "dedupe:undo"


async def test_finish_carries_the_unfinished_dedupe_to_the_end(jobs: Path, tmp_path: Path) -> None:
    record = crashed(jobs, "step:21:backup")  # every move done, the aggregate's original saved
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RecoveryScreen)
        assert "21 of 22 steps done" in text_of(app.screen, "#summary")
        await pilot.press("f")
        await settle(pilot)
        assert any(f"finished dedupe {record}" in e.message for e in app.event_log)
        assert status_of(app, "duplicates") == "pass"
    steps = (jobs / DEV_SET / ".evaldesk-quarantine" / record / "steps.log").read_text()
    assert '"status":"applied"' in steps
    assert not (jobs / DEV_SET / ".evaldesk-lock").exists()
    assert [e.action for e in Journal(tmp_path / "journal.jsonl").entries()][-1] == "dedupe:finish"


async def test_later_leaves_it_and_the_next_start_asks_again(jobs: Path, tmp_path: Path) -> None:
    d = jobs / DEV_SET
    crashed(jobs)
    held = full_tree(d)
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RecoveryScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, RecoveryScreen)
        await pilot.press("r")  # a refresh does not ask again while the console runs
        await settle(pilot)
        assert not isinstance(app.screen, RecoveryScreen)
    assert full_tree(d) == held
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RecoveryScreen)
        await pilot.press("l")
        await settle(pilot)
        assert not isinstance(app.screen, RecoveryScreen)
    assert full_tree(d) == held


async def test_read_only_offers_nothing_it_cannot_do(jobs: Path, tmp_path: Path) -> None:
    d = jobs / DEV_SET
    crashed(jobs)
    held = full_tree(d)
    app = make_demo_app(jobs, tmp_path, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, RecoveryScreen)
        assert "Read-only mode is on" in text_of(dialog, "#refusal")
        assert dialog.query_one("#finish", Button).disabled and dialog.query_one("#rollback", Button).disabled
        await pilot.press("f")
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(app.screen, RecoveryScreen)  # neither key did anything
        await pilot.press("escape")
        await settle(pilot)
    assert full_tree(d) == held


def _lock(d: Path, owner: LockOwner) -> None:
    (d / ".evaldesk-lock").mkdir()
    (d / ".evaldesk-lock" / "owner.json").write_text(json.dumps(dump(owner, json=True)))


async def test_a_live_writer_s_lock_is_shown_and_never_broken(jobs: Path, tmp_path: Path) -> None:
    d = jobs / DEV_SET
    owner = LockOwner(host=socket.gethostname(), pid=os.getpid(), user="alice",
                      started_at=datetime.now(UTC) - timedelta(minutes=3), action="dedupe", record="R1")
    _lock(d, owner)
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_dedupe_dialog(app, pilot)
        await pilot.press("y")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, LockScreen), [e.message for e in app.event_log]
        holder = text_of(dialog, "#holder")
        assert f"alice@{socket.gethostname()}, pid {os.getpid()}" in holder and "Doing:   dedupe R1" in holder
        assert "Since:" in holder
        assert not dialog.query("#break")  # no way to break a live writer's lock
        await pilot.press("b")
        await settle(pilot, 2)
        assert isinstance(app.screen, LockScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        assert status_of(app, "duplicates") == "fail"
    assert quarantined(jobs) == []
    assert json.loads((d / ".evaldesk-lock" / "owner.json").read_text())["user"] == "alice"


async def test_a_stale_lock_is_broken_after_confirmation_and_the_write_goes_ahead(jobs: Path,
                                                                                 tmp_path: Path) -> None:
    d = jobs / DEV_SET
    dead = subprocess.Popen(["true"])
    dead.wait()
    _lock(d, LockOwner(host=socket.gethostname(), pid=dead.pid, user="bob", started_at=datetime.now(UTC),
                       action="dedupe", record="R0"))
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_dedupe_dialog(app, pilot)
        await pilot.press("y")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, LockScreen)
        assert f"pid {dead.pid} is not running" in text_of(dialog, "#stale")
        assert dialog.query_one("#close", Button).has_focus
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        assert any("broke the stale lock held by bob@" in e.message for e in app.event_log)
        assert status_of(app, "duplicates") == "pass"
    assert [e.action for e in Journal(tmp_path / "journal.jsonl").entries()] == \
        ["lock:break", "dedupe:begin", "dedupe:apply"]
    assert not (d / ".evaldesk-lock").exists()


def test_the_dialogs_take_their_keys_from_the_one_registry() -> None:
    from textual.binding import Binding

    for owner, scope in ((RecoveryScreen, "recovery"), (LockScreen, "lock")):
        bindings = [b for b in owner.BINDINGS if isinstance(b, Binding)]
        assert bindings == bindings_for(scope) and all(b.id and b.description for b in bindings)

