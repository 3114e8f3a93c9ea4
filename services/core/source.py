"""The one small protocol every source implements; screens and checks see only this."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from services.core.models import Snapshot
from services.transport.fs import JobFS


class Progress(Protocol):
    def __call__(self, done: int, total: int | None, message: str) -> None: ...


ProgressFn = Callable[[int, int | None, str], None]


def no_progress(done: int, total: int | None, message: str) -> None:
    return None


@runtime_checkable
class Source(Protocol):
    """A place experiments are read from.

    `scan` returns a full Snapshot and must be cheap to call again: sources keep what they
    parsed and re-read only what changed. It reports unreachable hosts and unreadable files
    in `Snapshot.errors` instead of raising, except for a source that cannot be reached at
    all, which raises `SourceUnavailable`.
    """

    kind: str
    label: str

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot: ...

    def fs(self) -> JobFS:
        """File access rooted where the experiments' `path` values point."""
        ...

    async def close(self) -> None: ...


class SourceUnavailable(Exception):
    """The source cannot be read at all (missing path, refused connection, bad host key …)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message
