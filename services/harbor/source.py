"""The embedded default source: Harbor job dirs on local disk, one scanner per job dir."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path

from services.core.models import Experiment, Snapshot, SourceError, Trial
from services.core.policy import Policy
from services.core.source import ProgressFn, TrialEvidence, no_progress
from services.harbor import walk
from services.harbor.cache import ParseCache
from services.harbor.evidence import TRIAL_FILES, read_evidence
from services.harbor.scan import DEFAULT_VERIFY_WINDOW_S, HarborScanner, find_job_dirs_and_unreadable
from services.transport.fs import JobFS, LocalFS
from services.transport.process import LocalRunner, Runner


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

    def replay_stamp(self, job_dir: str) -> tuple[str, str] | None:
        """How the audit replay (tui/batch_replay.py) tells this job unchanged: the stamp function
        and the stamp as the last scan found the job (its trial keys taken before reading); None
        when the job is not settled (a trial runs, a file is odd) or was not scanned."""
        scanner = self._scanners.get(job_dir)
        digest = scanner.settled_digest() if scanner is not None else None
        return (walk.STAMPER, walk.settled_stamp(digest, job_dir)) if digest is not None else None

    def scan_sync(self, progress: ProgressFn = no_progress) -> Snapshot:
        taken = datetime.now(UTC)
        job_dirs, unreadable = find_job_dirs_and_unreadable(self.root)
        experiments: list[Experiment] = []
        errors: list[SourceError] = [
            SourceError(source=self.label, where=path, message=f"cannot read: {why}", unreadable=True)
            for path, why in unreadable
        ]
        stats: dict[str, float] = {"trial_dirs": 0, "files_read": 0, "cache_hits": 0, "verified": 0}
        if not job_dirs and not unreadable:
            errors.append(SourceError(source=self.label, where=self.root, message="no Harbor job dirs found"))
        for job_dir in job_dirs:
            scanner = self._scanners.get(job_dir)
            if scanner is None:
                scanner = self._scanners[job_dir] = HarborScanner(
                    job_dir, self.policy, self.cache, verify_window_s=self.verify_window_s)
            try:
                exp, st = scanner.scan(self.label, progress)
            except OSError as exc:
                errors.append(SourceError(source=self.label, where=job_dir, message=str(exc)))
                continue
            experiments.append(exp)
            for k in stats:
                stats[k] += st.get(k, 0)
        for gone in set(self._scanners) - set(job_dirs):
            del self._scanners[gone]
        present = set(job_dirs) | {path for path, _ in unreadable}
        if self.cache is not None and present != self._present:
            self._present = present
            self.cache.forget_jobs_except(present)  # job dirs gone from the root leave the cache
        if self.cache is not None and self.cache.problem:
            stats["cache_problem"] = self.cache.problem  # type: ignore[assignment]
        return Snapshot(source=self.label, taken_at=taken, experiments=experiments, errors=errors, stats=stats)

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        return await asyncio.to_thread(self.scan_sync, progress or no_progress)

    async def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
