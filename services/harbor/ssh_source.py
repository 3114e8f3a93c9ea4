"""`harbor+ssh`: Harbor job dirs on a remote host, read with one remote command per scan.

The remote program is the walk itself (services/harbor/walk.py), sent as it is to the host's
python3 through a one-line bootstrap (nothing is written there); the request follows it on
stdin as JSON, so paths travel as data, never through a shell. The client sends per-bucket
digests of the keys it holds; the host sends the files of every trial whose bucket differs,
which go through the same parser and assembly as a local scan. A host without python3 is read
over SFTP with the same walk and scanner as local disk. SLURM state comes from one more
command; an unreachable host shows its last good Snapshot, marked stale.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
import time
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncssh

from services.core.followed import followed_on
from services.core.models import Experiment, Snapshot, SourceError, Trial
from services.core.policy import Policy
from services.core.source import ProgressFn, SourceUnavailable, TrialEvidence, no_progress, stale_copy
from services.harbor import walk
from services.harbor.evidence import TRIAL_FILES, read_evidence
from services.harbor.parse import load_json, trial_of
from services.harbor.scan import HarborScanner, job_experiment, loc_settled
from services.harbor.source import scan_roots
from services.transport.process import Runner, SSHRunner
from services.transport.sftp import SFTPFS, SFTPWalkFS
from services.transport.slurm import SlurmTracker
from services.transport.ssh import HostSpec, SSHPool, shared_pool

KIND = "harbor+ssh"
PYTHON_MISSING_RC = 127
# reads the program's length, then the program, from stdin, and runs it as __main__ (serve());
# the request follows it
BOOTSTRAP = ("import sys,zlib;n=int(sys.stdin.buffer.readline());"
             "exec(compile(zlib.decompress(sys.stdin.buffer.read(n)),'<evaldesk-walk>','exec'))")
_PROGRAM_Z = zlib.compress(Path(walk.__file__).read_bytes(), 9)


class ProtocolError(Exception):
    """The remote reply does not follow the protocol (truncated, garbled, wrong version)."""


def _key(raw: Any) -> int | None:
    return None if raw is None else int(raw)


@dataclass
class _Held:
    rkey: int | None
    ckey: int | None
    trial: Trial
    racy: bool


@dataclass
class _Job:
    trials: dict[str, _Held] = field(default_factory=dict)
    files: dict[str, tuple[int | None, bytes | None, str | None]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    n: int = 0


@dataclass
class RemoteScan:
    roots: dict[str, list[str]] = field(default_factory=dict)
    root_errors: dict[str, str] = field(default_factory=dict)
    job_errors: dict[str, str] = field(default_factory=dict)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    remote_seconds: float = 0.0
    python: str = ""
    trials_sent: int = 0


def _lines(stream: bytes) -> list[dict[str, Any]]:
    z = zlib.decompressobj()
    try:
        raw = z.decompress(stream)
    except zlib.error as exc:
        raise ProtocolError(f"reply is not a valid zlib stream: {exc}") from None
    if not z.eof:
        raise ProtocolError("reply ended early (connection dropped mid-scan?)")
    try:  # (a name that is not UTF-8 travels as a \\udcXX escape)
        return [load_json(line) for line in raw.splitlines() if line]
    except ValueError as exc:
        raise ProtocolError(f"reply is not JSON lines: {exc}") from None


class RemoteClient:
    """What earlier scans received; builds each request and applies each reply."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.jobs: dict[str, _Job] = {}

    def request(self, roots: list[str]) -> bytes:
        jobs: dict[str, Any] = {}
        for path, job in self.jobs.items():
            nb = walk.n_buckets(len(job.trials))
            groups: list[list[bytes]] = [[] for _ in range(nb)]
            for rel, held in job.trials.items():
                # a racy trial's bucket never matches: the host sends its files again
                fp = b"racy" if held.racy else walk.fingerprint(rel, held.rkey, held.ckey)
                groups[walk.bucket_of(rel, nb)].append(fp)
            files = {name: str(k) for name, (k, _, err) in job.files.items() if k is not None and err is None}
            jobs[path] = {"nb": nb, "dig": base64.b64encode(b"".join(walk.bucket_digest(g) for g in groups)).decode(),
                          "files": files}
        body = json.dumps({"v": walk.PROTOCOL, "roots": roots, "jobs": jobs}).encode("ascii")
        return str(len(_PROGRAM_Z)).encode() + b"\n" + _PROGRAM_Z + body

    def apply(self, stream: bytes, progress: ProgressFn = no_progress) -> RemoteScan:
        out = RemoteScan()
        seen: set[str] = set()
        job: _Job | None = None
        path = ""
        nb, now, done = 0, time.time(), False
        stale: set[int] | None = None
        got: set[str] = set()
        for msg in _lines(stream):
            t = msg.get("t")
            if t == "hello":
                if msg.get("v") != walk.PROTOCOL:
                    raise ProtocolError(f"remote program speaks version {msg.get('v')}")
                out.python, now = str(msg.get("py", "")), float(msg.get("now") or now)
            elif t == "root":
                if "err" in msg:
                    out.root_errors[msg["abs"]] = msg["err"]
                else:
                    out.roots[msg["abs"]] = list(msg["jobs"])
                    out.unreadable += [(str(p), str(why)) for p, why in msg.get("unreadable") or ()]
            elif t == "job":
                self._finish(path, job, nb, stale, got)
                path = msg["path"]
                seen.add(path)
                nb = int(msg.get("nb") or 0)
                old = self.jobs.get(path)
                job = self.jobs[path] = old if old is not None and nb else _Job()
                stale, got = (set(msg.get("stale") or ()) if nb else None), set()
                job.problems, job.n = list(msg.get("problems") or ()), int(msg["n"])
                files = {}
                for name, entry in (msg.get("files") or {}).items():
                    prev = job.files.get(name)
                    files[name] = prev if entry.get("same") and prev is not None else \
                        (_key(entry.get("k")), walk.unblob(entry.get("d")), entry.get("e"))
                job.files = files
                progress(len(seen), None, f"scanned {path}")
            elif t == "tr":
                if job is None:
                    raise ProtocolError("trial line before any job line")
                rel = msg["rel"]
                got.add(rel)
                loc = walk.Loc(rel, msg["name"], _key(msg.get("rk")), _key(msg.get("ck")), None)
                trial = trial_of(loc, (walk.unblob(msg.get("r")), msg.get("re")), (walk.unblob(msg.get("c")), None))
                job.trials[rel] = _Held(loc.rkey, loc.ckey, trial, not loc_settled(loc, now))
                out.trials_sent += 1
            elif t == "jerr":  # what was sent of that job is not all of it
                if path != msg["path"]:
                    self._finish(path, job, nb, stale, got)
                out.job_errors[msg["path"]] = str(msg.get("err"))
                self.jobs.pop(msg["path"], None)
                job, path = None, ""
            elif t == "done":
                out.remote_seconds, done = float(msg.get("seconds") or 0.0), True
        self._finish(path, job, nb, stale, got)
        if not done:
            raise ProtocolError("reply has no end marker")
        for gone in set(self.jobs) - seen:
            del self.jobs[gone]
        return out

    def _finish(self, path: str, job: _Job | None, nb: int, stale: set[int] | None, got: set[str]) -> None:
        if job is None:
            return
        if stale:
            for rel in [r for r in job.trials if r not in got and walk.bucket_of(r, nb) in stale]:
                del job.trials[rel]
        if len(job.trials) != job.n:  # a digest collision or a protocol slip: the next scan is cold
            del self.jobs[path]
            raise ProtocolError(f"{path}: expected {job.n} trials, assembled {len(job.trials)}")

    def experiment(self, path: str, label: str) -> Experiment:
        """The Experiment of one job dir, built as the local scanner builds it."""
        job = self.jobs[path]
        trials = [job.trials[rel].trial for rel in sorted(job.trials, key=lambda r: r.split("/"))]
        return job_experiment(path, job.files, trials, list(job.problems), self.policy, KIND, label)


class SSHHarborSource:
    trial_files = TRIAL_FILES
    kind = KIND

    def __init__(self, spec: HostSpec, paths: list[str], policy: Policy | None = None, label: str | None = None,
                 pool: SSHPool | None = None, python: str = "python3", timeout_s: float = 120.0,
                 slurm_job_id_key: str = "slurm_job_id", slurm_job_ids: dict[str, str] | None = None,
                 slurm: bool = True) -> None:
        if not paths:
            raise ValueError(f"{spec.label}: no remote paths to read")
        self.spec, self.paths = spec, list(paths)
        self.policy = policy or Policy()
        self.label = label or f"{spec.label}:{','.join(self.paths)}"
        self.pool = pool or shared_pool()
        self.python, self.timeout_s = python, timeout_s
        self.slurm_job_id_key, self.slurm_job_ids = slurm_job_id_key, dict(slurm_job_ids or {})
        self.slurm_enabled = slurm
        self.client = RemoteClient(self.policy)
        self.slurm = SlurmTracker()
        self.last_good: Snapshot | None = None
        self.failing_since: datetime | None = None
        self._fs: SFTPFS | None = None
        self._walk_fs: SFTPWalkFS | None = None  # set once the host turns out to have no python
        self._scanners: dict[str, HarborScanner] = {}

    @property
    def host(self) -> str:
        """The host the job dirs live on, as previews and records name it."""
        return self.spec.label

    @property
    def insecure_no_host_key_check(self) -> bool:
        """Shown by the UI next to the source: host keys are not being checked."""
        return self.spec.insecure_no_host_key_check

    def fs(self) -> SFTPFS:
        if self._fs is None:
            self._fs = SFTPFS(self.pool, self.spec)
        return self._fs

    async def evidence(self, exp: Experiment, trial: Trial) -> TrialEvidence:
        return await read_evidence(self.fs(), exp.path, trial)

    def runner(self) -> Runner:
        """Where commands on these job dirs run (a resume, a re-run): the host, over the pool."""
        return SSHRunner(self.pool, self.spec)

    async def _run(self, command: str, stdin: bytes = b"") -> tuple[int | None, bytes, bytes]:
        return await self.pool.run(self.spec, command, stdin, self.timeout_s)

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        try:
            snap = await self._scan(progress or no_progress)
        except SourceUnavailable as exc:
            if self.last_good is None:
                raise
            self.failing_since = self.failing_since or datetime.now(UTC)
            return stale_copy(self.last_good, self.failing_since, exc, self.label)
        self.failing_since = None
        self.last_good = snap
        return snap

    async def _scan(self, progress: ProgressFn) -> Snapshot:
        taken, t0 = datetime.now(UTC), time.perf_counter()
        host = self.spec.label
        progress(0, None, f"scanning {self.label}")
        if self._walk_fs is not None:
            return await self._scan_sftp(taken, t0, progress)
        request = self.client.request(self.paths)
        rc, out, err = await self._run(f"{shlex.quote(self.python)} -c {shlex.quote(BOOTSTRAP)}", request)
        if rc == PYTHON_MISSING_RC or (rc != 0 and b"not found" in err and not out):
            # no Python on the host: the same walk over SFTP, slower, with the same figures
            self._walk_fs = SFTPWalkFS(self.fs(), asyncio.get_running_loop(), timeout_s=self.timeout_s)
            return await self._scan_sftp(taken, t0, progress)
        try:
            result = self.client.apply(out, progress)
        except ProtocolError as exc:
            last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            detail = f"; remote said: {last[0][:200]}" if last[0] else ""
            if rc is None:
                self.pool.mark_broken(self.spec, "connection dropped mid-scan")
                raise SourceUnavailable(host, f"connection dropped mid-scan ({exc})") from None
            raise SourceUnavailable(host, f"remote scan failed (exit {rc}): {exc}{detail}") from None
        errors = [SourceError(source=self.label, where=f"{host}:{root}", message=message)
                  for root, message in result.root_errors.items()]
        errors += [SourceError(source=self.label, where=f"{host}:{path}", message=f"cannot read: {why}",
                               unreadable=True) for path, why in result.unreadable]
        errors += [SourceError(source=self.label, where=f"{host}:{path}", message=message)
                   for path, message in result.job_errors.items()]
        if result.root_errors and not result.roots:
            first = next(iter(result.root_errors.items()))
            raise SourceUnavailable(f"{host}:{first[0]}", first[1])
        experiments: list[Experiment] = []
        for root, jobs in result.roots.items():
            if not jobs:
                errors.append(SourceError(source=self.label, where=f"{host}:{root}",
                                          message="no Harbor job dirs found"))
            experiments += [self.client.experiment(job, self.label) for job in jobs if job not in result.job_errors]
        round_trips = 1 + (await self._apply_slurm(experiments, errors) if self.slurm_enabled else 0)
        stats = {"round_trips": round_trips, "bytes_up": len(request), "bytes_down": len(out),
                 "trials_sent": result.trials_sent, "files_read": result.trials_sent,
                 "trial_dirs": sum(len(j.trials) for j in self.client.jobs.values()),
                 "remote_seconds": result.remote_seconds, "seconds": time.perf_counter() - t0,
                 "remote_python": result.python}
        return Snapshot(source=self.label, taken_at=taken, experiments=experiments, errors=errors, stats=stats)

    async def _scan_sftp(self, taken: datetime, t0: float, progress: ProgressFn) -> Snapshot:
        fs = self._walk_fs
        assert fs is not None
        host = self.spec.label
        before = fs.requests

        def make(job: str) -> HarborScanner:
            return HarborScanner(fs, job, self.policy, None, source=KIND)

        try:
            experiments, errors, stats = await asyncio.to_thread(
                scan_roots, fs, self.paths, self._scanners, make, self.label, progress, host)
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            self.pool.mark_broken(self.spec, "connection dropped mid-scan")
            raise SourceUnavailable(host, f"SFTP scan failed: {exc}") from None
        if errors and not experiments:
            raise SourceUnavailable(errors[0].where, errors[0].message)
        errors.insert(0, SourceError(source=self.label, where=host,
                                     message=f"{self.python} missing on {host}: reading over SFTP (slower)"))
        round_trips = fs.requests - before
        if self.slurm_enabled:
            round_trips += await self._apply_slurm(experiments, errors)
        stats.update({"mode": "sftp", "round_trips": round_trips, "seconds": time.perf_counter() - t0})
        return Snapshot(source=self.label, taken_at=taken, experiments=experiments, errors=errors, stats=stats)

    def _job_config(self, path: str) -> bytes | None:
        scanner = self._scanners.get(path)
        if scanner is not None:
            return scanner.job_files.get("config.json", (None, None, None))[1]
        job = self.client.jobs.get(path)
        return job.files.get("config.json", (None, None, None))[1] if job else None

    async def _apply_slurm(self, experiments: list[Experiment], errors: list[SourceError]) -> int:
        before = self.slurm.queries
        for message in await self.slurm.apply(self._run, experiments, self._job_config, followed_on(self.spec.label),
                                              self.slurm_job_id_key, self.slurm_job_ids):
            errors.append(SourceError(source=self.label, where=self.spec.label, message=message))
        return self.slurm.queries - before

    async def close(self) -> None:
        if self._fs is not None:
            await self._fs.close()

