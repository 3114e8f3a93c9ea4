"""Resume on an SSH host: the site's own `sbatch` command from the host's config, run over the
pooled connection (the test server runs it through a real shell, with the stand-in `sbatch`,
`sacct` and `harbor` on its PATH); the SLURM job it prints is followed; a queued job keeps undo
off; a connection that drops mid-run leaves a record of what ran."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import CommandConfig, Config, HostConfig
from services.core.followed import followed_job
from services.core.journal import Journal
from services.core.models import Experiment
from services.harbor.ssh_source import SSHHarborSource
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.errors import WriteRefused
from services.transport.ssh import SSHPool
from tests.support.harbor_factory import T0, JobBuilder, tasks
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server
from tests.support.standin_tools import Standins, use_standins

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
TASKS = tasks(5)
SITE_SCRIPT = """#!/bin/sh
# the site's batch script: its resume branch hands Harbor the types evaldesk set aside
set -e
set --
for t in $(echo "$TYPES" | tr ',' ' '); do set -- "$@" -f "$t"; done
exec harbor jobs resume -p "$JOB_DIR" "$@"
"""
SITE_RESUME = "sbatch --export=ALL,JOB_DIR={job_dir},TYPES={types} eval_harbor.sbatch --resume"


def sandbox_job(root: Path) -> Path:
    """5 tasks × 2 attempts; three ended on a sandbox outage: a resume makes it whole."""
    job = JobBuilder(root, n_attempts=2)
    for a in range(2):
        for i, task in enumerate(TASKS):
            if a == 1 and i < 3:
                job.add(task, None, "DaytonaError", started=T0)
            else:
                job.add(task, float(i % 2), started=T0)
    return job.write()


class Host:
    def __init__(self, server: InProcessSSHServer, tmp: Path, tools: Standins) -> None:
        self.server = server
        self.tools = tools
        self.job = sandbox_job(tmp / "cluster" / "eval_jobs")
        self.site = tmp / "cluster" / "eval"
        self.site.mkdir()
        (self.site / "eval_harbor.sbatch").write_text(SITE_SCRIPT)
        self.pool = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
        spec = server.spec()
        self.config = Config(hosts=[HostConfig(name="cluster", host=spec.host, paths=[str(self.job.parent)],
                                               commands=CommandConfig(resume=SITE_RESUME, cwd=str(self.site)))])
        self.source = SSHHarborSource(spec, [str(self.job.parent)], label="cluster", pool=self.pool)
        self.write_path = WritePath(Journal(str(tmp / "journal.jsonl")))

    async def exp(self) -> Experiment:
        snap = await self.source.scan()
        assert len(snap.experiments) == 1, snap.errors
        return snap.experiments[0]


@pytest.fixture
async def host(ssh_server: InProcessSSHServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Host]:
    tools = use_standins(monkeypatch, tmp_path, tasks={"terminal_bench_2": TASKS})
    h = Host(ssh_server, tmp_path, tools)
    try:
        yield h
    finally:
        (tools.slurm / "hold").unlink(missing_ok=True)
        await h.source.close()
        await h.pool.close()


async def until(check: object, timeout: float = 20.0) -> None:
    end = asyncio.get_running_loop().time() + timeout
    while not await check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < end, "timed out"
        await asyncio.sleep(0.1)


async def test_the_sites_sbatch_runs_on_the_host_and_its_slurm_job_is_followed_to_green(host: Host) -> None:
    exp = await host.exp()
    assert audit_experiment(exp).verdict == "resume"
    plan = await registry.plan("resume", exp, host.source, host.config, NOW)
    assert plan.blocked is None and plan.host == host.source.host
    job = str(host.job)
    assert plan.meta["argv"] == ["sbatch", f"--export=ALL,JOB_DIR={job},TYPES=DaytonaError", "eval_harbor.sbatch",
                                 "--resume"]
    assert f"Command, on {host.source.host}:" in plan.preview
    assert (f"  cd {host.site} && sbatch --export=ALL,JOB_DIR={job},TYPES=DaytonaError eval_harbor.sbatch --resume"
            f"   (on {host.source.host})") in plan.preview
    (host.tools.slurm).mkdir(parents=True, exist_ok=True)
    (host.tools.slurm / "hold").write_text("")
    seen: list[str] = []
    record = await registry.apply("resume", plan, exp.id, host.source, host.config, host.write_path,
                                  resources={"on_output": lambda s, t: seen.append(t)})
    result = record.results[len(plan.steps) - 1]
    assert result["exit_code"] == 0 and result["slurm_job_id"] == "1000" and result["host"] == host.source.host
    assert "Submitted batch job 1000" in "".join(seen)
    assert followed_job(host.source.host, job) == "1000"
    # queued: the monitor shows it pending, and undo waits for it (or a scancel)
    queued = await host.exp()
    assert (queued.scheduler_job_id, queued.scheduler_state, queued.state.value) == ("1000", "PENDING", "pending")
    assert audit_experiment(queued).verdict == "wait"
    ctx = registry.context("resume", host.source, host.config)
    with pytest.raises(WriteRefused, match="SLURM job 1000 is still PENDING: cancel it"):
        await host.write_path.undo(record, ctx)
    (host.tools.slurm / "hold").unlink()

    async def completed() -> bool:
        e = await host.exp()
        return e.scheduler_state == "COMPLETED"

    await until(completed)
    done = await host.exp()
    report = audit_experiment(done)
    assert report.verdict == "finalize", [(c.id, c.status.value, c.evidence) for c in report.checks]
    assert done.counts.valid == 10
    assert host.tools.calls() == [["harbor", "jobs", "resume", "-p", job, "-f", "DaytonaError"]]
    with pytest.raises(WriteRefused, match="new trial dir"):
        await host.write_path.undo(record, ctx)


async def test_a_connection_that_drops_mid_run_leaves_a_record_of_what_ran(host: Host) -> None:
    exp = await host.exp()
    plan = await registry.plan("resume", exp, host.source, host.config, NOW)
    host.server.drop_on = "eval_harbor.sbatch --resume"  # the command itself, not the check before it
    host.tools.slurm.mkdir(parents=True, exist_ok=True)
    (host.tools.slurm / "hold").write_text("")
    record = await registry.apply("resume", plan, exp.id, host.source, host.config, host.write_path)
    host.server.drop_on = None
    step = record.plan.steps[-1]
    assert step.kind == "external" and step.args["argv"][0] == "sbatch"
    result = record.results[len(plan.steps) - 1]
    assert result["exit_code"] is None and "dropped" in result["error"]
    found = [r for r in await registry.records_for(host.source.fs(), str(host.job)) if r.id == record.id]
    assert found and found[0].results[len(plan.steps) - 1]["error"] == result["error"]
    # the host is asked: what the command started still carries its tag, and undo waits for it
    ctx = registry.context("resume", host.source, host.config)
    with pytest.raises(WriteRefused, match=r"`sbatch` on .* is still running: .* --force` if you know it is gone"):
        await host.write_path.undo(found[0], ctx)
    (host.tools.slurm / "hold").unlink()
    aside = Path(plan.meta["aside"]) / "trials"
    assert plan.meta["rerun"] and all((aside / rel).exists() for rel in plan.meta["rerun"])
    # it had: once its re-runs are there, even --force keeps the set-aside trials where they are
    rc = host.tools.slurm / "1000.rc"

    async def finished() -> bool:
        return rc.exists()

    await until(finished)
    with pytest.raises(WriteRefused, match="new trial dir"):
        await host.write_path.undo(found[0], ctx)
    ctx.resources["force"] = True
    with pytest.raises(WriteRefused, match="new trial dir"):
        await host.write_path.undo(found[0], ctx)
