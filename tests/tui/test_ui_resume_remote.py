"""The demo's resume job on an SSH host, in the console: `x`, read the preview (the site's sbatch,
on the host), `y` — the log view shows the submission, the row follows the SLURM job it printed,
and the audit turns green when the job is done. Quitting while a command runs here asks twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import Log

from services.core.config import CommandConfig, Config, HostConfig
from services.harbor.ssh_source import SSHHarborSource
from services.transport.ssh import SSHPool
from tests.services.remediations.test_resume_ssh import SITE_RESUME, SITE_SCRIPT
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server
from tests.support.standin_tools import use_standins
from tests.support.ui_demo import copy_job, settle, use_utc
from tests.tui.test_ui_resume import QWEN, demo_tasks, open_fix, wait_for
from tui.app import EvaldeskApp
from tui.screens.command_log import CommandLogScreen
from tui.screens.experiments import ExperimentsScreen


async def test_resume_on_a_host_from_the_verdict_to_green(
        ssh_server: InProcessSSHServer, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_utc()
    tools = use_standins(monkeypatch, tmp_path, tasks=demo_tasks(tmp_path_factory), DELAY="0.01")
    jobs = copy_job(tmp_path_factory, tmp_path, QWEN)
    site = tmp_path / "site"
    site.mkdir()
    (site / "eval_harbor.sbatch").write_text(SITE_SCRIPT)
    spec = ssh_server.spec()
    config = Config(journal_path=str(tmp_path / "journal.jsonl"),
                    hosts=[HostConfig(name="cluster", host=spec.host,
                                      commands=CommandConfig(resume=SITE_RESUME, cwd=str(site)))])
    pool = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
    src = SSHHarborSource(spec, [str(jobs)], label="cluster", pool=pool)
    app = EvaldeskApp([src], config, poll=False, cursor_blink=False)
    key = f"cluster::{QWEN}"
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            dialog = await open_fix(app, pilot, key)
            preview = "\n".join(dialog.lines)
            assert f"Command, on {spec.label}:" in preview
            assert f"  cd {site} && sbatch --export=ALL,JOB_DIR={jobs / QWEN},TYPES=DaytonaError," \
                   "EnvironmentStartTimeoutError eval_harbor.sbatch --resume" in preview
            await pilot.press("y")
            await wait_for(pilot, lambda: not app.command_runs[key].running)
            run = app.command_runs[key]
            assert (run.state, run.slurm_job_id, run.host) == ("done", "1000", spec.label), run.message
            assert isinstance(app.screen, CommandLogScreen)
            assert "Submitted batch job 1000" in "\n".join(app.screen.query_one(Log).lines)
            assert "SLURM job 1000 submitted" in str(app.screen.query_one("#command-status").render())

            async def verdict() -> str | None:
                await pilot.press("r")
                await settle(pilot, 2)
                report = app.audit(key)
                return report.verdict if report else None

            await verdict()
            exp = app.experiment(key)
            assert exp is not None and exp.scheduler_job_id == "1000"  # followed under the new SLURM job
            for _ in range(100):
                if await verdict() == "finalize":
                    break
                await asyncio.sleep(0.1)
            exp = app.experiment(key)
            assert exp is not None and (exp.scheduler_state, exp.counts.valid) == ("COMPLETED", 267)
            assert app.audit(key).verdict == "finalize"  # type: ignore[union-attr]
            assert tools.calls()[0][:4] == ["harbor", "jobs", "resume", "-p"]
    finally:
        await src.close()
        await pool.close()


async def test_quitting_while_a_command_runs_here_asks_again(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.ui_demo import make_demo_app

    use_standins(monkeypatch, tmp_path, tasks=demo_tasks(tmp_path_factory), DELAY="0.2")
    jobs = copy_job(tmp_path_factory, tmp_path, QWEN)
    app = make_demo_app(jobs, tmp_path)
    key = f"demo::{QWEN}"
    async with app.run_test(size=(120, 40)) as pilot:
        await open_fix(app, pilot, key)
        await pilot.press("y")
        await wait_for(pilot, lambda: len(app.command_runs[key].output) > 1)
        await pilot.press("escape", "escape")  # the log view, then the audit: the command keeps running
        await pilot.pause()
        assert isinstance(app.screen, ExperimentsScreen) and app.command_runs[key].running
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running and any("press q again" in e.message for e in app.event_log)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
