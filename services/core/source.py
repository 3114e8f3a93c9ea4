"""The one small protocol every source implements; screens and checks see only this."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, Protocol, runtime_checkable

from services.core.models import Experiment, Snapshot, SourceError, Trial
from services.core.plain import copy_with
from services.transport.fs import JobFS


class Progress(Protocol):
    def __call__(self, done: int, total: int | None, message: str) -> None: ...


ProgressFn = Callable[[int, int | None, str], None]


def no_progress(done: int, total: int | None, message: str) -> None:
    return None


class TrialFile(NamedTuple):
    """A file of a trial the log panel can open (digit keys 1…n, in order).

    `rel` is relative to the trial's dir; one ending in "/" names a folder whose files the
    same key cycles through.
    """

    kind: str
    label: str
    rel: str


@dataclass(kw_only=True)
class TrialEvidence:
    """What a source can tell about why one trial ended the way it did, read from its files."""

    exception_type: str | None = None
    exception_message: str | None = None
    traceback: str | None = None
    verifier_label: str = "verifier output"
    verifier_excerpt: str | None = None
    problems: list[str] = field(default_factory=list, metadata={"description": "what could not be read, and why"})


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
    trial_files: tuple[TrialFile, ...]

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot: ...

    def fs(self) -> JobFS:
        """File access rooted where the experiments' `path` values point."""
        ...

    async def evidence(self, exp: Experiment, trial: Trial) -> TrialEvidence:
        """The traceback, exception and verifier output of one trial; never raises for a bad file."""
        ...

    async def close(self) -> None: ...


class SourceUnavailable(Exception):
    """The source cannot be read at all (missing path, refused connection, bad host key …)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


def source_host(source: Source) -> str | None:
    """The SSH host a source reads from (for previews and records); None for local disk."""
    host = getattr(source, "host", None)
    return host if isinstance(host, str) else None


def stale_copy(last_good: Snapshot, since: datetime, exc: SourceUnavailable, label: str) -> Snapshot:
    """What a source that cannot be reached shows: its last good Snapshot, each experiment marked
    stale since `since`, with the reason among its errors."""
    stale = []
    for old in last_good.experiments:
        new = copy_with(old, stale_since=since)
        stale.append(new)
    err = SourceError(source=label, where=exc.where, message=exc.message)
    return copy_with(last_good, experiments=stale, errors=[*last_good.errors, err],
                     stats={**last_good.stats, "stale": True})
