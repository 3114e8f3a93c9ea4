"""The three readers of a job dir — local disk, the remote program over SSH, and SFTP alone for
hosts without python3 — agree on every figure, on a job dir full of what goes wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.harbor.source import HarborSource
from services.harbor.ssh_source import SSHHarborSource
from services.transport.ssh import SSHPool
from tests.services.harbor.test_source import WEIRD
from tests.services.transport.test_ssh_faults import _figures
from tests.support.harbor_factory import JobBuilder
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server


def hostile_job(tmp_path: Path) -> Path:
    outside = JobBuilder(tmp_path / "elsewhere", "other-job")
    outside.add("secret", 1.0)
    outside.write()
    job = JobBuilder(tmp_path / "jobs", "terminal_bench_2_hostile_2026-01-01__00-00-00", n_attempts=2)
    for w in WEIRD:
        job.add(w, 1.0)
    job.add("fine", 0.0)
    job.add("crashed", None, "DaytonaError")
    job.add("live", running=True)
    first = job.trials[0]
    job.add(first.task, first.reward, started=first.started, name=first.name, subdir="restored")
    d = job.write()
    (d / "half__AAAAAAA").mkdir()
    (d / "half__AAAAAAA" / "result.json").write_text('{"task_name": "half", "verifier_res')
    (d / "empty__AAAAAAA").mkdir()
    (d / "empty__AAAAAAA" / "result.json").write_text("")
    (d / "dirresult__AAAAAAA" / "result.json").mkdir(parents=True)
    (d / "dirresult__AAAAAAA" / "config.json").write_text("{}")
    (d / "fifo__AAAAAAA").mkdir()  # reading a fifo would block the scan forever
    (d / "fifo__AAAAAAA" / "config.json").write_text("{}")
    os.mkfifo(d / "fifo__AAAAAAA" / "result.json")
    (d / "dangling__AAAAAAA").mkdir()
    (d / "dangling__AAAAAAA" / "config.json").write_text("{}")
    os.symlink(tmp_path / "gone.json", d / "dangling__AAAAAAA" / "result.json")
    os.symlink(tmp_path / "elsewhere" / "other-job" / (outside.trials[0].name or ""), d / "secret__OUTSIDE")
    os.symlink(d / (job.trials[1].name or ""), d / "alias__INSIDE1")
    (d / ".evaldesk-quarantine" / "x" / "trials" / "moved__QQQQQQQ").mkdir(parents=True)
    # a fifo among the job files too: classifying the folder must not open it
    os.mkfifo(tmp_path / "jobs" / "config.json")
    return tmp_path / "jobs"


@pytest.mark.parametrize("python", ["python3", "no-python-on-this-host"], ids=["remote-program", "sftp-only"])
async def test_every_reader_gives_the_same_figures(
    ssh_server: InProcessSSHServer, tmp_path: Path, python: str
) -> None:
    jobs = hostile_job(tmp_path)
    local = HarborSource(jobs).scan_sync()
    pool = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
    src = SSHHarborSource(ssh_server.spec(), [str(jobs)], pool=pool, python=python, slurm=False)
    try:
        remote = await src.scan()
    finally:
        await src.close()
        await pool.close()
    assert _figures(remote) == _figures(local)
    exp = local.experiments[0]
    assert exp.counts.copies == 1 and exp.counts.running == 1
    assert any("outside the job dir" in p for p in exp.problems)
    fifo = next(t for t in exp.trials if t.path == "fifo__AAAAAAA")
    assert fifo.parse_error == "result.json unreadable: not a regular file"


PARITY_SCRIPT = r"""
import asyncio, sys
from pathlib import Path
from services.harbor.source import HarborSource
from services.harbor.ssh_source import SSHHarborSource
from services.transport.ssh import SSHPool
from tests.services.transport.test_ssh_faults import _figures
from tests.support.ssh_server import InProcessSSHServer

async def main(jobs, srv):
    local = HarborSource(jobs, cache=False).scan_sync()
    print(repr(_figures(local)))
    print(repr(sorted((e.where, e.message, e.unreadable) for e in local.errors)))
    server = InProcessSSHServer(Path(srv))
    await server.start()
    try:
        for python in ("python3", "no-python-on-this-host"):
            pool = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
            src = SSHHarborSource(server.spec(), [jobs], pool=pool, python=python, slurm=False)
            try:
                snap = await src.scan()
            finally:
                await src.close()
                await pool.close()
            print(repr(_figures(snap)))
            print(repr(sorted((e.where.rsplit(":", 1)[-1], e.message, e.unreadable) for e in snap.errors
                              if "missing on" not in e.message)))
    finally:
        await server.stop()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def unreadable_and_foreign_names(tmp_path: Path) -> tuple[Path, Path]:
    """A jobs folder with a mode-000 trial dir, a mode-000 staged copy, a trial dir and a task whose
    names are not UTF-8, beside a job dir nobody may read."""
    jobs = hostile_job(tmp_path)
    job = next(p for p in jobs.iterdir() if p.is_dir() and p.name.startswith("terminal_bench_2_hostile"))
    (job / "locked__LOCKED1").mkdir()
    (job / "locked__LOCKED1" / "result.json").write_text('{"verifier_result": {"rewards": {"reward": 1}}}')
    os.chmod(job / "locked__LOCKED1", 0)
    (job / "staged" / "copy__LOCKED2").mkdir(parents=True)
    os.chmod(job / "staged" / "copy__LOCKED2", 0)
    foreign = os.fsencode(str(job)) + b"/caf\xe9-task__F\xffF1234"
    os.mkdir(foreign)
    with open(foreign + b"/result.json", "wb") as fh:
        fh.write(b'{"verifier_result": {"rewards": {"reward": 0.0}}, "started_at": "2026-01-01T00:00:00Z"}')
    other = JobBuilder(jobs, "dev_set_v2_private_2026-01-01__00-00-00")
    other.add("x", 1.0)
    os.chmod(other.write(), 0)
    srv = tmp_path / "srv"
    srv.mkdir()
    return jobs, srv


def test_unreadable_dirs_and_foreign_names_give_the_same_figures_everywhere(tmp_path: Path) -> None:
    from tests.support.no_dac import command

    jobs, srv = unreadable_and_foreign_names(tmp_path)
    env = os.environ | {"PYTHONPATH": os.getcwd()}
    try:
        out = subprocess.run(command(sys.executable, "-c", PARITY_SCRIPT, str(jobs), str(srv)), capture_output=True,
                             text=True, env=env, timeout=120, check=False)
    finally:
        for p in jobs.rglob("*"):
            if p.is_dir() and not p.is_symlink():
                os.chmod(p, 0o755)
    assert out.returncode == 0, out.stderr
    local, local_err, remote, remote_err, sftp, sftp_err = out.stdout.splitlines()
    assert remote == local and sftp == local
    assert remote_err == local_err == sftp_err
    assert "'locked__LOCKED1', <TrialStatus.errored: 'errored'>" in local
    assert "'trial dir unreadable: Permission denied'" in local
    assert "staged/copy__LOCKED2" in local
    assert "'locked__LOCKED1: trial dir unreadable: Permission denied; counted as errored'" in local
    assert "caf\\udce9-task__F\\udcffF1234" in local  # the name's bytes, kept
    assert "dev_set_v2_private_2026-01-01__00-00-00', 'cannot read: Permission denied', True" in local_err
