"""Pooled SSH connections: one per host, keepalives on, reconnect with backoff.

Every remote source asks the pool for its host's connection instead of dialling itself, so a
screen refreshing five job dirs on one cluster costs one TCP+SSH handshake, not five.

Host resolution follows OpenSSH: the host may be a `~/.ssh/config` alias (or one from the file
named by `ssh_config`, like `ssh -F`), whose HostName, User, Port, IdentityFile, ProxyJump and
UserKnownHostsFile apply. Jump hosts are dialled by the same code, so their host keys are
checked the same way. Host-key checking is never switched off unless the host's own
`insecure_no_host_key_check` says so, and that switch covers that host only: its ProxyJump hops
keep their checks (a hop is where a man in the middle would sit). A config that names no
known_hosts file at all is an error, not a silent pass. Agent forwarding is always off. Nothing
here logs secrets: messages name the host and the cause, never keys or passphrases.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import asyncssh

from services.core.config import HostConfig
from services.core.source import SourceUnavailable

DEFAULT_KEEPALIVE_S = 15
DEFAULT_CONNECT_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class HostSpec:
    """Where and how to connect; hashable so it keys the pool."""

    host: str
    user: str | None = None
    port: int | None = None
    proxy_jump: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    insecure_no_host_key_check: bool = False
    ssh_config: str | None = None

    @property
    def label(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


@dataclass
class _Entry:
    conn: asyncssh.SSHClientConnection | None = None
    failures: int = 0
    retry_at: float = 0.0
    last_error: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _config_paths(spec: HostSpec) -> list[str]:
    if spec.ssh_config:
        path = os.path.expanduser(spec.ssh_config)
        if not os.path.isfile(path):
            raise SourceUnavailable(spec.label, f"ssh config {spec.ssh_config} not found")
        return [path]
    default = os.path.expanduser("~/.ssh/config")
    return [default] if os.access(default, os.R_OK) else []


def resolve(spec: HostSpec) -> dict[str, Any]:
    """What the ssh config says for this host (HostName, User, Port, ProxyJump, …)."""
    from asyncssh.config import SSHClientConfig

    paths = _config_paths(spec)
    try:
        local_user = getpass.getuser()
    except (KeyError, OSError):
        local_user = "root"
    try:
        cfg = SSHClientConfig.load(
            None,
            [os.fspath(p) for p in paths],
            False,
            False,
            False,
            local_user,
            spec.user if spec.user else (),  # type: ignore[arg-type]
            spec.host,
            spec.port if spec.port else (),  # type: ignore[arg-type]
        )
    except (OSError, asyncssh.ConfigParseError) as exc:
        raise SourceUnavailable(spec.label, f"cannot read ssh config: {exc}") from None
    keys = ("Hostname", "User", "Port", "ProxyJump", "UserKnownHostsFile", "IdentityFile", "HostKeyAlias")
    out = {k: cfg.get(k) for k in keys}
    out["paths"] = paths
    return out


def _known_hosts_for(spec: HostSpec, resolved: dict[str, Any]) -> list[str] | None:
    if spec.insecure_no_host_key_check:
        return None
    if spec.known_hosts:
        return [os.path.expanduser(spec.known_hosts)]
    from_cfg = resolved.get("UserKnownHostsFile")
    if from_cfg is not None:
        files = [os.path.expanduser(str(f)) for f in from_cfg if str(f).lower() != "none"]
        if not files:
            raise SourceUnavailable(
                spec.label,
                "ssh config sets UserKnownHostsFile none; evaldesk does not skip host-key checks "
                "unless insecure_no_host_key_check is set for this host",
            )
        return files
    # An absent file means every host is unknown, which asyncssh reports as untrusted.
    return [os.path.expanduser("~/.ssh/known_hosts")]


def _split_jump(hop: str) -> HostSpec:
    user: str | None = None
    port: int | None = None
    if "@" in hop:
        user, hop = hop.rsplit("@", 1)
    if hop.startswith("[") and "]" in hop:
        host, _, rest = hop[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
    elif hop.count(":") == 1:
        host, port_s = hop.split(":")
        port = int(port_s)
    else:
        host = hop
    return HostSpec(host=host, user=user, port=port)


def _host_key_cause(spec: HostSpec, known_hosts: list[str] | None, host: str, port: int) -> str:
    """Tell an unknown host from a changed key: the second is the one to worry about."""
    for path in known_hosts or []:
        if not os.path.isfile(path):
            continue
        try:
            kh = asyncssh.read_known_hosts(path)
            names = [host if port == 22 else f"[{host}]:{port}"]
            if spec.host != host:
                names.append(spec.host if port == 22 else f"[{spec.host}]:{port}")
            for name in names:
                trusted = kh.match(name, "", port)[0]
                if trusted:
                    return (
                        f"host key CHANGED for {name} (does not match {path}); "
                        "if the host was reinstalled, remove the old line with ssh-keygen -R"
                    )
        except (OSError, ValueError, asyncssh.Error):
            continue
    where = ", ".join(known_hosts or []) or "known_hosts"
    return f"unknown host key (not in {where}); add it with ssh-keyscan or connect once with ssh"


def describe(exc: BaseException, spec: HostSpec, known_hosts: list[str] | None = None,
             host: str = "", port: int = 22) -> str:
    """One line naming the cause; never includes key material."""
    if isinstance(exc, SourceUnavailable):
        return exc.message
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return _host_key_cause(spec, known_hosts, host or spec.host, port)
    if isinstance(exc, asyncssh.PermissionDenied):
        return "authentication failed (no accepted key; check User and IdentityFile)"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timed out"
    if isinstance(exc, asyncssh.ConnectionLost):
        return f"connection lost ({exc.reason})" if getattr(exc, "reason", "") else "connection lost"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"disconnected: {exc.reason}"
    if isinstance(exc, asyncssh.ChannelOpenError):
        return f"cannot open a session: {exc.reason}"
    if isinstance(exc, FileNotFoundError) and exc.filename and str(exc.filename) in (known_hosts or []):
        return (f"the known_hosts file {exc.filename} does not exist: add the host's key to it "
                "(ssh-keyscan, or connect once with ssh) or name another with known_hosts for this host")
    if isinstance(exc, OSError) and exc.filename:
        return f"cannot read {exc.filename}: {exc.strerror or exc}"
    if isinstance(exc, OSError):
        return f"cannot connect: {exc.strerror or exc}"
    if isinstance(exc, asyncssh.Error):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class SSHPool:
    """One live connection per HostSpec; failed hosts wait out an exponential backoff."""

    def __init__(
        self,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        keepalive_s: int = DEFAULT_KEEPALIVE_S,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
    ) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._entries: dict[HostSpec, _Entry] = {}
        self.connects = 0

    def _entry(self, spec: HostSpec) -> _Entry:
        entry = self._entries.get(spec)
        if entry is None:
            entry = self._entries[spec] = _Entry()
        return entry

    async def get(self, spec: HostSpec) -> asyncssh.SSHClientConnection:
        entry = self._entry(spec)
        async with entry.lock:
            conn = entry.conn
            if conn is not None and not conn.is_closed():
                return conn
            entry.conn = None
            wait = entry.retry_at - time.monotonic()
            if wait > 0:
                raise SourceUnavailable(spec.label, f"{entry.last_error} (next retry in {wait:.0f}s)")
            try:
                conn = await self._connect(spec)
            except SourceUnavailable as exc:
                self._failed(entry, exc.message)
                raise
            entry.conn = conn
            entry.failures = 0
            entry.retry_at = 0.0
            return conn

    def _failed(self, entry: _Entry, message: str) -> None:
        entry.failures += 1
        entry.last_error = message
        delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** (entry.failures - 1))
        entry.retry_at = time.monotonic() + delay

    def mark_broken(self, spec: HostSpec, message: str) -> None:
        """A command on the connection failed in a way that means the link is gone."""
        entry = self._entry(spec)
        conn, entry.conn = entry.conn, None
        if conn is not None:
            conn.abort()
        entry.last_error = message

    async def _connect(self, spec: HostSpec) -> asyncssh.SSHClientConnection:
        resolved = resolve(spec)
        known_hosts = _known_hosts_for(spec, resolved)
        host = str(resolved.get("Hostname") or spec.host)
        port = int(spec.port or resolved.get("Port") or 22)
        tunnel: asyncssh.SSHClientConnection | None = None
        jump = spec.proxy_jump or resolved.get("ProxyJump")
        if jump and str(jump).lower() != "none":
            for hop in str(jump).split(","):
                hop_spec = _split_jump(hop.strip())
                hop_spec = HostSpec(
                    host=hop_spec.host,
                    user=hop_spec.user,
                    port=hop_spec.port,
                    known_hosts=spec.known_hosts,
                    # the target's insecure switch is not the hop's: the hop is checked
                    insecure_no_host_key_check=False,
                    ssh_config=spec.ssh_config,
                )
                try:
                    hop_conn = await self._dial(hop_spec, tunnel)
                except SourceUnavailable as exc:
                    if tunnel is not None:
                        tunnel.close()
                    raise SourceUnavailable(spec.label, f"via jump host {hop_spec.label}: {exc.message}") from None
                if tunnel is not None:
                    hop_conn.set_tunnel(tunnel)
                tunnel = hop_conn
        try:
            conn = await self._dial(spec, tunnel, resolved, known_hosts, host, port)
        except SourceUnavailable:
            if tunnel is not None:
                tunnel.close()
            raise
        if tunnel is not None:
            # Closing the target then closes the whole chain of jump connections.
            conn.set_tunnel(tunnel)
        return conn

    async def _dial(
        self,
        spec: HostSpec,
        tunnel: asyncssh.SSHClientConnection | None,
        resolved: dict[str, Any] | None = None,
        known_hosts: list[str] | None = None,
        host: str | None = None,
        port: int | None = None,
    ) -> asyncssh.SSHClientConnection:
        if resolved is None:
            resolved = resolve(spec)
            known_hosts = _known_hosts_for(spec, resolved)
            host = str(resolved.get("Hostname") or spec.host)
            port = int(spec.port or resolved.get("Port") or 22)
        assert host is not None and port is not None
        trusted: Any = known_hosts
        if known_hosts is not None:
            # a known_hosts file that does not exist trusts no key: the host is unknown (and said
            # so below), not unreachable with "No such file or directory"
            trusted = [f for f in known_hosts if os.path.isfile(f)] or b""
        kwargs: dict[str, Any] = {
            "port": port,
            "config": resolved["paths"],
            "known_hosts": trusted,
            "keepalive_interval": self.keepalive_s,
            "keepalive_count_max": 3,
            "agent_forwarding": False,
            "connect_timeout": self.connect_timeout_s,
            "login_timeout": self.connect_timeout_s,
            "tunnel": tunnel if tunnel is not None else None,
        }
        if spec.user:
            kwargs["username"] = spec.user
        if spec.identity_file:
            kwargs["client_keys"] = [os.path.expanduser(spec.identity_file)]
        self.connects += 1
        try:
            return await asyncio.wait_for(
                asyncssh.connect(spec.host, **kwargs), timeout=self.connect_timeout_s + 5
            )
        except (TimeoutError, OSError, asyncssh.Error, ValueError) as exc:
            message = describe(exc, spec, known_hosts, host, port)
            raise SourceUnavailable(spec.label, message) from None

    async def run(
        self, spec: HostSpec, command: str, stdin: bytes = b"", timeout_s: float = 120.0
    ) -> tuple[int | None, bytes, bytes]:
        """Run one command with `stdin`; returns (exit status, stdout, stderr) as bytes."""
        conn = await self.get(spec)
        try:
            result = await asyncio.wait_for(
                # no input → stdin at EOF at once, so a command that reads stdin never waits
                conn.run(command, input=stdin, encoding=None, check=False)
                if stdin
                else conn.run(command, stdin=asyncssh.DEVNULL, encoding=None, check=False),
                timeout=timeout_s,
            )
        except TimeoutError:
            # The channel may still be busy; drop the link so the next scan starts clean.
            self.mark_broken(spec, f"no answer within {timeout_s:g}s")
            raise SourceUnavailable(spec.label, f"no answer within {timeout_s:g}s (slow host?)") from None
        except (OSError, asyncssh.Error) as exc:
            message = describe(exc, spec)
            self.mark_broken(spec, message)
            raise SourceUnavailable(spec.label, message) from None
        out = result.stdout if isinstance(result.stdout, bytes) else (result.stdout or "").encode()
        err = result.stderr if isinstance(result.stderr, bytes) else (result.stderr or "").encode()
        if result.exit_status is None and result.exit_signal is None and conn.is_closed():
            self.mark_broken(spec, "connection lost")
            raise SourceUnavailable(spec.label, "connection lost mid-command")
        return result.exit_status, out, err

    def connection(self, spec: HostSpec) -> asyncssh.SSHClientConnection | None:
        entry = self._entries.get(spec)
        return entry.conn if entry else None

    async def close(self) -> None:
        for entry in self._entries.values():
            if entry.conn is not None:
                entry.conn.close()
                with contextlib.suppress(TimeoutError, OSError, asyncssh.Error):
                    await asyncio.wait_for(entry.conn.wait_closed(), 2)
                entry.conn = None


_shared: SSHPool | None = None


def shared_pool() -> SSHPool:
    """The process-wide pool, so every source on one host shares one connection."""
    global _shared
    if _shared is None:
        _shared = SSHPool()
    return _shared


def parse_ssh_url(url: str) -> tuple[HostSpec, str]:
    """`ssh://[user@]host[:port]/path` (or `<kind>+ssh://…`) → (HostSpec, remote path).

    `/~/x` means `~/x`. Raises ValueError for anything else.
    """
    parts = urlsplit(url)
    if not (parts.scheme == "ssh" or parts.scheme.endswith("+ssh")) or not parts.hostname:
        raise ValueError(f"not an ssh:// URL with a host: {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in {url!r}") from None
    path = unquote(parts.path) or "."
    if path.startswith("/~"):
        path = path[1:]
    user = unquote(parts.username) if parts.username else None
    return HostSpec(host=parts.hostname, user=user, port=port), path


def host_spec(hc: HostConfig, ssh_config: str | None) -> HostSpec:
    """The connection settings of a `[[hosts]]` entry."""
    return HostSpec(
        host=hc.host,
        user=hc.user,
        port=hc.port,
        proxy_jump=hc.proxy_jump,
        identity_file=hc.identity_file,
        known_hosts=hc.known_hosts,
        insecure_no_host_key_check=hc.insecure_no_host_key_check,
        ssh_config=ssh_config,
    )


def host_config_for(host: str, hosts: list[HostConfig]) -> HostConfig | None:
    """The `[[hosts]]` entry an ssh:// URL's host names, by `host` or `name`."""
    for hc in hosts:
        if host in (hc.host, hc.name):
            return hc
    return None
