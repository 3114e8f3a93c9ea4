"""Scheduler state from a real single-node SLURM (sacct via slurmdbd), locally and over SSH."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.core.models import Experiment, State
from services.harbor.ssh_source import SSHHarborSource
from services.transport.slurm import (
    SlurmToolsMissing,
    SlurmTracker,
    job_id_for,
    map_state,
    parse_query_output,
    query_command,
    run_local,
    valid_job_id,
)
from services.transport.ssh import SSHPool
from tests.support.services import service_missing
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "slurm_up.sh"


# --- parsing and mapping ---------------------------------------------------------------------


def test_a_lagging_accounting_record_gives_way_to_the_controllers_live_word() -> None:
    # (slurmdbd hears of a start or an end asynchronously: sacct may still say PENDING or RUNNING)
    text = ("@@sacct\n5|PENDING|0:0|00:00:00\n6|RUNNING|0:0|00:00:09\n7|RUNNING|0:0|00:00:02\n"
            "@@squeue\n5|RUNNING|0:04\n"
            "@@scontrol\nJobId=6 JobName=x JobState=COMPLETED Reason=None ExitCode=0:0 RunTime=00:00:10\n"
            "@@found=1\n")
    got = parse_query_output(text)
    assert {k: (v.state, v.via) for k, v in got.items()} == {
        "5": ("RUNNING", "squeue"), "6": ("COMPLETED", "scontrol"), "7": ("RUNNING", "sacct")}
    assert got["6"].terminal and got["6"].exit_code == "0:0"


def test_parse_prefers_sacct_then_squeue_then_scontrol() -> None:
    text = (
        "@@sacct\n1|COMPLETED|0:0|00:00:01\n2|CANCELLED by 0|0:15|00:00:03\n"
        "@@squeue\n2|RUNNING|0:03\n3|PENDING|0:00\n"
        "@@scontrol\nJobId=3 JobName=x JobState=RUNNING Reason=None ExitCode=0:0 RunTime=00:00:01\n"
        "JobId=4 JobName=y JobState=PENDING Reason=Priority ExitCode=0:0 RunTime=00:00:00\n"
        "@@found=1\n"
    )
    got = parse_query_output(text)
    assert {k: (v.state, v.via) for k, v in got.items()} == {
        "1": ("COMPLETED", "sacct"),
        "2": ("CANCELLED", "sacct"),
        "3": ("PENDING", "squeue"),
        "4": ("PENDING", "scontrol"),
    }
    assert got["2"].raw == "CANCELLED by 0" and got["2"].terminal and not got["3"].terminal
    with pytest.raises(SlurmToolsMissing):
        parse_query_output("@@found=0\n")


def test_state_mapping() -> None:
    assert map_state("RUNNING") == State.running
    assert map_state("PENDING") == State.pending
    assert map_state("COMPLETED") == State.finished
    assert map_state("FAILED") == State.failed
    assert map_state("TIMEOUT") == State.failed
    assert map_state("CANCELLED by 1000") == State.cancelled
    assert map_state("") is None and map_state("WEIRD") is None


def test_ids_are_validated_and_quoted() -> None:
    assert valid_job_id("123") and valid_job_id("123_4") and valid_job_id("77+1")
    assert not valid_job_id("1;rm -rf /") and not valid_job_id("$(id)")
    cmd = query_command(["12", "13_2"])
    assert "sacct -j 12,13_2 -X -o JobID,State,ExitCode,Elapsed -P -n" in cmd


def test_job_id_order() -> None:
    exp = Experiment(id="job-a", source="harbor", path="/x/job-a", scheduler_job_id="55")
    assert job_id_for(exp, b'{"sjid": 99}', key="sjid") == "99"
    assert job_id_for(exp, b'{"other": 1}', key="sjid") == "55"
    bare = Experiment(id="job-b", source="harbor", path="/x/job-b")
    assert job_id_for(bare, None, mapping={"job-b": "7"}) == "7"
    assert job_id_for(bare, None) is None


# --- a real SLURM ------------------------------------------------------------------------------


def _slurm_works(env: dict[str, str]) -> bool:
    try:
        return subprocess.run(["sinfo", "-h"], env=env, capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def slurm_conf() -> Iterator[str]:
    existing = os.environ.get("SLURM_CONF")
    if existing and _slurm_works(dict(os.environ)):
        yield existing
        return
    if os.geteuid() != 0:
        service_missing("starting SLURM needs root (munge, mariadb, slurmd)")
    try:
        proc = subprocess.run(["sh", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        service_missing("SLURM did not start within 30 s")
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        service_missing(f"SLURM cannot start here: {reason}")
    conf = proc.stdout.strip().splitlines()[-1]
    os.environ["SLURM_CONF"] = conf  # the in-process SSH server's commands inherit it
    try:
        yield conf
    finally:
        subprocess.run(["sh", str(SCRIPT), "--stop", os.path.dirname(conf)], timeout=15)
        if existing is None:
            os.environ.pop("SLURM_CONF", None)


def _sbatch(*args: str) -> str:
    out = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, timeout=10, cwd="/tmp")
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


@pytest.fixture(scope="session")
def slurm_jobs(slurm_conf: str) -> Iterator[dict[str, str]]:
    jobs = {
        "COMPLETED": _sbatch("--wrap", "true"),
        "FAILED": _sbatch("--wrap", "exit 7"),
        "CANCELLED": _sbatch("--wrap", "sleep 300"),
        "RUNNING": _sbatch("--wrap", "sleep 300"),
        "PENDING": _sbatch("--hold", "--wrap", "true"),
    }
    subprocess.run(["scancel", jobs["CANCELLED"]], check=True, timeout=10)
    # (a job that finds the shared node's slots taken waits for the next scheduling pass, up to a minute)
    deadline = time.monotonic() + 90
    tracker = SlurmTracker()
    while True:
        got = asyncio.run(tracker.states(run_local, jobs.values()))
        seen = {want: got[jid].state if jid in got else None for want, jid in jobs.items()}
        # (and the finished job's record has reached slurmdbd, so sacct is what says it)
        recorded = jobs["COMPLETED"] in got and got[jobs["COMPLETED"]].via == "sacct"
        if (all(seen[w] == w for w in jobs) and recorded) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    yield jobs
    subprocess.run(["scancel", *jobs.values()], timeout=10)


async def test_sacct_states_from_a_real_slurm(slurm_jobs: dict[str, str]) -> None:
    tracker = SlurmTracker()
    got = await tracker.states(run_local, slurm_jobs.values())
    assert {want: got[jid].state for want, jid in slurm_jobs.items()} == {w: w for w in slurm_jobs}
    assert got[slurm_jobs["FAILED"]].exit_code == "7:0"
    assert got[slurm_jobs["COMPLETED"]].via == "sacct"
    # terminal states are remembered: only the running and pending jobs are asked about again
    await tracker.states(run_local, slurm_jobs.values())
    assert set(tracker.final) == {slurm_jobs[w] for w in ("COMPLETED", "FAILED", "CANCELLED")}


async def test_a_job_that_ends_while_followed_is_said_finished_with_the_next_files(slurm_conf: str) -> None:
    # the files are read before SLURM is asked: the ask in which a followed job ends must not pair
    # "COMPLETED" with files read while it still ran
    jid = _sbatch("--wrap", "sleep 2")
    tracker = SlurmTracker()
    deadline = time.monotonic() + 60  # (slurmdbd may lag behind the job by seconds)
    while (seen := (await tracker.states(run_local, [jid])).get(jid)) is None:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    assert not seen.terminal, seen  # just submitted: pending or running
    while (ended := (await SlurmTracker().states(run_local, [jid])).get(jid)) is None or not ended.terminal:
        assert time.monotonic() < deadline, ended
        await asyncio.sleep(0.2)
    assert ended.state == "COMPLETED"
    held = await tracker.states(run_local, [jid])
    assert held[jid] == seen  # the last word this tracker had while it ran: once
    assert (await tracker.states(run_local, [jid]))[jid].state == "COMPLETED"
    # a job first seen finished ended before anything was read: said at once
    assert (await SlurmTracker().states(run_local, [jid]))[jid].state == "COMPLETED"


def _job_dir(root: Path, name: str, config: dict, env: str | None = None) -> None:
    job = root / name
    trial = job / "task-a__abcdefg"
    trial.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": name, "n_attempts": 1, **config}))
    (trial / "config.json").write_text(json.dumps({"trial_name": "task-a__abcdefg", "task": {"name": "task-a"}}))
    if env is not None:
        (job / "meta.env").write_text(env)


async def test_scheduler_state_over_ssh(
    slurm_jobs: dict[str, str], ssh_server: InProcessSSHServer, tmp_path: Path
) -> None:
    root = tmp_path / "jobs"
    _job_dir(root, "a-running", {"slurm_job_id": slurm_jobs["RUNNING"]})
    _job_dir(root, "b-failed", {}, env=f"export SLURM_JOB_ID={slurm_jobs['FAILED']}\n")
    _job_dir(root, "c-custom-key", {"sched": {"x": 1}, "my_job": slurm_jobs["COMPLETED"]})
    _job_dir(root, "d-mapped", {})
    _job_dir(root, "e-pending", {"slurm_job_id": int(slurm_jobs["PENDING"])})
    _job_dir(root, "f-cancelled", {"slurm_job_id": slurm_jobs["CANCELLED"]})
    pool = SSHPool(backoff_base_s=0.0)
    src = SSHHarborSource(ssh_server.spec(), [str(root)], pool=pool,
                          slurm_job_ids={"d-mapped": slurm_jobs["COMPLETED"]})
    try:
        snap = await src.scan()
        by_id = {e.id: e for e in snap.experiments}
        got = {k: (e.scheduler_state, e.state.value) for k, e in by_id.items()}
        assert got == {
            "a-running": ("RUNNING", "running"),
            "b-failed": ("FAILED", "failed"),
            "c-custom-key": (None, "running"),
            "d-mapped": ("COMPLETED", "finished"),
            "e-pending": ("PENDING", "pending"),
            "f-cancelled": ("CANCELLED", "cancelled"),
        }
        assert by_id["a-running"].state_raw == "running"  # the source's own word is kept
        assert snap.stats["round_trips"] == 2

        custom = SSHHarborSource(ssh_server.spec(), [str(root / "c-custom-key")], pool=pool,
                                 slurm_job_id_key="my_job")
        (exp,) = (await custom.scan()).experiments
        assert (exp.scheduler_job_id, exp.scheduler_state) == (slurm_jobs["COMPLETED"], "COMPLETED")
        # a finished SLURM job is not asked about again: one round trip per refresh
        assert (await custom.scan()).stats["round_trips"] == 1
    finally:
        await pool.close()
