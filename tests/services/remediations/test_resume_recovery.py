"""A resume and its undo killed (SIGKILL, in their own process) at their interruption points:
an interrupted undo is carried on from its own record; a lock left at `locked` or while the
record was written is cleared by `undo`/`finish` and `resume --apply --break-lock`; an
undone record answers so; and after every one of them the jobs dir is byte for byte what it
was — no lock, no empty quarantine folder."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from services.core.plain import copy_with
from tests.services.remediations.test_resume_ssh import TASKS, sandbox_job
from tests.support.standin_tools import use_standins
from tests.support.writes import full_tree, run_cli


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Harbor's preflight fails before it touches the job: the resume stays undoable
    use_standins(monkeypatch, tmp_path, tasks={"terminal_bench_2": TASKS}, EXIT=3)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return sandbox_job(tmp_path / "jobs")


def cli(*argv: str, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    p = run_cli("--batch", *argv, env={"EVALDESK_CRASH_AT": crash} if crash else None)
    assert "Traceback" not in p.stderr, p.stderr
    if crash:
        assert p.returncode == -signal.SIGKILL, f"never reached {crash}: rc {p.returncode}\n{p.stderr}"
    return p


def record_of(out: str) -> str:
    return str(json.loads(out)["plans"][0]["record"])


@pytest.mark.parametrize("point", ["undo:step:3", "undo:step:2", "undo:step:0"])
def test_an_interrupted_undo_is_carried_on_by_the_next(job: Path, point: str) -> None:
    before = full_tree(job.parent)
    p = cli("resume", "--apply", "--format", "json", str(job))
    assert p.returncode == 1, p.stderr  # the command failed: the trials stay aside for undo
    rid = record_of(p.stdout)
    cli("undo", str(job), crash=point)
    p = cli("undo", "--format", "json", str(job))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "undone", p.stdout
    assert full_tree(job.parent) == before
    p = cli("undo", "--format", "json", rid)
    assert p.returncode == 0 and f"record {rid} is already undone" in json.loads(p.stdout)["message"]


@pytest.mark.parametrize("point", ["locked", "write:record.json"])
@pytest.mark.parametrize("command", ["undo", "finish"])
def test_a_lock_left_before_the_record_is_cleared_by_undo_and_finish(job: Path, point: str, command: str) -> None:
    before = full_tree(job.parent)
    cli("resume", "--apply", str(job), crash=point)
    assert list(job.parent.glob(".evaldesk-quarantine/*/.evaldesk-lock"))
    p = cli("audit", "--format", "json", str(job))  # every batch command says what stops writes
    assert "a stale lock on" in p.stderr and f"`evaldesk --batch undo {job}` clears it" in p.stderr, p.stderr
    p = cli(command, "--format", "json", str(job))
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["message"].startswith(f"nothing to {command}")
    assert any("removed the lock" in n and "that process is gone" in n for n in result["notes"]), result
    assert full_tree(job.parent) == before


@pytest.mark.parametrize("point", ["locked", "write:record.json"])
def test_resume_break_lock_goes_on_after_a_kill_before_the_record(job: Path, point: str) -> None:
    cli("resume", "--apply", str(job), crash=point)
    p = cli("resume", "--apply", "--format", "json", str(job))
    assert p.returncode == 1 and "add --break-lock" not in p.stdout
    assert "is locked by" in p.stderr and "stale" in p.stderr, p.stderr
    p = cli("resume", "--apply", "--break-lock", "--format", "json", str(job))
    assert "broke the stale lock" in p.stderr, p.stderr
    plan = json.loads(p.stdout)["plans"][0]
    assert plan["applied"] and plan["exit_code"] == 3
    # the dead writer's half-made record dir went with its lock: one record, the new one
    records = [d.name for d in (job.parent / ".evaldesk-quarantine" / job.name).iterdir()]
    assert records == [plan["record"]]


def test_undo_leaves_no_empty_quarantine_folder(job: Path) -> None:
    p = cli("resume", "--apply", "--format", "json", str(job))
    assert p.returncode == 1
    p = cli("undo", "--format", "json", record_of(p.stdout))
    assert p.returncode == 0, p.stderr
    assert not (job.parent / ".evaldesk-quarantine").exists()


def test_an_unfinished_notice_counts_the_steps_its_record_marked_done() -> None:
    from datetime import UTC, datetime

    from services.remediations.recovery import Pending, merge

    at = datetime(2026, 3, 3, tzinfo=UTC)
    stale = Pending(id="r", action="resume", target="/jobs/j", host="h", status="applying", n_done=0, n_steps=20,
                    created_at=at)
    read = copy_with(stale, n_done=10, user="u", machine="m", pid=1)
    (merged,) = merge([stale], [read])
    assert "10 of 20 steps done" in merged.line()
