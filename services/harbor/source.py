"""The embedded default source: Harbor job dirs on local disk, one scanner per job dir."""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.core.models import Experiment, Snapshot, SourceError, Trial
from services.core.policy import Policy
from services.core.source import ProgressFn, SourceUnavailable, TrialEvidence, no_progress
from services.harbor import walk
from services.harbor.cache import ParseCache
from services.harbor.evidence import TRIAL_FILES, read_evidence
from services.harbor.scan import DEFAULT_VERIFY_WINDOW_S, HarborScanner
from services.transport.fs import JobFS, LocalFS
from services.transport.process import LocalRunner, Runner

# How long a local scan waits for the one ahead of it before it goes anyway.
QUEUE_WAIT_S = 30.0
_QUEUES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def local_scan_turn() -> AsyncIterator[None]:
    """One local scan at a time. Local scans are CPU-bound Python with a syscall every few
    microseconds: side by side they pass the GIL back and forth and all finish later than one
    after another would (benchmarks/local_sources.py). A scan stuck ahead (a hung NFS mount) holds
    the others back QUEUE_WAIT_S at most."""
    queue = _QUEUES.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    try:
        await asyncio.wait_for(queue.acquire(), QUEUE_WAIT_S)
        held = True
    except TimeoutError:
        held = False
    try:
        yield
    finally:
        if held:
            queue.release()


def scan_roots(fs: Any, roots: list[str], scanners: dict[str, HarborScanner], make: Any, label: str,
               progress: ProgressFn, host: str = "", cache: ParseCache | None = None,
               ) -> tuple[list[Experiment], list[SourceError], dict[str, Any]]:
    """Scan every job dir under `roots` with its scanner (made by `make(job)` the first time);
    the scanners of job dirs that are gone are dropped. A root that cannot be read is an error
    of its own (`root_failed`); a parse cache that turned itself off is said too."""
    def where(path: str) -> str:
        return f"{host}:{path}" if host else path

    errors: list[SourceError] = []
    jobs: list[str] = []
    for root in roots:
        try:
            found, unreadable = walk.find_jobs(fs, root)
        except walk.WalkError as exc:
            errors.append(SourceError(source=label, where=where(exc.where), message=exc.message, root_failed=True))
            continue
        errors += [SourceError(source=label, where=where(p), message=f"cannot read: {why}", unreadable=True)
                   for p, why in unreadable]
        if not found and not unreadable:
            errors.append(SourceError(source=label, where=where(root), message="no Harbor job dirs found"))
        jobs += found
    experiments: list[Experiment] = []
    stats: dict[str, Any] = {"trial_dirs": 0, "files_read": 0, "cache_hits": 0, "verified": 0}
    for job in jobs:
        scanner = scanners.get(job)
        if scanner is None:
            scanner = scanners[job] = make(job)
        try:
            exp, st = scanner.scan(label, progress)
        except OSError as exc:
            errors.append(SourceError(source=label, where=where(job), message=str(exc) or type(exc).__name__))
            continue
        experiments.append(exp)
        for k in ("trial_dirs", "files_read", "cache_hits", "verified"):
            stats[k] += st.get(k, 0)
    for gone in set(scanners) - set(jobs):
        del scanners[gone]
    if cache is not None and cache.problem:
        errors.append(SourceError(source=label, where=where(roots[0]),
                                  message=f"{cache.problem}; the parse cache is off, so every file is read"))
    return experiments, errors, stats


class HarborSource:
    """One or more local paths, each a job dir or a folder of job dirs.

    `cache=False` (`--no-cache`) reads every file in a new process; otherwise the persistent
    parse cache of this root is used. `verify_window_s` bounds how long a finished trial goes
    without being checked against its files between scans (0: every scan checks them all)."""

    trial_files = TRIAL_FILES
    kind = "harbor"

    def __init__(self, root: str | Path, policy: Policy | None = None, label: str | None = None, *,
                 cache: bool | ParseCache = True, verify_window_s: float = DEFAULT_VERIFY_WINDOW_S) -> None:
        self.root = os.path.abspath(os.path.expanduser(str(root)))
        self.policy = policy or Policy()
        self.label = label or self.root
        self.verify_window_s = verify_window_s
        self.cache: ParseCache | None = (cache if isinstance(cache, ParseCache)
                                         else ParseCache(self.root) if cache else None)
        self.walk_fs = walk.LocalWalkFS()
        self._scanners: dict[str, HarborScanner] = {}
        self._present: set[str] | None = None  # the job dirs the last scan found
        self._fs = LocalFS()

    async def evidence(self, exp: Experiment, trial: Trial) -> TrialEvidence:
        return await read_evidence(self.fs(), exp.path, trial)

    def fs(self) -> JobFS:
        return self._fs

    def runner(self) -> Runner:
        """Where commands on these job dirs run (a resume, a re-run): this machine."""
        return LocalRunner()

    def verify_all(self) -> None:
        """The next scan checks every trial against its files, not only the ones due."""
        for scanner in self._scanners.values():
            scanner.verify_all()

    def scan_sync(self, progress: ProgressFn = no_progress) -> Snapshot:
        taken = datetime.now(UTC)

        def make(job: str) -> HarborScanner:
            return HarborScanner(self.walk_fs, job, self.policy, self.cache, self.verify_window_s)

        experiments, errors, stats = scan_roots(self.walk_fs, [self.root], self._scanners, make, self.label, progress,
                                                cache=self.cache)
        if errors and errors[0].root_failed:
            raise SourceUnavailable(errors[0].where, errors[0].message)
        present = set(self._scanners) | {e.where for e in errors if e.unreadable}
        if self.cache is not None and present != self._present:
            self._present = present
            self.cache.forget_jobs_except(present)  # job dirs gone from the root leave the cache
        return Snapshot(source=self.label, taken_at=taken, experiments=experiments, errors=errors, stats=stats)

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        async with local_scan_turn():
            return await asyncio.to_thread(self.scan_sync, progress or no_progress)

    async def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
