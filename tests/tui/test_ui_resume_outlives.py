"""The console's recovery dialog for a resume whose command outlived the evaldesk that started
it: it names the command, its pid and host and that it may still run; rolling back or
finishing from the dialog is refused while it lives, and the set-aside trials stay put."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from services.harbor.source import HarborSource
from tests.services.remediations.test_resume_outlives import CONFIG, started_mark
from tests.services.remediations.test_resume_ssh import TASKS, sandbox_job
from tests.support.standin_tools import use_standins
from tests.support.writes import ROOT, evaldesk_cmd
from tui.screens.recovery import RecoveryScreen

try:
    from ui_demo import make_demo_app, settle
except ImportError:  # collected as a package
    from tests.support.ui_demo import make_demo_app, settle

SIZE = (120, 40)


async def test_the_dialog_names_the_running_command_and_waits_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_standins(monkeypatch, tmp_path, tasks={"terminal_bench_2": TASKS})
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    job = sandbox_job(tmp_path / "jobs")
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG.format(log=tmp_path / "harbor.log", first="sleep 60; "))
    proc = subprocess.Popen([*evaldesk_cmd(), "--batch", "resume", "--config", str(cfg), "--apply", str(job)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    mark = None
    while mark is None and time.monotonic() < deadline:
        mark = started_mark(job)
        time.sleep(0.05)
    assert mark is not None
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    pid = int(mark["pid"])
    aside = next((job.parent / ".evaldesk-quarantine" / job.name).glob("*/trials"))
    set_aside = sorted(p.name for p in aside.iterdir())
    try:
        app = make_demo_app(job.parent, tmp_path, sources=[HarborSource(job.parent, label="jobs")])
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            dialog = app.screen
            assert isinstance(dialog, RecoveryScreen), [e.message for e in app.event_log]
            summary = str(dialog.query_one("#summary").render())
            assert f"pid {pid}" in summary and "may still run: finish and undo wait" in summary, summary
            await pilot.press("b")
            await settle(pilot)
            said = " ".join(e.message for e in app.event_log)
            assert f"pid {pid}" in said and "is still running" in said, said
        assert sorted(p.name for p in aside.iterdir()) == set_aside
        assert Path(f"/proc/{pid}").exists()
    finally:
        os.killpg(pid, signal.SIGKILL)
