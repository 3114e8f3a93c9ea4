"""A real SSH server for tests: asyncssh in-process on 127.0.0.1, or OpenSSH's sshd.

Commands run in a real shell on this machine, so the remote scan program, sacct and SFTP are
exercised for real; faults (a dropped connection, a slow host) are produced by the server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from services.transport.ssh import HostSpec
from tests.support.services import service_missing

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_known_hosts(path: Path, entries: list[tuple[str, int, asyncssh.SSHKey]]) -> None:
    lines = []
    for host, port, key in entries:
        name = host if port == 22 else f"[{host}]:{port}"
        lines.append(f"{name} {key.export_public_key().decode().strip()}")
    path.write_text("\n".join(lines) + "\n")


class _SFTPServer(asyncssh.SFTPServer):
    def __init__(self, chan: asyncssh.SSHServerChannel, owner: InProcessSSHServer) -> None:
        super().__init__(chan)
        self._owner = owner

    async def read(self, file_obj: object, offset: int, size: int) -> bytes:  # type: ignore[override]
        if self._owner.sftp_stall:
            await asyncio.Event().wait()
        return super().read(file_obj, offset, size)  # type: ignore[arg-type, return-value]


class InProcessSSHServer:
    """asyncssh server; `mode` is "ok", "drop" (abort after half the reply) or "slow"."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.client_key_path = tmp / "id_client"
        self.client_key.write_private_key(str(self.client_key_path))
        self.authorized: list[asyncssh.SSHKey] = [self.client_key]
        self.known_hosts_path = tmp / "known_hosts"
        self.ssh_config_path = tmp / "ssh_config"
        self.ssh_config_path.write_text("")
        self.mode = "ok"
        self.slow_s = 5.0
        self.commands: list[str] = []
        self.drop_on: str | None = None  # drop the connection while running a command containing this
        self.sftp_stall = False  # SFTP reads never answer (a hung disk behind the server)
        self.port = 0
        self._server: asyncssh.SSHAcceptor | None = None

    async def start(self, port: int = 0) -> None:
        authorized = asyncssh.import_authorized_keys(
            "".join(k.export_public_key().decode() for k in self.authorized)
        )
        self._server = await asyncssh.create_server(
            asyncssh.SSHServer,
            "127.0.0.1",
            port,
            server_host_keys=[self.host_key],
            authorized_client_keys=authorized,
            process_factory=self._handle,
            encoding=None,
            sftp_factory=lambda chan: _SFTPServer(chan, self),
            allow_scp=False,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        write_known_hosts(self.known_hosts_path, [("127.0.0.1", self.port, self.host_key)])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def restart_with_new_host_key(self) -> None:
        port = self.port
        await self.stop()
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        known = self.known_hosts_path.read_text()
        await self.start(port)
        self.known_hosts_path.write_text(known)  # the client still trusts the old key

    def spec(self, **kw: object) -> HostSpec:
        base: dict[str, object] = {
            "host": "127.0.0.1",
            "port": self.port,
            "identity_file": str(self.client_key_path),
            "known_hosts": str(self.known_hosts_path),
            "ssh_config": str(self.ssh_config_path),
        }
        base.update(kw)
        return HostSpec(**base)  # type: ignore[arg-type]

    async def _handle(self, process: asyncssh.SSHServerProcess) -> None:
        command = process.command or ""
        self.commands.append(command)
        if self.mode == "slow":
            await asyncio.sleep(self.slow_s)
        stdin = await process.stdin.read()
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate(stdin)
        if self.mode == "drop" or (self.drop_on is not None and self.drop_on in command):
            process.stdout.write(out[: max(1, len(out) // 2)])
            await asyncio.sleep(0.05)
            process.channel.get_connection().abort()
            return
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(proc.returncode if proc.returncode is not None else 255)


@pytest.fixture
def client_key(tmp_path: Path) -> tuple[Path, str]:
    """A client key pair for the OpenSSH servers: (private key file, public key line)."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp_path / "id_ed25519"
    key.write_private_key(str(path))
    os.chmod(path, 0o600)
    return path, key.export_public_key().decode()


@pytest.fixture
async def ssh_server(tmp_path: Path) -> AsyncIterator[InProcessSSHServer]:
    d = tmp_path / "sshsrv"
    d.mkdir()
    server = InProcessSSHServer(d)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class OpenSSHServer:
    """Debian's sshd on a free loopback port with a throwaway config."""

    def __init__(self, tmp: Path, client_pub: str, name: str = "sshd") -> None:
        self.dir = tmp / name
        self.dir.mkdir(parents=True)
        self.port = free_port()
        self.host_key_path = self.dir / "host_ed25519"
        key = asyncssh.generate_private_key("ssh-ed25519")
        key.write_private_key(str(self.host_key_path))
        os.chmod(self.host_key_path, 0o600)
        self.host_key = key
        (self.dir / "authorized_keys").write_text(client_pub)
        self.conf = self.dir / "sshd_config"
        self.conf.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key_path}",
                    f"PidFile {self.dir / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "StrictModes no",
                    "UsePAM no",
                    "AllowTcpForwarding yes",
                    "Subsystem sftp internal-sftp",
                ]
            )
            + "\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        os.makedirs("/run/sshd", exist_ok=True)
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"sshd exited: {err.strip()[-300:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not start listening within 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


def require_sshd() -> None:
    """Skip (or, under CI, fail) a test that needs OpenSSH's sshd when it is not installed."""
    if not os.path.exists(SSHD):
        service_missing(f"{SSHD} missing (apt-get install openssh-server, or scripts/ci_services.sh)")


def start_openssh(tmp: Path, client_pub: str, name: str = "sshd") -> OpenSSHServer:
    """A running sshd, or a skip (a failure under CI) saying why there is none."""
    require_sshd()
    server = OpenSSHServer(tmp, client_pub, name)
    try:
        server.start()
    except RuntimeError as exc:
        server.stop()
        service_missing(f"cannot start sshd: {exc}")
    return server
