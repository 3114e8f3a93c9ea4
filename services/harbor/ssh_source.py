"""`harbor+ssh`: Harbor job dirs on a remote host, read with one remote command per scan.

The scan runs services.harbor.remote_program's program through the host's pooled connection, feeds the
bytes through the same parse/assemble code as the local source, then (only when some eval
names a SLURM job that is not known to be over) asks the scheduler in one more command.

When the host cannot be reached, the last good Snapshot is returned with every experiment's
`stale_since` set and the error listed; with no good Snapshot yet, SourceUnavailable is raised.
The pool reconnects with backoff on a later scan.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import asyncssh

from services.core.followed import followed_on
from services.core.models import Experiment, Snapshot, SourceError, Trial
from services.core.policy import Policy
from services.core.source import ProgressFn, SourceUnavailable, TrialEvidence
from services.harbor.evidence import TRIAL_FILES, read_evidence
from services.harbor.remote_program import PYTHON_MISSING_RC, ProtocolError, RemoteScanClient, remote_command
from services.harbor.sftp_source import SFTPWalker
from services.transport.fs import JobFS
from services.transport.process import Runner, SSHRunner
from services.transport.sftp import SFTPFS
from services.transport.slurm import SlurmToolsMissing, SlurmTracker, apply_state, job_id_for
from services.transport.ssh import HostSpec, SSHPool, shared_pool

KIND = "harbor+ssh"


class SSHHarborSource:
    trial_files = TRIAL_FILES
    kind = KIND

    def __init__(
        self,
        spec: HostSpec,
        paths: list[str],
        policy: Policy | None = None,
        label: str | None = None,
        pool: SSHPool | None = None,
        python: str = "python3",
        timeout_s: float = 120.0,
        slurm_job_id_key: str = "slurm_job_id",
        slurm_job_ids: dict[str, str] | None = None,
        slurm: bool = True,
    ) -> None:
        if not paths:
            raise ValueError(f"{spec.label}: no remote paths to read")
        self.spec = spec
        self.paths = list(paths)
        self.policy = policy or Policy()
        self.label = label or f"{spec.label}:{','.join(self.paths)}"
        self.pool = pool or shared_pool()
        self.python = python
        self.timeout_s = timeout_s
        self.slurm_job_id_key = slurm_job_id_key
        self.slurm_job_ids = dict(slurm_job_ids or {})
        self.slurm_enabled = slurm
        self.client = RemoteScanClient(self.policy)
        self.slurm = SlurmTracker()
        self.last_good: Snapshot | None = None
        self.failing_since: datetime | None = None
        self._fs: SFTPFS | None = None
        self._walker: SFTPWalker | None = None  # set once the host turns out to have no python

    @property
    def host(self) -> str:
        """The host the job dirs live on, as previews and records name it."""
        return self.spec.label

    @property
    def insecure_no_host_key_check(self) -> bool:
        """Shown by the UI next to the source: host keys are not being checked."""
        return self.spec.insecure_no_host_key_check

    def _sftp_fs(self) -> SFTPFS:
        if self._fs is None:
            self._fs = SFTPFS(self.pool, self.spec)
        return self._fs

    async def evidence(self, exp: Experiment, trial: Trial) -> TrialEvidence:
        return await read_evidence(self.fs(), exp.path, trial)

    def fs(self) -> JobFS:
        if self._fs is None:
            self._fs = SFTPFS(self.pool, self.spec)
        return self._fs

    def runner(self) -> Runner:
        """Where commands on these job dirs run (a resume, a re-run): the host, over the pool."""
        return SSHRunner(self.pool, self.spec)

    async def _run(self, command: str, stdin: bytes = b"") -> tuple[int | None, bytes, bytes]:
        return await self.pool.run(self.spec, command, stdin, self.timeout_s)

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        try:
            snap = await self._scan(progress)
        except SourceUnavailable as exc:
            if self.last_good is None:
                raise
            if self.failing_since is None:
                self.failing_since = datetime.now(UTC)
            stale = [e.model_copy(update={"stale_since": self.failing_since}) for e in self.last_good.experiments]
            for old, new in zip(self.last_good.experiments, stale, strict=True):
                new.trials = old.trials
            err = SourceError(source=self.label, where=exc.where, message=exc.message)
            return self.last_good.model_copy(
                update={"experiments": stale, "errors": [*self.last_good.errors, err],
                        "stats": {**self.last_good.stats, "stale": True}}
            )
        self.failing_since = None
        self.last_good = snap
        return snap

    async def _scan(self, progress: ProgressFn | None) -> Snapshot:
        taken = datetime.now(UTC)
        t0 = time.perf_counter()
        request = self.client.request_bytes(self.paths)
        if progress:
            progress(0, None, f"scanning {self.label}")
        host = self.spec.label
        if self._walker is not None:
            return await self._scan_over_sftp(taken, t0)
        rc, out, err = await self._run(remote_command(self.python), request)
        if rc == PYTHON_MISSING_RC or (rc != 0 and b"not found" in err and not out):
            # no Python on the host: read it through SFTP instead, slower but with the same figures
            self._walker = SFTPWalker(self._sftp_fs().client, self.policy, host)
            return await self._scan_over_sftp(taken, t0)
        try:
            result = self.client.decode(out, (lambda n, m: progress(n, None, m)) if progress else None)
        except ProtocolError as exc:
            last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            detail = f"; remote said: {last[0][:200]}" if last[0] else ""
            if rc is None:
                self.pool.mark_broken(self.spec, "connection dropped mid-scan")
                raise SourceUnavailable(host, f"connection dropped mid-scan ({exc})") from None
            raise SourceUnavailable(host, f"remote scan failed (exit {rc}): {exc}{detail}") from None
        errors: list[SourceError] = []
        experiments: list[Experiment] = []
        for root, message in result.root_errors.items():
            errors.append(SourceError(source=self.label, where=f"{host}:{root}", message=message))
        for path, why in result.unreadable:
            errors.append(SourceError(source=self.label, where=f"{host}:{path}", message=f"cannot read: {why}",
                                      unreadable=True))
        if result.root_errors and not result.roots:
            first = next(iter(result.root_errors.items()))
            raise SourceUnavailable(f"{host}:{first[0]}", first[1])
        for root, jobs in result.roots.items():
            if not jobs:
                where = f"{host}:{root}"
                errors.append(SourceError(source=self.label, where=where, message="no Harbor job dirs found"))
            for job in jobs:
                experiments.append(self.client.experiment(job, KIND, self.label))
        round_trips = 1
        if self.slurm_enabled:
            round_trips += await self._apply_slurm(experiments, errors)
        stats = {
            "round_trips": round_trips,
            "bytes_up": len(request),
            "bytes_down": len(out),
            "trials_sent": result.trials_sent,
            "trial_dirs": sum(len(j.trials) for j in self.client.jobs.values()),
            "files_read": result.trials_sent,
            "remote_seconds": result.remote_seconds,
            "seconds": time.perf_counter() - t0,
            "remote_python": result.python,
        }
        return Snapshot(source=self.label, taken_at=taken, experiments=experiments, errors=errors, stats=stats)

    async def _scan_over_sftp(self, taken: datetime, t0: float) -> Snapshot:
        walker = self._walker
        assert walker is not None
        host = self.spec.label
        before_req, before_files = walker.requests, walker.files_read
        try:
            experiments, errors = await walker.scan(self.paths, KIND, self.label)
        except (OSError, asyncssh.Error) as exc:
            self.pool.mark_broken(self.spec, "connection dropped mid-scan")
            raise SourceUnavailable(host, f"SFTP scan failed: {exc}") from None
        if errors and not experiments:
            raise SourceUnavailable(errors[0].where, errors[0].message)
        errors.insert(0, SourceError(source=self.label, where=host,
                                     message=f"{self.python} missing on {host}: reading over SFTP (slower)"))
        round_trips = walker.requests - before_req
        if self.slurm_enabled:
            round_trips += await self._apply_slurm(experiments, errors)
        stats = {
            "mode": "sftp",
            "round_trips": round_trips,
            "files_read": walker.files_read - before_files,
            "trial_dirs": sum(len(e.trials) for e in experiments),
            "seconds": time.perf_counter() - t0,
        }
        return Snapshot(source=self.label, taken_at=taken, experiments=experiments, errors=errors, stats=stats)

    async def _apply_slurm(self, experiments: list[Experiment], errors: list[SourceError]) -> int:
        ids: dict[str, list[Experiment]] = {}
        # a job evaldesk re-submitted (resume, re-run) is followed under its newest SLURM job
        followed = followed_on(self.spec.label)
        for exp in experiments:
            if self._walker is not None:
                cfg_bytes = self._walker.job_config(exp.path)
            else:
                cache = self.client.jobs.get(exp.path)
                cfg = cache.files.get("config.json") if cache else None
                cfg_bytes = cfg.data if cfg else None
            jid = followed.get(exp.path) or job_id_for(exp, cfg_bytes, self.slurm_job_id_key, self.slurm_job_ids)
            if jid:
                exp.scheduler_job_id = jid
                ids.setdefault(jid, []).append(exp)
        if not ids:
            return 0
        before = self.slurm.queries
        try:
            states = await self.slurm.states(self._run, ids)
        except SlurmToolsMissing:
            errors.append(SourceError(source=self.label, where=self.spec.label,
                                      message="SLURM job ids found but no sacct/squeue/scontrol on the host"))
            return self.slurm.queries - before
        except SourceUnavailable as exc:
            errors.append(SourceError(source=self.label, where=exc.where, message=f"SLURM state: {exc.message}"))
            return self.slurm.queries - before
        for jid, exps in ids.items():
            js = states.get(jid)
            if js is None:
                continue
            for exp in exps:
                apply_state(exp, js)
        return self.slurm.queries - before

    async def close(self) -> None:
        if self._fs is not None:
            await self._fs.close()
