"""Ctrl+C in batch mode: the command stops at its next await (its cleanup runs), then one line
on stderr and exit 130 — never a traceback, never a wait for a scan thread to finish."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Coroutine
from typing import IO, Any, NoReturn, TypeVar

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a process Ctrl+C stopped

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
