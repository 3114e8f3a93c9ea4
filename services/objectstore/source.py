"""Harbor job dirs in a bucket (`gs://bucket/prefix`, `s3://bucket/prefix`): the same scan as
local disk (services/harbor/source.py `scan_roots`, the one walk and scanner) over the bucket's
listing, and the same write path over `StoreFS`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from services.core.config import CommandConfig, CommandTemplate
from services.core.models import Experiment, Snapshot, SourceError, Trial
from services.core.policy import Policy
from services.core.source import ProgressFn, SourceUnavailable, TrialEvidence, no_progress
from services.harbor.cache import ParseCache
from services.harbor.evidence import TRIAL_FILES, read_evidence
from services.harbor.scan import DEFAULT_VERIFY_WINDOW_S, HarborScanner
from services.harbor.source import scan_roots
from services.objectstore.fs import Moves, StoreFS, StoreWalkFS
from services.objectstore.store import Bucket
from services.transport.process import LocalRunner, Runner


class StoreSource:
    """One prefix of a bucket: a job, or a prefix of jobs. Experiments' paths are
    `/<bucket>/<key>`; the label is the URL."""

    trial_files = TRIAL_FILES

    def __init__(self, bucket: Bucket, prefix: str, policy: Policy | None = None, label: str | None = None, *,
                 cache: bool = True, commands: CommandConfig | None = None, status: CommandTemplate | None = None,
                 verify_window_s: float = DEFAULT_VERIFY_WINDOW_S) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.kind = f"harbor+{bucket.scheme}"
        self.url = f"{bucket.url}/{self.prefix}" if self.prefix else bucket.url
        self.label = label or self.url
        self.root = f"/{bucket.name}/{self.prefix}".rstrip("/")
        self.store = bucket.url  # what a plan and its record name the bucket by (gs://name)
        self.policy = policy or Policy()
        self.commands = commands
        self.status = status
        self.verify_window_s = verify_window_s
        # the parse cache's file is named after the root: one per bucket and prefix
        self.cache = ParseCache(f"/{bucket.scheme}:{self.root}") if cache else None
        self.moves = Moves()
        self.walk_fs = StoreWalkFS(bucket, self.moves)
        self._fs = StoreFS(bucket, self.moves)
        self._scanners: dict[str, HarborScanner] = {}

    def fs(self) -> StoreFS:
        return self._fs

    def runner(self) -> Runner:
        """A store's commands (its launcher) run on this machine."""
        return LocalRunner()

    async def evidence(self, exp: Experiment, trial: Trial) -> TrialEvidence:
        return await read_evidence(self._fs, exp.path, trial)

    def verify_all(self) -> None:
        for scanner in self._scanners.values():
            scanner.verify_all()

    def scan_sync(self, progress: ProgressFn = no_progress) -> Snapshot:
        taken = datetime.now(UTC)
        self.walk_fs.refresh()  # one listing per scan

        def make(job: str) -> HarborScanner:
            return HarborScanner(self.walk_fs, job, self.policy, self.cache, self.verify_window_s, self.kind)

        try:
            experiments, errors, stats = scan_roots(self.walk_fs, [self.root], self._scanners, make, self.label,
                                                    progress, cache=self.cache)
        except OSError as exc:
            raise SourceUnavailable(self.label, str(exc)) from None
        except Exception as exc:  # the client library's own errors: credentials, endpoint, network
            raise SourceUnavailable(self.label, f"{type(exc).__name__}: {exc}") from None
        if errors and errors[0].root_failed:
            raise SourceUnavailable(self.label, errors[0].message)
        if self.status is not None:
            from services.objectstore import status

            table, why = status.states(self.status, self.commands.cwd if self.commands else None)
            status.apply(experiments, table)
            if why:
                errors.append(SourceError(source=self.label, where=self.label, message=why))
        stats["requests"] = self.bucket.requests
        return Snapshot(source=self.label, taken_at=taken, experiments=experiments, errors=errors, stats=stats)

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        return await asyncio.to_thread(self.scan_sync, progress or no_progress)

    async def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
