"""Every way a host can fail gives one clear line naming host and cause, and the last good data stays."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import asyncssh
import pytest

from services.core.models import Snapshot
from services.core.source import SourceUnavailable
from services.harbor.source import HarborSource
from services.harbor.ssh_source import SSHHarborSource
from services.transport.ssh import SSHPool
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server


@pytest.fixture(scope="module")
def one_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small job dir: the remote scan's content is covered elsewhere, faults are the point here."""
    from tests.services.harbor.test_ssh_source import write_demo

    full = tmp_path_factory.mktemp("demo") / "all"
    write_demo(full)
    root = tmp_path_factory.mktemp("one") / "jobs"
    job = next(p for p in sorted(full.iterdir()) if p.name.startswith("terminal_bench_2_1774"))
    shutil.copytree(job, root / job.name)
    shutil.rmtree(full)
    return root


@pytest.fixture
async def pool() -> SSHPool:
    p = SSHPool(backoff_base_s=0.0, connect_timeout_s=3)
    yield p  # type: ignore[misc]
    await p.close()


async def test_connection_refused(ssh_server: InProcessSSHServer, one_job: Path, pool: SSHPool) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = SSHHarborSource(ssh_server.spec(port=port), [str(one_job)], pool=pool)
    with pytest.raises(SourceUnavailable) as err:
        await src.scan()
    assert str(err.value) == f"127.0.0.1:{port}: connection refused"


async def test_authentication_refused(
    ssh_server: InProcessSSHServer, one_job: Path, pool: SSHPool, tmp_path: Path
) -> None:
    stranger = tmp_path / "id_stranger"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(stranger))
    src = SSHHarborSource(ssh_server.spec(identity_file=str(stranger)), [str(one_job)], pool=pool)
    with pytest.raises(SourceUnavailable, match=r"^127\.0\.0\.1:\d+: authentication failed"):
        await src.scan()


async def test_changed_and_unknown_host_key(ssh_server: InProcessSSHServer, one_job: Path, pool: SSHPool) -> None:
    src = SSHHarborSource(ssh_server.spec(), [str(one_job)], pool=pool)
    await src.scan()
    await pool.close()
    await ssh_server.restart_with_new_host_key()
    fresh = SSHHarborSource(ssh_server.spec(), [str(one_job)], pool=SSHPool(backoff_base_s=0.0))
    with pytest.raises(SourceUnavailable, match=r"host key CHANGED for \[127\.0\.0\.1\]"):
        await fresh.scan()

    ssh_server.known_hosts_path.write_text("")
    unknown = SSHHarborSource(ssh_server.spec(), [str(one_job)], pool=SSHPool(backoff_base_s=0.0))
    with pytest.raises(SourceUnavailable, match="unknown host key"):
        await unknown.scan()

    # only the per-host switch turns checking off, and the source says so
    insecure = SSHHarborSource(
        ssh_server.spec(insecure_no_host_key_check=True), [str(one_job)], pool=SSHPool(backoff_base_s=0.0)
    )
    assert insecure.insecure_no_host_key_check and not unknown.insecure_no_host_key_check
    assert len((await insecure.scan()).experiments) == 1
    await insecure.pool.close()


async def test_known_hosts_none_in_ssh_config_is_refused(
    ssh_server: InProcessSSHServer, one_job: Path, pool: SSHPool
) -> None:
    ssh_server.ssh_config_path.write_text("Host *\n  UserKnownHostsFile none\n  StrictHostKeyChecking no\n")
    src = SSHHarborSource(ssh_server.spec(known_hosts=None), [str(one_job)], pool=pool)
    with pytest.raises(SourceUnavailable, match="UserKnownHostsFile none"):
        await src.scan()


async def test_dropped_mid_scan_keeps_last_good_snapshot_then_recovers(
    ssh_server: InProcessSSHServer, one_job: Path, pool: SSHPool
) -> None:
    src = SSHHarborSource(ssh_server.spec(), [str(one_job)], pool=pool)
    good = await src.scan()
    assert good.errors == [] and good.experiments[0].stale_since is None

    ssh_server.mode = "drop"
    src.client.jobs.clear()  # force a cold scan so the reply is long enough to cut in half
    stale = await src.scan()
    assert stale.stats.get("stale") is True
    assert [e.id for e in stale.experiments] == [e.id for e in good.experiments]
    assert all(e.stale_since is not None for e in stale.experiments)
    assert stale.experiments[0].counts == good.experiments[0].counts
    assert len(stale.experiments[0].trials) == len(good.experiments[0].trials)
    (err,) = stale.errors
    assert err.where.startswith("127.0.0.1:") and ("dropped" in err.message or "lost" in err.message)

    ssh_server.mode = "ok"
    again = await src.scan()  # reconnects by itself
    assert again.errors == [] and again.experiments[0].stale_since is None
    assert again.experiments[0].counts == good.experiments[0].counts
    assert pool.connects == 2


async def test_python_missing_on_host_falls_back_to_sftp(
    ssh_server: InProcessSSHServer, one_job: Path, pool: SSHPool
) -> None:
    src = SSHHarborSource(ssh_server.spec(), [str(one_job)], pool=pool, python="python3-not-installed")
    snap = await src.scan()
    assert snap.stats["mode"] == "sftp"
    assert any("python3-not-installed missing on 127.0.0.1" in e.message and "SFTP" in e.message
               for e in snap.errors)
    local = HarborSource(one_job).scan_sync()
    assert _figures(snap) == _figures(local)
    # the next scan reads nothing that did not change, and never tries python again
    commands = len(ssh_server.commands)
    again = await src.scan()
    assert again.stats["files_read"] == 0 and len(ssh_server.commands) == commands
    assert _figures(again) == _figures(local)


async def test_an_sftp_read_that_never_answers_is_an_error_that_says_so(
    ssh_server: InProcessSSHServer, one_job: Path, tmp_path: Path, pool: SSHPool
) -> None:
    root = tmp_path / "jobs"
    shutil.copytree(one_job, root)
    src = SSHHarborSource(ssh_server.spec(), [str(root)], pool=pool, python="python3-not-installed", timeout_s=1)
    good = await src.scan()
    assert good.stats["mode"] == "sftp"
    ssh_server.sftp_stall = True
    trial = next(root.glob("*/*/result.json")).parent
    shutil.copytree(trial, trial.parent / "new-task__abcdefg")  # (a new trial: the next scan reads it)
    stale = await src.scan()
    assert any(e.message.endswith("sent no SFTP answer for 1 s") and e.where.startswith("127.0.0.1")
               for e in stale.errors)
    assert stale.experiments[0].stale_since is not None
    assert _figures(stale) == _figures(good)


def _figures(snap: Snapshot) -> list[tuple]:
    # SFTP v3 carries whole-second mtimes: compare everything a check or a screen reads but mtime
    return [
        (e.id, e.path, e.state, e.score, e.model, e.benchmark, e.counts, e.n_rep, e.problems,
         sorted((t.path, t.status, t.reward, t.exception_type, t.attempt, t.copy_of, t.parse_error)
                for t in e.trials))
        for e in snap.experiments
    ]


async def test_slow_host_times_out(ssh_server: InProcessSSHServer, one_job: Path, pool: SSHPool) -> None:
    ssh_server.mode = "slow"
    ssh_server.slow_s = 3.0
    src = SSHHarborSource(ssh_server.spec(), [str(one_job)], pool=pool, timeout_s=0.5)
    with pytest.raises(SourceUnavailable, match=r"^127\.0\.0\.1:\d+: no answer within 0.5s \(slow host\?\)$"):
        await src.scan()


async def test_backoff_between_failed_connects(ssh_server: InProcessSSHServer, one_job: Path) -> None:
    pool = SSHPool(backoff_base_s=30.0, connect_timeout_s=3)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = SSHHarborSource(ssh_server.spec(port=port), [str(one_job)], pool=pool)
    with pytest.raises(SourceUnavailable, match=r"connection refused$"):
        await src.scan()
    with pytest.raises(SourceUnavailable, match=r"connection refused \(next retry in \d+s\)"):
        await src.scan()
    assert pool.connects == 1
