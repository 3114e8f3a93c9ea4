"""A resume's command outlives evaldesk: `evaldesk --batch resume --apply` is killed (SIGKILL,
its own process) while the real command it started runs on. The record says the command was
started, with its pid, before it ran; undo and finish refuse while it lives, naming it, and
go on once it is gone (finish to the end, undo only while nothing was re-run); `--force`
reaches the write path. Killed before the command was spawned, undo puts the job back byte
for byte."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.services.remediations.test_resume_ssh import TASKS, sandbox_job
from tests.support.harbor_factory import tree
from tests.support.standin_tools import use_standins
from tests.support.writes import ROOT, evaldesk_cmd, run_cli

# the site's command writes its output to a log (as sites do with nohup or tee), so it has no
# pipe to evaldesk to lose
CONFIG = """[commands]
resume = ["sh", "-c", '{first}exec harbor jobs resume "$@" >"$0" 2>&1', "{log}",
          "-p", "{{job_dir}}", ["-f", "{{type}}"]]
"""


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, dict[str, str]]:
    use_standins(monkeypatch, tmp_path, tasks={"terminal_bench_2": TASKS})
    job = sandbox_job(tmp_path / "jobs")
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG.format(log=tmp_path / "harbor.log", first=""))
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    return job, cfg, env


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def started_mark(job: Path) -> dict[str, Any] | None:
    q = job.parent / ".evaldesk-quarantine" / job.name
    for log in q.glob("*/steps.log"):
        for line in log.read_text().splitlines():
            ev = json.loads(line)
            started = (ev.get("result") or {}).get("started") or {}
            if ev.get("state") == "started" and started.get("pid"):
                return dict(started)
    return None


def batch(cfg: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    p = run_cli("--batch", *argv[:1], "--config", str(cfg), "--format", "json", *argv[1:], env=env)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_kill_9_while_the_command_runs_undo_and_finish_wait_for_it(
        setup: tuple[Path, Path, dict[str, str]]) -> None:
    job, cfg, env = setup
    proc = subprocess.Popen([*evaldesk_cmd(), "--batch", "resume", "--config", str(cfg), "--apply", "--format",
                             "json", str(job)], env={**os.environ, "PYTHONPATH": str(ROOT), **env,
                                                     "HARBOR_STANDIN_DELAY": "5"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 60
    mark = None
    while mark is None and time.monotonic() < deadline and proc.poll() is None:
        mark = started_mark(job)
        time.sleep(0.05)
    assert mark is not None, "the command was never recorded as started"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    pid = int(mark["pid"])
    assert alive(pid) and mark["pgid"] == pid and mark["host"] is None and mark["identity"]
    aside = next((job.parent / ".evaldesk-quarantine" / job.name).glob("*/trials"))
    set_aside = sorted(p.name for p in aside.iterdir())
    assert len(set_aside) == 3
    # what the console's recovery dialog and every batch command say of it
    p = batch(cfg, env, "audit", str(job))
    assert f"it started `sh` on this machine (pid {pid}, process group {pid}" in p.stderr, p.stderr
    assert "which may still run: finish and undo wait until it has ended" in p.stderr
    for command in ("undo", "finish"):
        p = batch(cfg, env, command, str(job))
        assert p.returncode != 0, p.stdout
        assert f"pid {pid}" in p.stderr and "is still running" in p.stderr, p.stderr
        assert f"kill -TERM -- -{pid}" in p.stderr
        assert alive(pid), f"{command} touched the command"
        assert sorted(p.name for p in aside.iterdir()) == set_aside  # the trials stay where they were
    while alive(pid) and time.monotonic() < deadline + 60:
        time.sleep(0.1)
    assert not alive(pid)
    # Harbor re-ran them: undo would duplicate them, finish records the end nobody saw
    p = batch(cfg, env, "undo", str(job))
    assert p.returncode != 0 and "new trial dir(s) appeared" in p.stderr, p.stderr
    p = batch(cfg, env, "finish", str(job))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "applied"
    p = batch(cfg, env, "audit", str(job))
    assert json.loads(p.stdout)["experiments"][0]["verdict"] == "finalize", p.stdout
    assert sorted(p.name for p in aside.iterdir()) == set_aside
    trials = [d for d in job.iterdir() if d.is_dir() and (d / "result.json").exists()]
    assert len(trials) == 10


def test_undo_force_reaches_the_write_path(setup: tuple[Path, Path, dict[str, str]]) -> None:
    job, cfg, env = setup
    cfg.write_text(CONFIG.format(log=cfg.parent / "harbor.log", first="sleep 60; "))  # it has not begun
    before = tree(job.parent)
    proc = subprocess.Popen([*evaldesk_cmd(), "--batch", "resume", "--config", str(cfg), "--apply", str(job)],
                            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 60
    mark = None
    while mark is None and time.monotonic() < deadline:
        mark = started_mark(job)
        time.sleep(0.05)
    assert mark is not None
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    pid = int(mark["pid"])
    try:
        p = batch(cfg, env, "undo", str(job))
        assert p.returncode != 0 and "is still running" in p.stderr
        record = next((job.parent / ".evaldesk-quarantine" / job.name).iterdir()).name
        p = batch(cfg, env, "undo", record)
        assert p.returncode != 0 and "is still running" in p.stderr
        # a person looked and says it does nothing: --force puts the trials back
        p = batch(cfg, env, "undo", record, "--force")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["status"] == "undone"
    finally:
        os.killpg(pid, signal.SIGKILL)
    assert tree(job.parent) == before


def test_killed_before_the_command_is_spawned_undo_puts_everything_back(
        setup: tuple[Path, Path, dict[str, str]]) -> None:
    job, cfg, env = setup
    before = tree(job.parent)
    p = batch(cfg, env, "resume", str(job))
    plan = json.loads(p.stdout)["plans"][0]
    point = f"step:{len(plan['rerun']) + len(plan['kept'])}:starting"
    p = run_cli("--batch", "resume", "--config", str(cfg), "--apply", str(job), env={**env, "EVALDESK_CRASH_AT": point})
    assert p.returncode == -signal.SIGKILL, p.stderr
    p = batch(cfg, env, "undo", str(job))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "undone"
    assert tree(job.parent) == before
