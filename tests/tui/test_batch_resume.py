"""`evaldesk --batch resume` through the real entry point: DESIGN 7's plan shape, exit codes
0/1/2, the command's output on stderr with --apply, the refusals, and the same on an SSH host
with the site's sbatch (the stand-ins run as real processes)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from tests.services.remediations.test_resume_ssh import SITE_RESUME, SITE_SCRIPT, TASKS, sandbox_job
from tests.support.harbor_factory import JobBuilder, tree
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server
from tests.support.standin_tools import use_standins
from tui.cli import main

PLAN_KEYS = {"id", "rerun", "command", "host", "cwd", "types", "left", "kept", "unmatched", "aside", "blocked",
             "applied", "record", "exit_code", "slurm_job_id", "error"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--batch", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out, err


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    use_standins(monkeypatch, tmp_path, tasks={"terminal_bench_2": TASKS})
    return sandbox_job(tmp_path / "jobs")


def test_dry_run_prints_the_plan_and_exits_1(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(job.parent)
    code, out, _ = run(capsys, "resume", "--format", "json", str(job))
    assert code == 1
    (plan,) = json.loads(out)["plans"]
    assert set(plan) == PLAN_KEYS
    assert plan["rerun"] == sorted(plan["rerun"]) and len(plan["rerun"]) == 3
    assert plan["command"] == ["harbor", "jobs", "resume", "-p", str(job), "-f", "DaytonaError"]
    assert (plan["host"], plan["applied"], plan["record"], plan["types"]) == (None, False, None, {"DaytonaError": 3})
    assert tree(job.parent) == before


def test_apply_streams_the_output_to_stderr_waits_and_exits_0(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "resume", "--apply", "--format", "json", str(job))
    assert code == 0, err
    (plan,) = json.loads(out)["plans"]
    assert plan["applied"] and plan["exit_code"] == 0 and plan["record"]
    assert "Trial task-000__" in err and "Job finished: 10/10" in err
    code, out, _ = run(capsys, "audit", "--format", "json", str(job))
    assert code == 0 and json.loads(out)["experiments"][0]["verdict"] == "finalize"
    # nothing left to resume: the plan is empty and says so
    code, out, _ = run(capsys, "resume", "--format", "table", str(job))
    assert code == 0 and "nothing to resume" in out


def test_exception_matches_case_insensitively_and_says_when_a_type_matches_nothing(
        job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "resume", "--exception", "daytonaerror", "--format", "json", str(job))
    assert code == 1 and json.loads(out)["plans"][0]["types"] == {"DaytonaError": 3}
    code, out, err = run(capsys, "resume", "--exception", "NoSuchError", "--format", "json", str(job))
    assert code == 2
    assert "no errored trial has the type(s) NoSuchError" in err
    assert json.loads(out)["plans"][0]["unmatched"] == ["NoSuchError"]


def test_a_failed_command_exits_1_and_batch_undo_puts_the_trials_back(
        job: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARBOR_STANDIN_EXIT", "3")
    before = tree(job)
    code, out, err = run(capsys, "resume", "--apply", "--format", "json", str(job))
    assert code == 1
    (plan,) = json.loads(out)["plans"]
    assert plan["exit_code"] == 3 and plan["error"]
    assert "preflight failed" in err
    assert f"the resume command failed (exit code 3); the 3 trial(s) set aside stay in {plan['aside']}" in err
    assert f"`evaldesk --batch undo {plan['record']}` puts them back" in err
    code, out, err = run(capsys, "undo", "--format", "json", plan["record"])
    assert code == 0, err
    assert json.loads(out)["status"] == "undone"
    assert tree(job) == before


@pytest.mark.parametrize("case", ["running", "read_only"])
def test_refusals_move_nothing_and_say_why(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    use_standins(monkeypatch, tmp_path)
    builder = JobBuilder(tmp_path / "jobs", n_attempts=1, finished=case != "running")
    builder.add(TASKS[0], 1.0)
    builder.add(TASKS[1], None, "DaytonaError")
    job = builder.write()
    before = tree(job.parent)
    extra = ["--read-only"] if case == "read_only" else []
    code, _, err = run(capsys, "resume", "--apply", *extra, str(job))
    if case == "running":
        assert code == 1 and "resume refused, nothing moved" in err and "still running" in err
    else:
        assert code == 2 and "read-only" in err
    assert tree(job.parent) == before


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui.cli", "--batch", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_on_an_ssh_host_it_submits_the_sites_sbatch_and_a_drop_exits_2(
        ssh_server: InProcessSSHServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = use_standins(monkeypatch, tmp_path, tasks={"terminal_bench_2": TASKS})
    job = sandbox_job(tmp_path / "cluster" / "jobs")
    site = tmp_path / "cluster" / "eval"
    site.mkdir()
    (site / "eval_harbor.sbatch").write_text(SITE_SCRIPT)
    config = tmp_path / "config.toml"
    config.write_text(
        "[[hosts]]\n"
        'name = "cluster"\n'
        'host = "127.0.0.1"\n'
        f"port = {ssh_server.port}\n"
        f'identity_file = "{ssh_server.client_key_path}"\n'
        f'known_hosts = "{ssh_server.known_hosts_path}"\n'
        "[hosts.commands]\n"
        f'resume = "{SITE_RESUME}"\n'
        f'cwd = "{site}"\n')
    url = f"ssh://127.0.0.1:{ssh_server.port}{job}"
    args = ("--config", str(config), "--ssh-config", str(ssh_server.ssh_config_path))
    code, out, err = await _cli("resume", *args, "--format", "json", url)
    assert code == 1, err
    (plan,) = json.loads(out)["plans"]
    assert plan["host"] == f"127.0.0.1:{ssh_server.port}" and plan["command"][0] == "sbatch"
    assert plan["cwd"] == str(site)
    code, out, err = await _cli("resume", *args, "--apply", "--format", "json", url)
    assert code == 0, err
    (plan,) = json.loads(out)["plans"]
    assert plan["slurm_job_id"] == "1000" and "Submitted batch job 1000" in err
    assert f"submitted SLURM job 1000 on 127.0.0.1:{ssh_server.port}" in err
    for _ in range(200):  # the background job ends before the test does
        if (tools.slurm / "1000.rc").exists():
            break
        await asyncio.sleep(0.1)
    # the next one loses its connection while sbatch runs: exit 2, and the record says what ran
    for t in json.loads((await _cli("trials", "--format", "json", str(job)))[1])["trials"][:2]:
        (job / t["path"] / "result.json").write_text(json.dumps({
            **json.loads((job / t["path"] / "result.json").read_text()), "verifier_result": None,
            "exception_info": {"exception_type": "DaytonaError", "exception_message": "again"}}))
    ssh_server.drop_on = "eval_harbor.sbatch --resume"
    code, out, err = await _cli("resume", *args, "--apply", "--format", "json", url)
    ssh_server.drop_on = None
    assert code == 2, err
    (plan,) = json.loads(out)["plans"]
    assert plan["exit_code"] is None and "dropped" in plan["error"] and plan["command"][0] == "sbatch"
    assert "the resume command failed" in err and plan["record"] in err
    for _ in range(200):
        if (tools.slurm / "1001.rc").exists():
            break
        await asyncio.sleep(0.1)
