"""The embedded default source: Harbor job dirs on local disk, one scanner per job dir."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path

from services.core.models import Experiment, Snapshot, SourceError, Trial
from services.core.policy import Policy
from services.core.source import ProgressFn, TrialEvidence, no_progress
from services.harbor.evidence import TRIAL_FILES, read_evidence
from services.harbor.scan import HarborScanner, find_job_dirs
from services.transport.fs import JobFS, LocalFS
from services.transport.process import LocalRunner, Runner


class HarborSource:
    """One or more local paths, each a job dir or a folder of job dirs."""

    trial_files = TRIAL_FILES
    kind = "harbor"

    def __init__(self, root: str | Path, policy: Policy | None = None, label: str | None = None) -> None:
        self.root = os.path.abspath(os.path.expanduser(str(root)))
        self.policy = policy or Policy()
        self.label = label or self.root
        self._scanners: dict[str, HarborScanner] = {}
        self._fs = LocalFS()

    async def evidence(self, exp: Experiment, trial: Trial) -> TrialEvidence:
        return await read_evidence(self.fs(), exp.path, trial)

    def fs(self) -> JobFS:
        return self._fs

    def runner(self) -> Runner:
        """Where commands on these job dirs run (a resume, a re-run): this machine."""
        return LocalRunner()

    def scan_sync(self, progress: ProgressFn = no_progress) -> Snapshot:
        taken = datetime.now(UTC)
        job_dirs = find_job_dirs(self.root)
        experiments: list[Experiment] = []
        errors: list[SourceError] = []
        stats: dict[str, float] = {"trial_dirs": 0, "files_read": 0}
        if not job_dirs:
            errors.append(SourceError(source=self.label, where=self.root, message="no Harbor job dirs found"))
        for job_dir in job_dirs:
            scanner = self._scanners.get(job_dir)
            if scanner is None:
                scanner = self._scanners[job_dir] = HarborScanner(job_dir, self.policy)
            try:
                exp, st = scanner.scan(self.label, progress)
            except OSError as exc:
                errors.append(SourceError(source=self.label, where=job_dir, message=str(exc)))
                continue
            experiments.append(exp)
            stats["trial_dirs"] += st["trial_dirs"]
            stats["files_read"] += st["files_read"]
        for gone in set(self._scanners) - set(job_dirs):
            del self._scanners[gone]
        return Snapshot(source=self.label, taken_at=taken, experiments=experiments, errors=errors, stats=stats)

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        return await asyncio.to_thread(self.scan_sync, progress or no_progress)

    async def close(self) -> None:
        return None
