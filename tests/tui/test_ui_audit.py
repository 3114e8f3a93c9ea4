"""Pilot tests of the audit screen and its one runnable fix: dedupe through a confirmed dry
run, cancel, undo, and refusal in read-only mode — on a private copy of the demo's
dev_set_v2 job (duplicates from a resume plus staged copies under restored/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Button

from services.remediations.dedupe import QUARANTINE_DIR
from tui.app import EvaldeskApp
from tui.screens.audit import AuditScreen
from tui.screens.confirm import ConfirmScreen
from widgets.checklist import Checklist

try:
    from ui_demo import DEV_KEY, DEV_SET, copy_job, make_demo_app, settle
except ImportError:  # collected as a package
    from tests.support.ui_demo import DEV_KEY, DEV_SET, copy_job, make_demo_app, settle

SIZE = (120, 40)


@pytest.fixture
def jobs(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return copy_job(tmp_path_factory, tmp_path)


def status_of(app: EvaldeskApp, check: str) -> str:
    report = app.audit(DEV_KEY)
    assert report is not None
    return report.check(check).status.value


def quarantined(jobs: Path) -> list[Path]:
    q = jobs / DEV_SET / QUARANTINE_DIR
    return sorted(q.iterdir()) if q.exists() else []


async def open_dedupe_dialog(app: EvaldeskApp, pilot: object) -> ConfirmScreen:
    await settle(pilot)
    app.open_audit(DEV_KEY)
    await pilot.pause()  # type: ignore[attr-defined]
    screen = app.screen
    assert isinstance(screen, AuditScreen)
    checklist = screen.query_one(Checklist)
    row = [i.id for i in checklist.items].index("duplicates")
    assert checklist.items[row].runnable == "dedupe"
    checklist.highlighted = row
    await pilot.press("x")  # type: ignore[attr-defined]
    await settle(pilot, 2)
    assert isinstance(app.screen, ConfirmScreen), [e.message for e in app.event_log]
    return app.screen


async def test_dedupe_preview_then_confirm_applies_and_reaudits(jobs: Path, tmp_path: Path) -> None:
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_dedupe_dialog(app, pilot)
        assert status_of(app, "duplicates") == "fail"
        preview = "\n".join(dialog.lines)
        assert "keep 300 of 315 attempts" in preview
        assert "restored/" in preview  # the staged copies are listed by path
        assert str(jobs) not in preview  # paths are shown relative to the job
        assert dialog.query_one("#cancel", Button).has_focus  # never the confirming control
        assert quarantined(jobs) == []
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        assert status_of(app, "duplicates") == "pass"
        [qdir] = quarantined(jobs)
        record = json.loads((qdir / "record.json").read_text())
        assert len([s for s in record["plan"]["steps"] if s["kind"] == "move"]) == 21
        assert '"status":"applied"' in (qdir / "steps.log").read_text()
        journal = (tmp_path / "journal.jsonl").read_text().splitlines()
        assert json.loads(journal[-1])["action"] == "dedupe:apply"
        assert any("dedupe applied" in e.message for e in app.event_log)
        # the checklist shows the new state
        items = app.screen.query_one(Checklist).items
        assert next(i for i in items if i.id == "duplicates").status == "pass"


async def test_cancel_and_a_stray_enter_change_nothing(jobs: Path, tmp_path: Path) -> None:
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_dedupe_dialog(app, pilot)
        await pilot.press("n")
        await settle(pilot, 2)
        assert isinstance(app.screen, AuditScreen)
        await pilot.press("x")
        await settle(pilot, 2)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")  # lands on Cancel
        await settle(pilot, 2)
        assert isinstance(app.screen, AuditScreen)
        assert quarantined(jobs) == []
        assert status_of(app, "duplicates") == "fail"
        assert not (tmp_path / "journal.jsonl").exists()


async def test_undo_puts_everything_back_after_confirm(jobs: Path, tmp_path: Path) -> None:
    app = make_demo_app(jobs, tmp_path)
    before = sorted(p.name for p in (jobs / DEV_SET).iterdir())
    async with app.run_test(size=SIZE) as pilot:
        await open_dedupe_dialog(app, pilot)
        await pilot.press("y")
        await settle(pilot)
        assert status_of(app, "duplicates") == "pass"
        await pilot.press("u")
        await settle(pilot, 2)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert "put back 21 trial dir(s)" in "\n".join(dialog.lines)
        await pilot.press("y")
        await settle(pilot)
        assert status_of(app, "duplicates") == "fail"
        after = sorted(p.name for p in (jobs / DEV_SET).iterdir() if p.name != QUARANTINE_DIR)
        assert after == before
        # nothing left to undo: a notice, no dialog
        await pilot.press("u")
        await settle(pilot, 2)
        assert isinstance(app.screen, AuditScreen)
        assert any("nothing to undo" in e.message for e in app.event_log)


async def test_read_only_dialog_says_why_and_refuses(jobs: Path, tmp_path: Path) -> None:
    app = make_demo_app(jobs, tmp_path, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_dedupe_dialog(app, pilot)
        refusal = dialog.query_one("#refusal").render()
        # it names where read-only came from: the flag, not a config that never set it
        assert "Read-only mode is on (--read-only)" in str(refusal)
        # a plan that cannot apply offers no apply key at all
        assert not dialog.query("#confirm") and all("Apply" not in str(b.label) for b in dialog.query(Button))
        await pilot.press("y")
        await settle(pilot, 2)
        await pilot.press("escape")
        await settle(pilot, 2)
        assert isinstance(app.screen, AuditScreen)
        assert quarantined(jobs) == []
        assert any(e.level == "warning" and "Read-only" in e.message for e in app.event_log)
        assert not app.guard_write("dedupe")


async def test_a_check_without_a_fix_says_what_to_do(jobs: Path, tmp_path: Path) -> None:
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_audit(DEV_KEY)
        await pilot.pause()
        checklist = app.screen.query_one(Checklist)
        checklist.highlighted = [i.id for i in checklist.items].index("finished")
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, AuditScreen)
        assert any("No fix evaldesk can run here" in e.message for e in app.event_log)
