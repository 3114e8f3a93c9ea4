"""Host keys: `insecure_no_host_key_check` is the host's own switch, its ProxyJump hop keeps its
check (two real OpenSSH servers on loopback, the jump host forwarding to the target); a
known_hosts file that does not exist makes the host unknown, not unreachable."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from services.core.source import SourceUnavailable
from services.transport.ssh import HostSpec, SSHPool
from tests.support.ssh_server import InProcessSSHServer, OpenSSHServer, start_openssh, write_known_hosts
from tests.support.ssh_server import client_key as client_key
from tests.support.ssh_server import ssh_server as ssh_server


@pytest.fixture
def jump_and_target(tmp_path: Path, client_key: tuple[Path, str]) -> Iterator[tuple[OpenSSHServer, OpenSSHServer]]:
    jump = start_openssh(tmp_path, client_key[1], "jump")
    try:
        target = start_openssh(tmp_path, client_key[1], "target")
    except BaseException:
        jump.stop()
        raise
    yield jump, target
    jump.stop()
    target.stop()


def _ssh_config(tmp_path: Path, jump: OpenSSHServer, target: OpenSSHServer, key: Path) -> Path:
    user = os.environ.get("USER") or "root"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host bastion\n  HostName 127.0.0.1\n  Port {jump.port}\n  User {user}\n  IdentityFile {key}\n"
        f"Host cluster\n  HostName 127.0.0.1\n  Port {target.port}\n  User {user}\n  IdentityFile {key}\n"
        "  ProxyJump bastion\n"
    )
    return cfg


async def _connect(spec: HostSpec) -> str:
    pool = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
    try:
        _, out, _ = await pool.run(spec, "echo through")
        return out.decode().strip()
    finally:
        await pool.close()


async def test_insecure_target_does_not_switch_off_the_jump_hosts_check(
    jump_and_target: tuple[OpenSSHServer, OpenSSHServer], client_key: tuple[Path, str], tmp_path: Path
) -> None:
    jump, target = jump_and_target
    cfg = _ssh_config(tmp_path, jump, target, client_key[0])
    known = tmp_path / "known_hosts"

    def insecure_cluster() -> HostSpec:
        return HostSpec(host="cluster", ssh_config=str(cfg), known_hosts=str(known), insecure_no_host_key_check=True)

    # neither key known: the target's switch lets the target through, never the hop
    known.write_text("")
    with pytest.raises(SourceUnavailable, match=r"^cluster: via jump host bastion: unknown host key"):
        await _connect(insecure_cluster())

    # the hop's key changed (a man in the middle at the hop): refused, named as a change
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    write_known_hosts(known, [("127.0.0.1", jump.port, impostor)])
    with pytest.raises(SourceUnavailable, match=r"via jump host bastion: host key CHANGED"):
        await _connect(insecure_cluster())

    # the hop's real key known, the target's not: the target's own switch applies to it alone
    write_known_hosts(known, [("127.0.0.1", jump.port, jump.host_key)])
    assert await _connect(insecure_cluster()) == "through"

    # and without the switch the unknown target is refused as before, through the same hop
    checked = HostSpec(host="cluster", ssh_config=str(cfg), known_hosts=str(known))
    with pytest.raises(SourceUnavailable, match=r"^cluster: unknown host key"):
        await _connect(checked)


async def test_a_missing_known_hosts_file_means_unknown_host_not_a_file_error(
    ssh_server: InProcessSSHServer, tmp_path: Path
) -> None:
    absent = tmp_path / "no_such_known_hosts"
    with pytest.raises(SourceUnavailable, match=rf"unknown host key \(not in {absent}\)"):
        await _connect(ssh_server.spec(known_hosts=str(absent)))
