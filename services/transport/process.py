"""Run one command here or on an SSH host, with its output streamed as it comes.

A command is an argv list, never a shell string: locally it is exec'd with no shell at all;
on a host (where SSH only carries a command line) every argument is `shlex.quote`d and the
working dir is entered with a quoted `cd`, so names and paths travel as data. Environment
values named by a step are read from this process's environment when the command starts and
are never echoed, logged or recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from services.core.source import SourceUnavailable

if TYPE_CHECKING:
    import asyncssh

    from services.transport.ssh import HostSpec, SSHPool

# (stream name "stdout" | "stderr", a chunk of text) — called as output arrives
OutputFn = Callable[[str, str], None]
TAIL_CHARS = 8000


@dataclass
class CommandResult:
    exit_code: int | None
    stdout_tail: str = ""
    stderr_tail: str = ""
    signal: str | None = None
    error: str | None = None  # why the command could not be started or finished

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.error is None


class CommandNotFound(OSError):
    """The program is not on PATH where the command was to run."""


class Runner(Protocol):
    host: str | None  # None: this machine

    async def run(self, argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
                  on_output: OutputFn | None = None, timeout_s: float | None = None,
                  stdin: bytes | None = None) -> CommandResult: ...


def display(argv: Sequence[str], cwd: str | None = None, host: str | None = None) -> str:
    """The exact command as a person would type it (quoted), with where it runs."""
    line = shlex.join(list(argv))
    if cwd:
        line = f"cd {shlex.quote(cwd)} && {line}"
    return f"{line}   (on {host})" if host else line


class _Tail:
    def __init__(self) -> None:
        self.text = ""

    def add(self, chunk: str) -> None:
        self.text = (self.text + chunk)[-TAIL_CHARS:]


async def _pump(stream: asyncio.StreamReader | asyncssh.SSHReader[bytes], name: str, tail: _Tail,
                on_output: OutputFn | None) -> None:
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return
        text = chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else str(chunk)
        tail.add(text)
        if on_output is not None:
            on_output(name, text)


class LocalRunner:
    host: str | None = None

    async def run(self, argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
                  on_output: OutputFn | None = None, timeout_s: float | None = None,
                  stdin: bytes | None = None) -> CommandResult:
        if not argv:
            raise ValueError("an empty command")
        full_env = {**os.environ, **(env or {})}
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=cwd, env=full_env,
                stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
            )
        except FileNotFoundError as exc:
            missing = argv[0] if exc.filename in (None, argv[0]) else exc.filename
            if cwd and not os.path.isdir(cwd):
                raise FileNotFoundError(f"no such dir {cwd}") from None
            raise CommandNotFound(f"{missing}: command not found on this machine") from None
        out, err = _Tail(), _Tail()
        assert proc.stdout is not None and proc.stderr is not None
        if stdin is not None and proc.stdin is not None:
            # a few lines (a prologue's values): they fit the pipe, and it is closed at once
            with contextlib.suppress(OSError):
                proc.stdin.write(stdin)
                await proc.stdin.drain()
                proc.stdin.close()
        pumps = asyncio.gather(_pump(proc.stdout, "stdout", out, on_output),
                               _pump(proc.stderr, "stderr", err, on_output))
        try:
            await asyncio.wait_for(asyncio.shield(pumps), timeout_s)
            code = await proc.wait()
        except (TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)
            await proc.wait()
            pumps.cancel()
            raise
        return CommandResult(code, out.text, err.text)


class SSHRunner:
    """Commands on a host, over its pooled connection."""

    def __init__(self, pool: SSHPool, spec: HostSpec) -> None:
        self.pool = pool
        self.spec = spec
        self.host: str | None = spec.label

    async def run(self, argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
                  on_output: OutputFn | None = None, timeout_s: float | None = None,
                  stdin: bytes | None = None) -> CommandResult:
        # asyncssh (~0.1 s to import) loads only when a command runs on a host
        import asyncssh

        from services.transport.ssh import describe

        if not argv:
            raise ValueError("an empty command")
        line = shlex.join(list(argv))
        if cwd:
            line = f"cd {shlex.quote(cwd)} && exec {line}"
        conn = await self.pool.get(self.spec)
        try:
            # values go over the channel's environment, never into the command line
            proc = await conn.create_process(line, env=dict(env or {}), encoding=None,
                                             stdin=asyncssh.DEVNULL if stdin is None else asyncssh.PIPE)
            if stdin is not None:
                proc.stdin.write(stdin)
                proc.stdin.write_eof()
        except (OSError, asyncssh.Error) as exc:
            raise SourceUnavailable(self.spec.label, describe(exc, self.spec)) from None
        out, err = _Tail(), _Tail()
        try:
            await asyncio.wait_for(asyncio.gather(
                _pump(proc.stdout, "stdout", out, on_output), _pump(proc.stderr, "stderr", err, on_output)),
                timeout_s)
            await proc.wait_closed()
        except TimeoutError:
            proc.close()
            raise
        except (OSError, asyncssh.Error) as exc:
            self.pool.mark_broken(self.spec, describe(exc, self.spec))
            return CommandResult(None, out.text, err.text, error=f"the connection to {self.spec.label} dropped "
                                 f"while the command ran: {describe(exc, self.spec)}")
        code = proc.exit_status
        if code is None and proc.exit_signal is None:
            return CommandResult(None, out.text, err.text, error=f"the connection to {self.spec.label} dropped "
                                 "while the command ran")
        if code == 127 and "not found" in err.text:
            raise CommandNotFound(f"{argv[0]}: command not found on {self.spec.label}")
        return CommandResult(code, out.text, err.text, signal=proc.exit_signal[0] if proc.exit_signal else None)
