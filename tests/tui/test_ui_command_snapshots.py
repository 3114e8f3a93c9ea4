"""SVG snapshots of the command log view (a resume's output) at 80x24 and 120x40: one while the
command runs, one after an `sbatch` submission. The run is given fixed output so the picture
never moves; the Pilot tests in test_ui_resume.py run real commands.

Regenerate with: python -m pytest tests/tui/test_ui_command_snapshots.py --snapshot-update
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.ui_demo import FIXED_NOW, make_demo_app, settle, shared_demo
from tui.context import CommandRun

SIZES = [(80, 24), (120, 40)]
QWEN = "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00"
KEY = f"demo::{QWEN}"
OUTPUT = [
    ("stdout", "Running 85 trial(s) (182 already done of 267)\n"),
    *[("stdout", f"Trial fix-git-history-{i}__AbC{i:04d} finished: reward={float(i % 2)}\n") for i in range(14)],
    ("stderr", "Skipping existing trial directory fix-raft-log__Zz9 because result.json could not be parsed\n"),
]


def make_run(state: str) -> CommandRun:
    run = CommandRun(KEY, "resume", f"harbor jobs resume -p /data/eval_jobs/{QWEN} -f DaytonaError "
                     "-f EnvironmentStartTimeoutError", None, FIXED_NOW, output=list(OUTPUT), received=len(OUTPUT))
    if state == "submitted":
        run.command = ("cd /e/data1/eval && sbatch '--export=ALL,JOB_DIR=/e/data1/eval_jobs/" + QWEN + "' "
                       "eval_harbor.sbatch --resume   (on login-a)")
        run.host = "login-a"
        run.output, run.received = [("stdout", "Submitted batch job 4242\n")], 1
        run.state, run.exit_code, run.slurm_job_id = "done", 0, "4242"
        run.record = "20261120T180500000000Z-resume-6f33f9"
        run.message = "resume submitted SLURM job 4242 on login-a; m monitors it"
    return run


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("state", ["running", "submitted"])
def test_command_log_snapshot(snap_compare: Callable[..., bool], tmp_path_factory: pytest.TempPathFactory,
                              tmp_path: Path, state: str, size: tuple[int, int]) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)

    async def open_log(pilot: object) -> None:
        await settle(pilot)
        app.command_runs[KEY] = make_run(state)
        app.open_command_log(KEY)
        await settle(pilot, 2)
        app.clear_notifications()
        await pilot.pause()  # type: ignore[attr-defined]

    assert snap_compare(app, terminal_size=size, run_before=open_log)


async def test_the_log_view_keeps_up_when_old_output_is_dropped(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import Log

    import tui.app
    from tui.messages import CommandOutput

    monkeypatch.setattr(tui.app, "OUTPUT_LIMIT", 5)
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.command_runs[KEY] = make_run("running")
        app.command_runs[KEY].output, app.command_runs[KEY].received = [], 0
        for i in range(12):
            app.post_message(CommandOutput(KEY, "stdout", f"line {i}\n"))
        await settle(pilot, 2)
        app.open_command_log(KEY)
        await settle(pilot, 2)
        for i in range(12, 15):
            app.post_message(CommandOutput(KEY, "stdout", f"line {i}\n"))
        await settle(pilot, 2)
        lines = [x for x in app.screen.query_one(Log).lines if x]
        assert lines == [f"line {i}" for i in range(7, 15)]
