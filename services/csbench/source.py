"""The csbench sources: local results dirs, and cloud campaigns by id through the CLI.

`ResultsSource` reads `run-plan` results dirs and `fetch --dest` dirs on local disk (a dir, or
a folder holding several beside Harbor job dirs). `CampaignSource` asks `csbench status` and
`csbench logs` about each campaign of the `[csbench]` config and reads what was fetched of it
under `<results_dir>/<campaign id>`. Both re-read only changed files, hash artifacts once per
(mtime, size), and read back evaldesk's own teardown records, which are the teardown marker.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime

from services.core.models import Experiment, Snapshot, SourceError, Trial
from services.core.source import ProgressFn, SourceUnavailable, TrialEvidence, no_progress
from services.csbench import assemble
from services.csbench.cli import CLIError, CsbenchCLI, Settings
from services.csbench.find import KIND, find_results_dirs
from services.csbench.formats import Record, StatusLine
from services.csbench.layout import DirReader, ResultsDir, read_bounded
from services.csbench.marks import Marks, read_marks
from services.csbench.model import CampaignExperiment, CampaignFacts, PlanExperiment
from services.csbench.submit import plan_experiment
from services.csbench.view import TRIAL_FILES, ViewFS, evidence_for, publish_all
from services.transport.fs import JobFS
from services.transport.process import display


def teardown_display(s: Settings, cid: str) -> str:
    return display(s.argv("teardown", cid), s.workdir)


def _records(rd: ResultsDir) -> list[tuple[str, Record]]:
    return [(rf.rel, rf.record) for rf in rd.records if rf.record is not None]


class _Base:
    kind = KIND
    trial_files = TRIAL_FILES

    def __init__(self, label: str) -> None:
        self.label = label
        self._fs = ViewFS()

    def fs(self) -> JobFS:
        return self._fs

    async def evidence(self, exp: Experiment, trial: Trial) -> TrialEvidence:
        return await evidence_for(exp, trial)

    async def close(self) -> None:
        return None

    @staticmethod
    def _logs_file(rd: ResultsDir) -> list[str] | None:
        if rd.controller_log is None:
            return None
        try:
            text = read_bounded(os.path.join(rd.path, rd.controller_log), 8 * 1024 * 1024)
        except OSError:
            return None
        return text.decode("utf-8", "replace").splitlines()


class ResultsSource(_Base):
    """Local csbench results dirs: `root` is one, or a folder holding some."""

    def __init__(self, root: str, label: str | None = None, *, skip: frozenset[str] = frozenset(),
                 campaign_ids: dict[str, str] | None = None, settings: Settings | None = None) -> None:
        self.root = os.path.abspath(os.path.expanduser(root))
        super().__init__(label or self.root)
        self.skip = skip
        self.campaign_ids = dict(campaign_ids or {})  # results dir → campaign id, from the config
        self.settings = settings
        self._readers: dict[str, DirReader] = {}

    def _read_sync(self, progress: ProgressFn) -> list[tuple[str, DirReader, ResultsDir]]:
        if not os.path.isdir(self.root):
            raise SourceUnavailable(self.root, "no such directory" if not os.path.exists(self.root)
                                    else "not a directory")
        dirs = find_results_dirs(self.root, self.skip)
        out = []
        for n, d in enumerate(dirs):
            progress(n, len(dirs), f"reading {os.path.basename(d)}")
            reader = self._readers.get(d) or self._readers.setdefault(d, DirReader(d))
            out.append((d, reader, reader.read()))
        for gone in set(self._readers) - set(dirs):
            del self._readers[gone]
        return out

    def _assemble_sync(self, read: list[tuple[str, DirReader, ResultsDir]], marks: dict[str, Marks],
                       now: datetime) -> tuple[list[CampaignExperiment], list[SourceError]]:
        experiments: list[CampaignExperiment] = []
        errors: list[SourceError] = []
        if not read:
            errors.append(SourceError(source=self.label, where=self.root, message="no csbench results dirs found"))
        for d, reader, rd in read:
            mark = marks.get(d, Marks())
            found = assemble.results_dir_experiments(rd, self.label, reader.inspect, now,
                                                     campaign_id=self.campaign_ids.get(d), fetch=mark.fetch)
            if not found:
                # csbench's own `progress` answers the same for such a dir
                errors.append(SourceError(source=self.label, where=d, message=(
                    f"{assemble.NO_CAMPAIGNS.format(dir=d)} (csbench progress), and no record either")))
            logs = self._logs_file(rd)
            for exp in found:
                exp.facts.logs, exp.facts.logs_from = logs, rd.controller_log
                exp.facts.config_known = self.settings is not None
                if exp.facts.cloud:
                    exp.facts.teardown, exp.facts.teardown_problem = mark.teardown, mark.teardown_problem
                if self.settings is not None and exp.facts.cloud and exp.facts.campaign_id:
                    exp.facts.teardown_command = teardown_display(self.settings, exp.facts.campaign_id)
            experiments += found
        return experiments, errors

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        taken = datetime.now(UTC)
        read = await asyncio.to_thread(self._read_sync, progress or no_progress)
        marks = {d: await read_marks(d) for d, _, _ in read}
        experiments, errors = await asyncio.to_thread(self._assemble_sync, read, marks, datetime.now(UTC))
        publish_all(self._fs, experiments)
        stats = {"results_dirs": float(len(read)), "files_read": float(sum(rd.files_read for _, _, rd in read))}
        return Snapshot(source=self.label, taken_at=taken, experiments=list(experiments), errors=errors,
                        stats=stats)


class CampaignSource(_Base):
    """Cloud campaigns by id: `csbench status` / `logs` per scan, fetched records from disk; the
    submit plans of the config, each with its preflight, and the campaigns evaldesk submitted
    (read back from the submit records in the results dir)."""

    def __init__(self, settings: Settings, campaigns: list[str] | None = None, *, label: str = "csbench",
                 cli: CsbenchCLI | None = None, plans: list[str] | None = None, submitted: bool = True) -> None:
        super().__init__(label)
        self.settings = settings
        self.campaigns = list(dict.fromkeys(campaigns if campaigns is not None else settings.campaigns))
        self.plans = list(dict.fromkeys(plans if plans is not None else settings.plans))
        self.submitted = submitted  # follow the campaigns evaldesk submitted too
        self.cli = cli or CsbenchCLI(settings)
        self._readers: dict[str, DirReader] = {}
        self._last: dict[str, tuple[StatusLine, list[str] | None, datetime]] = {}

    async def _one(self, cid: str) -> tuple[CampaignExperiment, list[SourceError]]:
        errors: list[SourceError] = []
        problems: list[str] = []
        status: StatusLine | None = None
        logs: list[str] | None = None
        status_error = None
        stale_since = None
        try:
            status = await self.cli.status(cid)
            try:
                logs = await self.cli.logs(cid)
            except CLIError as exc:
                problems.append(f"csbench logs: {exc}")
            self._last[cid] = (status, logs, datetime.now(UTC))
        except CLIError as exc:
            status_error = str(exc)
            errors.append(SourceError(source=self.label, where=cid, message=status_error))
            if cid in self._last:
                status, logs, stale_since = self._last[cid]
                problems.append(f"csbench status failed ({status_error}); showing what it said at "
                                f"{stale_since:%H:%M:%S}")
            else:
                problems.append(f"csbench status failed: {status_error}")
        path = self.settings.campaign_dir(cid)
        marks = await read_marks(path)
        if status is None and marks.fetch is not None and marks.fetch.status is not None:
            # what it said when evaldesk fetched it, dated: better than nothing, never taken as now
            status = marks.fetch.status
            stale_since = marks.fetch.at
            problems.append(f"showing what csbench status said when evaldesk fetched it "
                            f"({marks.fetch.at:%Y-%m-%d %H:%M} UTC, record {marks.fetch.record_id})"
                            if marks.fetch.at else "showing what csbench status said at the last fetch")
        rd: ResultsDir | None = None
        check: assemble.ArtifactsFn = assemble.no_artifacts
        if os.path.isdir(path):
            reader = self._readers.get(path) or self._readers.setdefault(path, DirReader(path))
            rd = await asyncio.to_thread(reader.read)
            problems += rd.problems
            check = reader.inspect
        if logs is None and rd is not None:
            logs = self._logs_file(rd)
        facts = CampaignFacts(
            origin="cloud", campaign_id=cid, results_dir=path, cloud=True, expect_real=self.settings.expect_real,
            status=status, status_error=status_error, logs=logs,
            logs_from="csbench logs" if cid in self._last and logs is not None else (
                rd.controller_log if rd is not None else None),
            config_known=True, teardown_command=teardown_display(self.settings, cid),
        )
        if rd is not None:
            records = _records(rd)
            facts.platform = assemble.join_names([r.identity.adapter for _, r in records]) or ""
            facts.domain = assemble.join_names([r.identity.domain for _, r in records]) or ""
        facts.teardown, facts.teardown_problem, facts.fetch = marks.teardown, marks.teardown_problem, marks.fetch
        exp = assemble.cloud_experiment(cid, path, self.label, facts, rd, check,
                                        problems)
        exp.stale_since = stale_since if status_error else None
        return exp, errors

    async def followed(self) -> list[str]:
        """The configured campaigns, then those evaldesk submitted (newest first)."""
        ids = list(self.campaigns)
        if self.submitted:
            ids += [m.campaign_id for m in (await read_marks(self.settings.results_dir)).submits if m.campaign_id]
        return list(dict.fromkeys(ids))

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        taken = datetime.now(UTC)
        progress = progress or no_progress
        ids = await self.followed()
        progress(0, len(ids), f"csbench status of {len(ids)} campaign(s)")
        sem = asyncio.Semaphore(4)

        async def bounded(cid: str) -> tuple[CampaignExperiment, list[SourceError]]:
            async with sem:
                return await self._one(cid)

        results = await asyncio.gather(*(bounded(c) for c in ids))
        experiments: list[Experiment] = [e for e, _ in results]
        errors = [err for _, errs in results for err in errs]
        plans: list[PlanExperiment] = [await plan_experiment(self.settings, p, self.label) for p in self.plans]
        publish_all(self._fs, experiments)
        return Snapshot(source=self.label, taken_at=taken, experiments=[*plans, *experiments], errors=errors,
                        stats={"campaigns": float(len(ids)), "plans": float(len(plans))})
