"""The three readers of a job dir — local disk, the remote program over SSH, and SFTP alone for
hosts without python3 — agree on every figure, on a job dir full of what goes wrong."""

from __future__ import annotations

import os
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
