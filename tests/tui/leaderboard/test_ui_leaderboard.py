"""The audit screen with a real leaderboard behind it, as a person uses it: the leaderboard's
findings on the checklist, `x` → the dry run in the confirm dialog → `y` (or `n`, or a
read-only refusal, or a refusal because the row is not ours), the re-audit, `u` to undo; and
SVG snapshots of the audit screen with leaderboard findings at 80x24 and 120x40."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button

from services.core.config import Config
from services.harbor.source import HarborSource
from tests.support.hub_server import HubServer
from tests.support.leaderboard import ME, SECRET_KEY, SECRET_TOKEN, Leaderboard, config_for, secrets_env
from tests.support.leaderboard_fixtures import Jobs
from tests.support.ui_demo import FIXED_NOW, settle, use_utc
from tui.app import EvaldeskApp
from tui.screens.audit import AuditScreen
from tui.screens.confirm import ConfirmScreen
from widgets.checklist import Checklist

SHORT = "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00"
NUMERIC = "terminal_bench_2_1774950145766573_2026-11-19__11-20-00"
SIZE = (120, 40)


def make_app(lb: Leaderboard, hub: HubServer, jobs: Path, tmp: Path, *, read_only: bool = False) -> EvaldeskApp:
    use_utc()
    config: Config = config_for(lb, hub.url, tmp)
    source = HarborSource(jobs, config.policy, label="demo")
    return EvaldeskApp([source], config, read_only, now=FIXED_NOW, poll=False, cursor_blink=False)


async def open_audit(app: EvaldeskApp, pilot: Any, job: str, check: str | None = None) -> AuditScreen:
    await settle(pilot, 10)
    app.open_audit(f"demo::{job}")
    await settle(pilot, 2)
    screen = app.screen
    assert isinstance(screen, AuditScreen)
    if check:
        checklist = screen.query_one(Checklist)
        checklist.highlighted = [i.id for i in checklist.items].index(check)
    return screen


def status(app: EvaldeskApp, job: str, check: str) -> tuple[str, str | None]:
    report = app.audit(f"demo::{job}")
    assert report is not None
    c = report.check(check)
    return c.status.value, c.remediation


@pytest.fixture(autouse=True)
def _secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets_env(monkeypatch)


async def test_findings_then_deregister_confirmed_then_undone(lb: Leaderboard, hub: HubServer, demo: Jobs,
                                                              tmp_path: Path) -> None:
    others = lb.others_rows()
    app = make_app(lb, hub, demo.need(SHORT), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_audit(app, pilot, SHORT, "partial_registered")
        assert status(app, SHORT, "partial_registered") == ("fail", "deregister")
        items = {i.id: i for i in screen.query_one(Checklist).items}
        assert items["partial_registered"].runnable == "deregister"
        assert "registers a partial" in items["partial_registered"].evidence
        await pilot.press("x")
        await settle(pilot, 3)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen), [e.message for e in app.event_log]
        text = "\n".join(dialog.lines)
        assert "De-register one row" in text and "not yours" not in text.split("Rows of")[0]
        assert dialog.query_one("#cancel", Button).has_focus
        assert lb.job("job_partial") is not None
        await pilot.press("y")
        await settle(pilot, 10)
        assert isinstance(app.screen, AuditScreen)
        assert lb.job("job_partial") is None
        assert status(app, SHORT, "partial_registered")[0] == "pass"
        # undo from the audit screen: the record was kept on this machine
        await pilot.press("u")
        await settle(pilot, 3)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot, 10)
        assert lb.job("job_partial") is not None
        assert status(app, SHORT, "partial_registered") == ("fail", "deregister")
        shown = " ".join(str(e.message) for e in app.event_log)
        assert SECRET_KEY not in shown and SECRET_TOKEN not in shown
    assert lb.others_rows() == others


async def test_cancel_changes_nothing(lb: Leaderboard, hub: HubServer, demo: Jobs, tmp_path: Path) -> None:
    app = make_app(lb, hub, demo.need(NUMERIC), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_audit(app, pilot, NUMERIC, "model_name")
        assert status(app, NUMERIC, "model_name") == ("fail", "repoint_model")
        await pilot.press("x")
        await settle(pilot, 3)
        assert isinstance(app.screen, ConfirmScreen)
        assert "delete model '1774950145766573'" in "\n".join(app.screen.lines)
        await pilot.press("n")
        await settle(pilot, 3)
        assert isinstance(app.screen, AuditScreen)
    assert str(lb.job("job_numeric")["model_id"]) == lb.ids["model_numeric"]  # type: ignore[index]
    assert not (tmp_path / "journal.jsonl").exists()


async def test_read_only_refuses_in_the_dialog(lb: Leaderboard, hub: HubServer, demo: Jobs, tmp_path: Path) -> None:
    app = make_app(lb, hub, demo.need(SHORT), tmp_path, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await open_audit(app, pilot, SHORT, "partial_registered")
        await pilot.press("x")
        await settle(pilot, 3)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert "Read-only mode" in str(dialog.query_one("#refusal").render())
        # a plan that cannot apply offers no apply key at all
        assert not dialog.query("#confirm") and all("Apply" not in str(b.label) for b in dialog.query(Button))
        await pilot.press("y")
        await settle(pilot, 3)
        await pilot.press("escape")
        await settle(pilot, 3)
    assert lb.job("job_partial") is not None


async def test_a_row_handed_to_another_user_is_refused_with_the_reason(lb: Leaderboard, hub: HubServer, demo: Jobs,
                                                                       tmp_path: Path) -> None:
    app = make_app(lb, hub, demo.need(SHORT), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_audit(app, pilot, SHORT, "partial_registered")
        # the row changes hands after the audit was shown: the plan reads it again
        lb.execute("UPDATE sandbox_jobs SET username = 'bob' WHERE id = %s", (lb.ids["job_partial"],))
        await pilot.press("x")
        await settle(pilot, 3)
        # bob's row is never planned: nothing to confirm, and the refusal says why, with the rows
        assert isinstance(app.screen, AuditScreen)
        refusal = next(e.message for e in app.event_log if "Cannot apply" in e.message)
        assert "belongs to bob" in refusal and ME in refusal and lb.ids["job_partial"][:8] in refusal
        await pilot.press("y")
        await settle(pilot, 5)
    assert lb.job("job_partial")["username"] == "bob"  # type: ignore[index]


async def test_rows_that_cannot_be_told_apart_are_shown_on_the_checklist_and_on_x(
        lb: Leaderboard, hub: HubServer, demo: Jobs, tmp_path: Path) -> None:
    dup = str(uuid.uuid4())
    lb.execute("INSERT INTO sandbox_jobs (id, username, model_id, benchmark_id, status, score, job_name) "
               "VALUES (%s, %s, %s, %s, 'Finished', 0.31, %s)", (dup, ME, lb.ids["model_qwen"], lb.ids["bench_tb2"],
                                                                 SHORT))
    before = lb.sql("SELECT * FROM sandbox_jobs ORDER BY id")
    app = make_app(lb, hub, demo.need(SHORT), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_audit(app, pilot, SHORT, "partial_registered")
        item = {i.id: i for i in screen.query_one(Checklist).items}["partial_registered"]
        assert item.status == "fail" and item.runnable is None
        await pilot.press("x")
        await settle(pilot, 2)
        assert isinstance(app.screen, AuditScreen)
        said = next(e.message for e in app.event_log if "unclear which row is this run's" in e.message)
        for text in (item.evidence, said):
            assert f"{lb.ids['job_partial'][:8]} {ME} Finished" in text and f"{dup[:8]} {ME} Finished" in text
        assert f"ask {ME}" not in said
    assert lb.sql("SELECT * FROM sandbox_jobs ORDER BY id") == before


async def test_the_leaderboard_down_is_stale_never_blocking(lb: Leaderboard, hub: HubServer, demo: Jobs,
                                                           tmp_path: Path) -> None:
    app = make_app(lb, hub, demo.need(SHORT), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_audit(app, pilot, SHORT)
        assert status(app, SHORT, "partial_registered")[0] == "fail"
        lb.fault(table="sandbox_jobs", status=503, times=50)
        lb.fault(table="models", status=503, times=50)
        app.action_refresh()
        await settle(pilot, 10)
        assert "leaderboard" in app.poll_failures
        # the rows last read still answer, marked stale
        report = app.audit(f"demo::{SHORT}")
        assert report is not None and "leaderboard down" in report.check("partial_registered").evidence
        assert isinstance(app.screen, AuditScreen)


async def _at_numeric_audit(pilot: Any) -> None:
    app = pilot.app
    await open_audit(app, pilot, NUMERIC, "model_name")
    app.clear_notifications()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_audit_with_leaderboard_findings_snapshot(snap_compare: Callable[..., bool], lb: Leaderboard,
                                                  hub: HubServer, demo: Jobs, tmp_path: Path,
                                                  size: tuple[int, int]) -> None:
    # at a fixed path: the audit's commands name the job dir
    fixed = Path(tempfile.gettempdir()) / "evaldesk-snapshot-leaderboard" / "jobs"
    shutil.rmtree(fixed, ignore_errors=True)
    fixed.mkdir(parents=True)
    app = make_app(lb, hub, type(demo)(demo.shared, fixed).need(NUMERIC), tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=_at_numeric_audit)
