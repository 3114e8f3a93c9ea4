"""How batch mode leaves early. Ctrl+C: the command stops at its next await (its cleanup runs),
then one line on stderr and exit 130 — never a traceback, never a wait for a scan thread to
finish. A reader of stdout that goes away (`| head`): exit 141 without a word, as a command
killed by SIGPIPE would."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import sys
from collections.abc import Coroutine
from typing import IO, Any, NoReturn, TypeVar

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a process Ctrl+C stopped
EXIT_READER_GONE = 141  # 128 + SIGPIPE, what shells report for a command whose reader left

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run`, except that Ctrl+C leaves at once.

    On the first Ctrl+C asyncio cancels the command's task, so `finally` blocks and the write
    path's own handling run, and `KeyboardInterrupt` comes out. The loop is then left open on
    purpose: closing it would wait for a scan thread that may read for minutes more, and a
    second Ctrl+C during that wait is where a second traceback came from.
    """
    runner = asyncio.Runner()
    try:
        result = runner.run(coro)
    except KeyboardInterrupt:
        raise  # the loop stays open: see above
    except BaseException:
        runner.close()
        raise
    runner.close()
    return result


def exit_interrupted(err: IO[str] | None = None) -> NoReturn:
    """Say so in one line and leave with 130, without waiting for worker threads."""
    err = err or sys.stderr
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        err.write("evaldesk: interrupted (Ctrl+C)\n")
        err.flush()
    # a scan thread cannot be cancelled; the interpreter's exit would join it
    os._exit(EXIT_INTERRUPTED)


def reader_gone(stream: IO[str] | None = None) -> bool:
    """Whether `stream` (stdout) is a pipe or socket whose reader has closed it. Python ignores
    SIGPIPE, so a write there raises BrokenPipeError; this tells that apart from a broken pipe
    to a child process or a host."""
    stream = stream or sys.stdout
    try:
        fd = stream.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def exit_reader_gone() -> NoReturn:
    """Leave with 141 and nothing on stderr: what is left to print has no reader."""
    # what stdout still buffers can go nowhere: without this the interpreter's last flush
    # would print an "Exception ignored" note about it
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    os._exit(EXIT_READER_GONE)
