"""Remote sources end to end: the batch CLI over ssh:// gives the local figures, and the console
shows remote experiments live, keeping the last good copy when the host goes away."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

from services.core.config import Config
from services.harbor.ssh_source import SSHHarborSource
from services.transport.ssh import SSHPool
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server
from tests.support.ui_demo import DEV_SET, copy_job, settle, use_utc
from tui.app import EvaldeskApp
from tui.chrome import ConsoleHeader


def _ssh_config(server: InProcessSSHServer, path: Path) -> Path:
    path.write_text(
        "Host evalhost\n"
        "  HostName 127.0.0.1\n"
        f"  Port {server.port}\n"
        "  User evaluser\n"
        f"  IdentityFile {server.client_key_path}\n"
        f"  UserKnownHostsFile {server.known_hosts_path}\n"
    )
    return path


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


def _figures(doc: dict) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "source"} for e in doc["experiments"]]


async def test_batch_audit_over_ssh_gives_the_local_figures(
    ssh_server: InProcessSSHServer, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    jobs = copy_job(tmp_path_factory, tmp_path)
    cfg = _ssh_config(ssh_server, tmp_path / "ssh_config")
    rc_local, out_local, _ = await _cli("--batch", "audit", "--format", "json", str(jobs))
    rc_remote, out_remote, err = await _cli(
        "--batch", "audit", "--format", "json", "--ssh-config", str(cfg), f"ssh://evalhost{jobs}")
    assert rc_remote == rc_local == 1, err
    local, remote = json.loads(out_local), json.loads(out_remote)
    assert [e["source"] for e in remote["experiments"]] == ["harbor+ssh"]
    assert _figures(remote) == _figures(local)


async def test_batch_over_ssh_to_a_dead_host_exits_2_with_one_line(tmp_path: Path) -> None:
    from tests.support.ssh_server import free_port

    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host deadhost\n  HostName 127.0.0.1\n  Port {free_port()}\n")
    rc, out, err = await _cli("--batch", "list", "--ssh-config", str(cfg), "ssh://deadhost/data/jobs")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "deadhost" in err and "Traceback" not in err


async def test_console_shows_remote_experiments_live_and_keeps_the_last_good_copy(
    ssh_server: InProcessSSHServer, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    use_utc()
    jobs = copy_job(tmp_path_factory, tmp_path)
    pool = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
    src = SSHHarborSource(ssh_server.spec(), [str(jobs)], label="cluster", pool=pool, slurm=False)
    app = EvaldeskApp([src], Config(), poll=False, cursor_blink=False)
    key = f"cluster::{DEV_SET}"
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await settle(pilot)
            exp = app.experiment(key)
            assert exp is not None and exp.source == "harbor+ssh" and exp.counts.total == 315
            # a trial dir disappears on the host: the next read shows it
            shutil.rmtree(jobs / DEV_SET / exp.trials[0].path)
            await pilot.press("r")
            await settle(pilot)
            assert app.experiment(key).counts.total + app.experiment(key).counts.running == 314  # type: ignore[union-attr]
            # the host goes away: the last good snapshot stays, marked stale, and the header says why
            await ssh_server.stop()
            await pool.close()
            await pilot.press("r")
            await settle(pilot)
            stale = app.experiment(key)
            assert stale is not None and stale.counts.total + stale.counts.running == 314
            header = str(app.screen.query_one(ConsoleHeader).render())
            assert "cluster down ×1" in header, header
            assert stale.stale_since is not None
            detail = str(app.screen.query_one("#detail").render())
            assert "STALE" in detail
    finally:
        await pool.close()


async def test_dedupe_and_undo_on_a_remote_job_through_sftp(
    ssh_server: InProcessSSHServer, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from services.core.config import Config
    from services.core.journal import Journal
    from services.remediations import registry
    from services.remediations.base import WritePath
    from services.remediations.dedupe import plan_dedupe
    from services.remediations.records import records_in

    jobs = copy_job(tmp_path_factory, tmp_path)
    before = sorted(p.name for p in (jobs / DEV_SET).iterdir())
    aggregate = (jobs / DEV_SET / "result.json").read_bytes()
    pool = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
    src = SSHHarborSource(ssh_server.spec(), [str(jobs)], label="cluster", pool=pool, slurm=False)
    journal = Journal(tmp_path / "journal.jsonl")
    write_path = WritePath(journal)
    try:
        exp = (await src.scan()).experiments[0]
        sel = plan_dedupe(exp)
        assert (sel.before, sel.after, len(sel.copies)) == (315, 300, 6)
        plan = await registry.plan("dedupe", exp, src, Config())
        assert plan.host == src.host and plan.record_dir and plan.record_dir.startswith(str(jobs / DEV_SET))
        record = await registry.apply("dedupe", plan, exp.id, src, Config(), write_path)
        assert record.status == "applied"
        again = (await src.scan()).experiments[0]
        assert again.counts.total == 300 and again.counts.copies == 0
        assert plan_dedupe(again).nothing_to_do  # a second run changes nothing
        [found] = await records_in(src.fs(), str(jobs / DEV_SET))
        undone = await write_path.undo(found, registry.context("dedupe", src, Config()))
        assert undone.status == "undone"
        assert (jobs / DEV_SET / "result.json").read_bytes() == aggregate
        after = sorted(p.name for p in (jobs / DEV_SET).iterdir())
        left = sorted(str(p.relative_to(jobs)) for p in (jobs / DEV_SET / ".evaldesk-quarantine").rglob("*")) \
            if (jobs / DEV_SET / ".evaldesk-quarantine").exists() else []
        assert after == before, left
        assert [e.action for e in journal.entries()] == ["dedupe:begin", "dedupe:apply", "dedupe:undo"]
    finally:
        await src.close()
        await pool.close()
