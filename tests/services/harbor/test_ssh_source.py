"""The harbor+ssh source against real SSH servers: in-process asyncssh and OpenSSH's sshd."""

from __future__ import annotations

import glob
import json
import os
import shutil
from pathlib import Path

import asyncssh
import pytest

from services.core.config import Config, HostConfig, SourceConfig
from services.core.models import Experiment, Snapshot
from services.core.plain import dump
from services.core.registry import open_all, open_source
from services.core.source import SourceUnavailable
from services.harbor.demo import write_demo
from services.harbor.source import HarborSource
from services.harbor.ssh_source import SSHHarborSource
from services.transport.ssh import HostSpec, SSHPool, parse_ssh_url
from tests.support.services import service_missing
from tests.support.ssh_server import InProcessSSHServer, OpenSSHServer, start_openssh, write_known_hosts
from tests.support.ssh_server import client_key as client_key
from tests.support.ssh_server import ssh_server as ssh_server

_SKIP_FIELDS = {"source", "source_label", "verified_at"}  # verified_at: when, not what


def _dump(exp: Experiment) -> tuple[dict, list[dict]]:
    data = {k: v for k, v in dump(exp).items() if k not in _SKIP_FIELDS}
    # a local rescan appends re-read trials after reused ones; the figures do not depend on order
    return data, sorted((t.to_json() for t in exp.trials), key=lambda t: t["path"])


def assert_same(local: Snapshot, remote: Snapshot) -> None:
    assert [e.path for e in local.experiments] == [e.path for e in remote.experiments]
    for a, b in zip(local.experiments, remote.experiments, strict=True):
        assert _dump(a) == _dump(b), a.id


@pytest.fixture(scope="session")
def demo_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo") / "jobs"
    write_demo(root)
    return root


@pytest.fixture
def demo(demo_master: Path) -> Path:
    """The shared demo folder; tests that change files copy a job dir of their own."""
    return demo_master


def copy_job(demo_master: Path, dest: Path, prefix: str) -> Path:
    job = next(p for p in sorted(demo_master.iterdir()) if p.name.startswith(prefix))
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(job, dest / job.name, symlinks=True)
    return dest


@pytest.fixture
async def pool() -> SSHPool:
    p = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
    yield p  # type: ignore[misc]
    await p.close()


async def test_remote_scan_equals_local_scan_of_demo(
    ssh_server: InProcessSSHServer, demo: Path, pool: SSHPool
) -> None:
    local = await HarborSource(demo).scan()
    src = SSHHarborSource(ssh_server.spec(), [str(demo)], pool=pool)
    remote = await src.scan()
    assert remote.errors == []
    assert len(remote.experiments) == 6
    assert all(e.source == "harbor+ssh" for e in remote.experiments)
    assert_same(local, remote)
    assert remote.stats["round_trips"] == 1
    assert len(ssh_server.commands) == 1


async def test_warm_refresh_sends_almost_nothing_and_follows_changes(
    ssh_server: InProcessSSHServer, demo_master: Path, tmp_path: Path, pool: SSHPool
) -> None:
    demo = copy_job(demo_master, tmp_path / "jobs", "swebench")
    src = SSHHarborSource(ssh_server.spec(), [str(demo)], pool=pool)
    local_src = HarborSource(demo)
    cold = await src.scan()
    warm = await src.scan()
    assert warm.stats["trials_sent"] == 0
    assert warm.stats["bytes_down"] < 2000 < cold.stats["bytes_down"]
    assert_same(await local_src.scan(), warm)

    # a running trial finishes, one trial dir disappears, a new trial appears
    job = Path(next(e.path for e in cold.experiments if e.counts.running))
    running = next(t for t in next(e for e in cold.experiments if e.path == str(job)).trials
                   if t.status.value == "running")
    done = next(p for p in job.glob("*/result.json"))
    shutil.copy(done, job / running.path / "result.json")
    gone = sorted(p for p in job.iterdir() if p.is_dir() and (p / "result.json").exists())[0]
    shutil.rmtree(gone)
    new_dir = job / "zz-new-task__abcdefg"
    new_dir.mkdir()
    (new_dir / "config.json").write_text(json.dumps({"trial_name": "zz-new-task__abcdefg"}))

    changed = await src.scan()
    assert 0 < changed.stats["trials_sent"] < 30
    assert_same(await local_src.scan(), changed)
    assert changed.stats["round_trips"] == 1
    assert ssh_server.commands and len(ssh_server.commands) == 3


# (found at import, before the tests' HOME moves; pyenv's shim would not choose a version)
_PYTHONS_36 = sorted(glob.glob(os.path.join(os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv"),
                                            "versions", "3.6.*", "bin", "python3.6")))


def _oldest_python() -> str:
    """The oldest python3 a cluster login node still has, as this machine's pyenv installs it."""
    found = _PYTHONS_36 + [p for p in ["/usr/bin/python3.6"] if os.access(p, os.X_OK)]
    if not found:
        service_missing("Python 3.6 is not installed (pyenv install 3.6): the remote program's oldest python3")
    return found[0]


async def test_the_remote_program_runs_as_it_is_on_python_3_6(
    ssh_server: InProcessSSHServer, demo_master: Path, tmp_path: Path, pool: SSHPool
) -> None:
    demo = copy_job(demo_master, tmp_path / "jobs", "swebench")
    src = SSHHarborSource(ssh_server.spec(), [str(demo)], pool=pool, python=_oldest_python(), slurm=False)
    cold = await src.scan()
    assert cold.errors == [], cold.errors
    assert cold.stats["remote_python"].startswith("3.6."), cold.stats
    assert_same(await HarborSource(demo, cache=False).scan(), cold)
    warm = await src.scan()  # the per-bucket digests, checked by the host's 3.6 too
    assert warm.stats["trials_sent"] == 0 and warm.stats["bytes_down"] < 2000
    assert_same(await HarborSource(demo, cache=False).scan(), warm)


async def test_one_connection_per_host_shared_by_sources(
    ssh_server: InProcessSSHServer, demo: Path, pool: SSHPool
) -> None:
    jobs = sorted(p for p in demo.iterdir() if p.is_dir())
    a = SSHHarborSource(ssh_server.spec(), [str(jobs[0])], pool=pool)
    b = SSHHarborSource(ssh_server.spec(), [str(jobs[1])], pool=pool)
    await a.scan()
    await b.scan()
    await a.scan()
    assert pool.connects == 1
    assert [e.path for e in (await b.scan()).experiments] == [str(jobs[1])]


async def test_odd_paths_travel_as_data(
    ssh_server: InProcessSSHServer, demo_master: Path, tmp_path: Path, pool: SSHPool
) -> None:
    root = copy_job(demo_master, tmp_path / "we ird $(touch pwned) 'q' \"d\";x", "dev_set")
    src = SSHHarborSource(ssh_server.spec(), [str(root)], pool=pool)
    snap = await src.scan()
    assert len(snap.experiments) == 1
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    assert_same(await HarborSource(root).scan(), snap)


async def test_bytes_that_are_not_utf8_inside_the_files_arrive_as_they_are(
    ssh_server: InProcessSSHServer, demo_master: Path, tmp_path: Path, pool: SSHPool
) -> None:
    root = copy_job(demo_master, tmp_path / "jobs", "dev_set")
    job = next(p for p in root.iterdir() if p.is_dir())
    trials = sorted(p for p in job.iterdir() if (p / "result.json").is_file())
    # a raw 0xff in a message: not JSON a strict reader takes; a raw one in the model's name: text a
    # lenient one reads with a replacement character
    (trials[0] / "result.json").write_bytes((trials[0] / "result.json").read_bytes().replace(b'"', b'"\xff', 1))
    doc = json.loads((trials[1] / "result.json").read_text())
    doc["exception_info"] = {"exception_type": "RuntimeError", "exception_message": "caf\udce9"}
    (trials[1] / "result.json").write_bytes(json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    (job / "meta.env").write_bytes(b"MODEL=caf\xe9\n")
    snap = await SSHHarborSource(ssh_server.spec(), [str(root)], pool=pool).scan()
    assert_same(await HarborSource(root, cache=False).scan(), snap)
    src = SSHHarborSource(ssh_server.spec(), [str(root)], pool=pool)
    await src.scan()
    assert src.client.jobs[str(job)].files["meta.env"][1] == b"MODEL=caf\xe9\n"


async def test_missing_paths(ssh_server: InProcessSSHServer, demo: Path, tmp_path: Path, pool: SSHPool) -> None:
    src = SSHHarborSource(ssh_server.spec(), [str(tmp_path / "nope")], pool=pool)
    with pytest.raises(SourceUnavailable, match="no such directory"):
        await src.scan()
    both = SSHHarborSource(ssh_server.spec(), [str(tmp_path / "nope"), str(demo)], pool=pool)
    snap = await both.scan()
    assert len(snap.experiments) == 6
    assert [e.message for e in snap.errors] == ["no such directory"]


def test_parse_ssh_url() -> None:
    spec, path = parse_ssh_url("ssh://alice@login.cluster:2222/scratch/jobs")
    assert (spec.host, spec.user, spec.port, path) == ("login.cluster", "alice", 2222, "/scratch/jobs")
    spec, path = parse_ssh_url("ssh://gpu01/~/jobs")
    assert (spec.host, spec.user, spec.port, path) == ("gpu01", None, None, "~/jobs")
    with pytest.raises(ValueError):
        parse_ssh_url("ssh:///nohost")


def test_open_source_and_sources_of_the_config(tmp_path: Path) -> None:
    cfg = Config(
        ssh_config=str(tmp_path / "cfg"),
        hosts=[HostConfig(name="hpc", host="login.hpc", user="bob", identity_file="~/.ssh/id_hpc",
                          paths=["/data/jobs"], slurm_job_id_key="sjid")],
        sources=[SourceConfig(path=str(tmp_path)), SourceConfig(path="ssh://x@other:23/j", name="o")],
    )
    assert isinstance(open_source(str(tmp_path), cfg), HarborSource)
    src = open_source("ssh://login.hpc/scratch", cfg)
    assert isinstance(src, SSHHarborSource)
    assert src.spec.user == "bob" and src.spec.identity_file == "~/.ssh/id_hpc"
    assert src.spec.ssh_config == str(tmp_path / "cfg") and src.paths == ["/scratch"]
    assert src.slurm_job_id_key == "sjid" and src.kind == "harbor+ssh"
    srcs, errors = open_all([], cfg)
    assert errors == []
    assert [s.kind for s in srcs] == ["harbor", "harbor+ssh", "harbor+ssh"]
    other = srcs[1]
    assert isinstance(other, SSHHarborSource) and other.label == "o"
    assert (other.spec.user, other.spec.port, other.paths) == ("x", 23, ["/j"])
    assert isinstance(srcs[2], SSHHarborSource) and srcs[2].paths == ["/data/jobs"]


async def test_sftp_fs_moves_and_writes(ssh_server: InProcessSSHServer, tmp_path: Path, pool: SSHPool) -> None:
    root = tmp_path / "fs"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.txt").write_bytes(b"0123456789")
    src = SSHHarborSource(ssh_server.spec(), [str(root)], pool=pool)
    fs = src.fs()
    st = await fs.stat(str(root / "a"))
    assert st is not None and st.is_dir
    assert await fs.stat(str(root / "missing")) is None
    assert await fs.read_bytes(str(root / "a" / "f.txt"), 3, 4) == b"3456"
    await fs.makedirs(str(root / "q" / "r"))
    await fs.rename(str(root / "a"), str(root / "q" / "r" / "a"))
    assert (root / "q" / "r" / "a" / "f.txt").exists()
    with pytest.raises(FileExistsError):
        await fs.rename(str(root / "q"), str(root / "q" / "r"))
    await fs.write_bytes_atomic(str(root / "result.json"), b'{"x": 1}')
    await fs.write_bytes_atomic(str(root / "result.json"), b'{"x": 2}')
    assert (root / "result.json").read_bytes() == b'{"x": 2}'
    assert await fs.list_dir(str(root)) == ["q", "result.json"]
    await fs.remove_file(str(root / "result.json"))
    with pytest.raises(FileNotFoundError):
        await fs.read_bytes(str(root / "result.json"))
    await src.close()


# --- OpenSSH: ~/.ssh/config alias, ProxyJump, known_hosts -------------------------------------

@pytest.fixture
def sshd_pair(tmp_path: Path, client_key: tuple[Path, str]):  # type: ignore[no-untyped-def]
    jump = start_openssh(tmp_path, client_key[1], "jump")
    try:
        target = start_openssh(tmp_path, client_key[1], "target")
    except BaseException:
        jump.stop()
        raise
    yield jump, target
    jump.stop()
    target.stop()


async def test_openssh_config_alias_proxyjump_and_known_hosts(
    sshd_pair: tuple[OpenSSHServer, OpenSSHServer], client_key: tuple[Path, str], tmp_path: Path,
    demo: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    jump, target = sshd_pair
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    user = os.environ.get("USER") or "root"
    (home / ".ssh" / "config").write_text(
        f"Host bastion\n  HostName 127.0.0.1\n  Port {jump.port}\n  User {user}\n  IdentityFile {client_key[0]}\n"
        f"Host cluster\n  HostName 127.0.0.1\n  Port {target.port}\n  User {user}\n"
        f"  IdentityFile {client_key[0]}\n  ProxyJump bastion\n"
    )
    known = home / ".ssh" / "known_hosts"
    write_known_hosts(known, [("127.0.0.1", jump.port, jump.host_key), ("127.0.0.1", target.port, target.host_key)])

    pool = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
    try:
        src = open_source(f"ssh://cluster{demo}", Config())
        assert isinstance(src, SSHHarborSource)
        src.pool = pool
        snap = await src.scan()
        assert_same(await HarborSource(demo).scan(), snap)
        assert pool.connection(src.spec) is not None

        # the jump host's key missing from known_hosts: a clear refusal naming it
        write_known_hosts(known, [("127.0.0.1", target.port, target.host_key)])
        fresh = SSHHarborSource(HostSpec(host="cluster"), [str(demo)], pool=SSHPool(backoff_base_s=0.0))
        with pytest.raises(SourceUnavailable, match=r"jump host bastion.*unknown host key"):
            await fresh.scan()

        # the target's key changed: refused, even through the jump host
        other = asyncssh.generate_private_key("ssh-ed25519")
        write_known_hosts(known, [("127.0.0.1", jump.port, jump.host_key), ("127.0.0.1", target.port, other)])
        changed = SSHHarborSource(HostSpec(host="cluster"), [str(demo)], pool=SSHPool(backoff_base_s=0.0))
        with pytest.raises(SourceUnavailable, match=r"cluster.*host key CHANGED"):
            await changed.scan()
    finally:
        await pool.close()


async def test_openssh_ssh_config_flag_and_sftp(
    sshd_pair: tuple[OpenSSHServer, OpenSSHServer], client_key: tuple[Path, str], tmp_path: Path, demo: Path
) -> None:
    _, target = sshd_pair
    cfg = tmp_path / "alt_config"
    known = tmp_path / "alt_known"
    cfg.write_text(
        f"Host evalbox\n  HostName 127.0.0.1\n  Port {target.port}\n  IdentityFile {client_key[0]}\n"
        f"  UserKnownHostsFile {known}\n"
    )
    write_known_hosts(known, [("127.0.0.1", target.port, target.host_key)])
    src = open_source(f"ssh://evalbox{demo}", Config(ssh_config=str(cfg)))
    assert isinstance(src, SSHHarborSource)
    src.pool = SSHPool(backoff_base_s=0.0)
    try:
        snap = await src.scan()
        assert len(snap.experiments) == 6
        job = snap.experiments[0].path
        assert "config.json" in await src.fs().list_dir(job)
        await src.fs().write_bytes_atomic(str(tmp_path / "w.json"), b"{}")
        assert (tmp_path / "w.json").read_bytes() == b"{}"
    finally:
        await src.close()
        await src.pool.close()


async def test_sftp_fallback_reads_the_whole_demo_like_the_local_scanner(
    ssh_server: InProcessSSHServer, demo: Path, pool: SSHPool
) -> None:
    from tests.services.transport.test_ssh_faults import _figures

    src = SSHHarborSource(ssh_server.spec(), [str(demo)], pool=pool, python="no-python-on-this-host", slurm=False)
    snap = await src.scan()
    assert snap.stats["mode"] == "sftp"
    assert _figures(snap) == _figures(HarborSource(demo).scan_sync())
