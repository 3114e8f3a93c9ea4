"""Resume and re-run in the console, as a person does it: on the demo's resume job, `x` on the
audit's verdict row shows the exact command, `y` runs it with its output streaming into the
log view, the experiment's row says it is resuming, the monitor sees the new trials arrive and
the audit turns green. A failed command offers the trials back; a refused plan moves nothing;
the trials screen resumes what it shows. The stand-in `harbor` runs as a real process."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest
from textual.widgets import Button, Log

from services.harbor.source import HarborSource
from tests.support.harbor_factory import tree
from tests.support.standin_tools import Standins, use_standins
from tests.support.ui_demo import copy_job, make_demo_app, settle, shared_demo
from tui.app import EvaldeskApp
from tui.screens.audit import AuditScreen
from tui.screens.command_log import CommandLogScreen
from tui.screens.confirm import ConfirmScreen
from tui.screens.experiments import ExperimentsScreen
from tui.screens.monitor import MonitorScreen
from tui.screens.trials import TrialsScreen
from widgets.checklist import Checklist

QWEN = "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00"
SERA = "terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00"
NEVER = "terminal_bench_2_1774950145766573_2026-11-19__11-20-00"
SIZE = (120, 40)
RECORD_ID = re.compile(r"\d{8}T\d{12}Z-resume-[0-9a-f]{6}")


def demo_tasks(factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """What Harbor's registry would resolve the demo's datasets to: their task names."""
    snap = HarborSource(shared_demo(factory)).scan_sync()
    out: dict[str, set[str]] = {}
    for exp in snap.experiments:
        out.setdefault(exp.benchmark or "", set()).update(t.task_name for t in exp.trials)
    return {k: sorted(v) for k, v in out.items()}


@pytest.fixture
def standins(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Standins:
    return use_standins(monkeypatch, tmp_path, tasks=demo_tasks(tmp_path_factory), DELAY="0.02")


async def open_fix(app: EvaldeskApp, pilot: object, key: str) -> ConfirmScreen:
    """From the audit's verdict: the row it starts on, then `x`."""
    await settle(pilot)
    app.open_audit(key)
    await pilot.pause()  # type: ignore[attr-defined]
    screen = app.screen
    assert isinstance(screen, AuditScreen)
    report = app.audit(key)
    assert report is not None
    item = screen.query_one(Checklist).selected_item
    assert item is not None and item.runnable == report.verdict, (item, report.verdict)
    await pilot.press("x")  # type: ignore[attr-defined]
    await settle(pilot, 3)
    assert isinstance(app.screen, ConfirmScreen), [e.message for e in app.event_log]
    return app.screen


async def wait_for(pilot: object, check: object, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():  # type: ignore[operator]
        assert loop.time() < end, "timed out"
        await pilot.pause(0.05)  # type: ignore[attr-defined]


async def batch(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui.cli", "--batch", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_three_keys_from_the_verdict_to_a_running_resume_then_green(
        standins: Standins, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # slow enough to be watched while it runs, however fast the machine
    monkeypatch.setenv("HARBOR_STANDIN_DELAY", "0.08")
    jobs = copy_job(tmp_path_factory, tmp_path, QWEN)
    key = f"demo::{QWEN}"
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_fix(app, pilot, key)
        assert app.audit(key).verdict == "resume"  # type: ignore[union-attr]
        # the preview is the batch plan, line for line
        rc, out, err = await batch("resume", "--format", "table", str(jobs / QWEN))
        assert rc == 1, err
        printed = out.splitlines()[: len(dialog.lines)]
        assert [RECORD_ID.sub("R", x) for x in dialog.lines] == [RECORD_ID.sub("R", x.rstrip()) for x in printed]
        preview = "\n".join(dialog.lines)
        assert "Set aside 85 trial(s), then run the command below on this machine:" in preview
        assert "  DaytonaError ×65" in preview and "  EnvironmentStartTimeoutError ×20" in preview
        assert (f"  harbor jobs resume -p {jobs / QWEN} -f DaytonaError -f EnvironmentStartTimeoutError"
                in preview)
        assert dialog.query_one("#cancel", Button).has_focus
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, CommandLogScreen)
        run = app.command_runs[key]
        # while it runs: the row says so, the log streams, the monitor follows
        await wait_for(pilot, lambda: run.running and len(run.output) > 3)
        home = next(s for s in app.screen_stack if isinstance(s, ExperimentsScreen))
        row = next(r for r in home.rows if r.key == key)
        assert row.command == "resuming" and row.cell_text("verdict", False, 11).plain == "resuming…"
        assert "Trial " in "\n".join(app.screen.query_one(Log).lines)
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, MonitorScreen)
        await wait_for(pilot, lambda: not run.running)
        await settle(pilot)
        assert run.state == "done" and run.exit_code == 0, run.message
        assert app.experiment(key).counts.valid == 267  # type: ignore[union-attr]
        series = app.monitor.series(key)
        assert series is not None and max(series.values("valid")) == 267 and min(series.values("valid")) < 267
        await pilot.press("a")
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        assert app.audit(key).verdict == "finalize"  # type: ignore[union-attr]
        assert "last resume" in str(app.screen.query_one("#audit-command").render())
        # o reopens the output; its keys go where they say
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, CommandLogScreen)
        log = "\n".join(app.screen.query_one(Log).lines)
        assert "Job finished: 267/267" in log
        assert "exit code 0" in str(app.screen.query_one("#command-status").render())
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AuditScreen)
        await pilot.press("o")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, AuditScreen)
    calls = standins.calls()
    assert calls == [["harbor", "jobs", "resume", "-p", str(jobs / QWEN), "-f", "DaytonaError",
                      "-f", "EnvironmentStartTimeoutError"]]


async def test_a_failed_command_offers_the_trials_back(
        standins: Standins, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARBOR_STANDIN_EXIT", "3")
    jobs = copy_job(tmp_path_factory, tmp_path, QWEN)
    before = tree(jobs / QWEN)
    key = f"demo::{QWEN}"
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_fix(app, pilot, key)
        await pilot.press("y")
        await settle(pilot)
        run = app.command_runs[key]
        assert run.state == "failed" and run.exit_code == 3
        assert "preflight failed" in "".join(t for _, t in run.output)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen), [e.message for e in app.event_log]
        assert "put back 85 trial dir(s)" in "\n".join(dialog.lines)
        await pilot.press("y")
        await settle(pilot)
        assert tree(jobs / QWEN) == before
        assert app.audit(key).verdict == "resume"  # type: ignore[union-attr]
        assert any("undid resume" in e.message for e in app.event_log)


async def test_a_refused_resume_says_why_and_moves_nothing(
        standins: Standins, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    jobs = copy_job(tmp_path_factory, tmp_path, QWEN)
    (jobs / QWEN / "config.json").unlink()
    before = tree(jobs)
    key = f"demo::{QWEN}"
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_fix(app, pilot, key)
        refusal = str(dialog.query_one("#refusal").render())
        assert "has no config.json" in refusal
        # a plan that cannot apply offers no apply key at all
        assert not dialog.query("#confirm") and all("Apply" not in str(b.label) for b in dialog.query(Button))
        await pilot.press("y")
        await settle(pilot)
        assert key not in app.command_runs
        # y applies nothing: it says why again
        assert any(e.level == "warning" and "has no config.json" in e.message for e in app.event_log)
    assert tree(jobs) == before
    assert standins.calls() == []


async def test_the_trials_screen_resumes_the_group_it_shows(
        standins: Standins, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    jobs = copy_job(tmp_path_factory, tmp_path, SERA)
    key = f"demo::{SERA}"
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # nothing Harbor would retry: the verdict offers no fix, it asks which errors to re-run, with the command
        app.open_audit(key)
        await pilot.pause()
        assert app.audit(key).verdict == "investigate"  # type: ignore[union-attr]
        assert "--exception VerifierOutputParseError" in str(app.screen.query_one("#verdict").render())
        await pilot.press("x")
        await settle(pilot, 3)
        assert isinstance(app.screen, AuditScreen)
        assert any("No fix evaldesk can run here" in e.message and "decide which errors to re-run" in e.message
                   for e in app.event_log)
        app.open_trials(key)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TrialsScreen)
        await pilot.press("E")
        await pilot.pause()
        screen.table.cursor = [g.key for g in screen.groups].index("VerifierOutputParseError")
        await pilot.press("x")
        await settle(pilot, 3)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        preview = "\n".join(dialog.lines)
        assert "Set aside 12 trial(s)" in preview and "-f VerifierOutputParseError" in preview
        assert "the error gate stays over 10% (14.2%)" in preview
        await pilot.press("n")
        await settle(pilot)
        # a group of scored trials has nothing to resume
        screen.table.cursor = [g.key for g in screen.groups].index("(no exception)")
        await pilot.press("x")
        await pilot.pause()
        assert app.screen is screen


async def test_rerun_from_the_verdict_starts_a_fresh_job_the_list_then_shows(
        standins: Standins, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    jobs = copy_job(tmp_path_factory, tmp_path, NEVER)
    key = f"demo::{NEVER}"
    before = tree(jobs / NEVER)
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_fix(app, pilot, key)
        preview = "\n".join(dialog.lines)
        new_name = "terminal_bench_2_1774950145766573_" + app.now().astimezone().strftime("%Y-%m-%d__%H-%M-%S")
        assert preview.splitlines()[0].endswith(new_name)
        assert f"--job-name {new_name} -o {jobs}" in preview
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.command_runs[key].running)
        await settle(pilot)
        assert app.command_runs[key].exit_code == 0
        assert app.experiment(f"demo::{new_name}") is not None
    assert tree(jobs / NEVER) == before
