"""Reading Harbor job dirs over SFTP alone, for hosts that have no python3.

The remote program (services/remote_scan.py) needs a Python on the host. Without one, evaldesk
still reads the host through the SFTP subsystem, which every OpenSSH server offers and which
takes paths as data (no shell at all): one directory listing per trial dir, pipelined, and file
contents only for files whose (mtime, size) changed since the last scan. It is slower than the
one-command scan, but applies the same discovery rules as the local scanner
(services/sources/harbor.py) and the same parsing and assembly, so the figures are the same.
"""

from __future__ import annotations

import asyncio
import posixpath
import stat as st_mod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import asyncssh
import orjson

from services.core.models import Experiment, SourceError, Trial
from services.core.policy import Policy
from services.harbor.assemble import assemble_experiment
from services.harbor.fast_record import MAX_RESULT_BYTES
from services.harbor.files import parse_trial
from services.harbor.scan import job_files_say
from services.harbor.walk import QUARANTINE_DIR

_FileKey = tuple[int, int] | None  # (mtime in ns, size), as the local scanner keys files
_JOB_FILES = ("config.json", "result.json", "eval_config.json", "meta.env")
_T = TypeVar("_T")


@dataclass
class _Entry:
    name: str
    kind: str  # "dir", "file", "link", "other"
    key: _FileKey


@dataclass
class _CachedTrial:
    rkey: _FileKey
    ckey: _FileKey
    trial: Trial


@dataclass
class _JobState:
    trials: dict[str, _CachedTrial] = field(default_factory=dict)
    files: dict[str, tuple[_FileKey, bytes | None]] = field(default_factory=dict)


def _entry(name: str, attrs: asyncssh.SFTPAttrs) -> _Entry:
    perms = attrs.permissions or 0
    if st_mod.S_ISLNK(perms):
        kind = "link"
    elif st_mod.S_ISDIR(perms):
        kind = "dir"
    elif st_mod.S_ISREG(perms):
        kind = "file"
    else:
        kind = "other"
    ns = getattr(attrs, "mtime_ns", None)
    # SFTP v3 (OpenSSH) carries whole seconds only
    mtime_ns = int(ns) if ns is not None else int(attrs.mtime or 0) * 10**9
    key: _FileKey = (int(mtime_ns), int(attrs.size or 0)) if kind == "file" else (-1, -1)
    return _Entry(name, kind, key)


class SFTPWalker:
    """Incremental reader of job dirs through one SFTP session; one per source."""

    def __init__(self, sftp: Callable[[], Awaitable[asyncssh.SFTPClient]], policy: Policy, host: str,
                 concurrency: int = 64) -> None:
        self._sftp = sftp
        self.policy = policy
        self.host = host
        self._sem = asyncio.Semaphore(concurrency)
        self._jobs: dict[str, _JobState] = {}
        self.requests = 0
        self.files_read = 0
        self._key_cache: dict[str, tuple[_FileKey, frozenset[str]]] = {}
        self._denied: dict[tuple[str, str], str] = {}  # (job, rel) → why the trial dir cannot be read

    async def _limited(self, make: Callable[[], Awaitable[_T]]) -> _T:
        async with self._sem:
            self.requests += 1
            return await make()

    async def _list(self, path: str) -> list[_Entry] | None:
        listing = await self._list_or_why(path)
        return None if isinstance(listing, str) else listing

    async def _list_or_why(self, path: str) -> list[_Entry] | str:
        """The sorted listing, or why it cannot be had (as the local scanner words it)."""
        sftp = await self._sftp()
        try:
            names = await self._limited(lambda: sftp.readdir(path))
        except asyncssh.SFTPNoSuchFile:
            return "No such file or directory"
        except asyncssh.SFTPPermissionDenied:
            return "Permission denied"
        except asyncssh.SFTPError as exc:
            return str(exc.reason or exc)
        return sorted((_entry(str(n.filename), n.attrs) for n in names if n.filename not in (".", "..")),
                      key=lambda e: e.name)

    async def _read(self, path: str, key: _FileKey) -> tuple[bytes | None, str | None]:
        if key is not None and key[1] > MAX_RESULT_BYTES:
            return None, f"{posixpath.basename(path)} is larger than {MAX_RESULT_BYTES >> 20} MiB"
        sftp = await self._sftp()

        async def read() -> bytes:
            async with sftp.open(path, "rb") as fh:
                data = await fh.read()
            return data if isinstance(data, bytes) else data.encode()

        try:
            data = await self._limited(read)
        except asyncssh.SFTPNoSuchFile:
            return None, None
        except asyncssh.SFTPError as exc:
            return None, f"{posixpath.basename(path)} unreadable: {exc.reason}"
        self.files_read += 1
        return data, None

    async def _realpath(self, path: str) -> str:
        sftp = await self._sftp()
        try:
            return str(await self._limited(lambda: sftp.realpath(path)))
        except asyncssh.SFTPError:
            return path

    async def _resolve(self, path: str, e: _Entry) -> _Entry:
        """A symlinked result.json or config.json is read through, as the local scanner does."""
        if e.kind != "link":
            return e
        sftp = await self._sftp()
        try:
            attrs = await self._limited(lambda: sftp.stat(path))
        except asyncssh.SFTPError:
            return _Entry(e.name, "dangling", (-2, -2))
        return _entry(e.name, attrs)

    async def _keys(self, path: str, entries: list[_Entry]) -> set[str]:
        keys: set[str] = set()
        for e in entries:
            if e.name in ("result.json", "config.json") and e.kind == "file":
                file = posixpath.join(path, e.name)
                cached = self._key_cache.get(file)
                if cached is not None and cached[0] == e.key:
                    keys |= cached[1]
                    continue
                data, _ = await self._read(file, e.key)
                try:
                    doc = orjson.loads(data or b"")
                except orjson.JSONDecodeError:
                    doc = None
                found = frozenset(doc) if isinstance(doc, dict) else frozenset()
                # classifying a dir as job or trial reads its files once, not on every scan
                self._key_cache[file] = (e.key, found)
                keys |= found
        return keys

    async def _is_job_dir(self, path: str, entries: list[_Entry]) -> bool:
        said = job_files_say(await self._keys(path, entries))
        if said is not None:
            return said
        for e in entries:
            if e.kind != "dir":
                continue
            child = await self._list(posixpath.join(path, e.name)) or []
            if _has_trial_files(child):
                return job_files_say(await self._keys(posixpath.join(path, e.name), child)) is not True
        return False

    async def find_job_dirs(self, root: str, unreadable: list[tuple[str, str]] | None = None
                            ) -> list[str] | str:
        """The job dirs under `root` (child dirs that cannot be read go to `unreadable`), or why
        `root` itself cannot be read."""
        entries = await self._list_or_why(root)
        if isinstance(entries, str):
            return "no such directory" if entries == "No such file or directory" else f"cannot read: {entries}"
        if await self._is_job_dir(root, entries):
            return [root]
        jobs = []
        for e in entries:
            if e.name.startswith(".") or e.kind != "dir":
                continue
            path = posixpath.join(root, e.name)
            listing = await self._list_or_why(path)
            if isinstance(listing, str):
                if unreadable is not None:
                    unreadable.append((path, listing))
                continue
            if await self._is_job_dir(path, listing):
                jobs.append(path)
        return jobs

    async def _discover(self, job: str, top: list[_Entry], problems: list[str]) -> list[tuple[str, str, list[_Entry]]]:
        """(rel, name, listing) of every trial dir: depth 1, and staged copies one level deeper."""
        dirs = [e for e in top if e.name != QUARANTINE_DIR]
        listings = await asyncio.gather(*(self._list_or_why(posixpath.join(job, e.name)) for e in dirs
                                          if e.kind == "dir"))
        by_name: dict[str, list[_Entry]] = {}
        denied: dict[str, str] = {}
        for d, lst in zip([d for d in dirs if d.kind == "dir"], listings, strict=True):
            if isinstance(lst, str):
                if lst == "Permission denied":
                    denied[d.name] = lst
            else:
                by_name[d.name] = lst
        found: list[tuple[str, str, list[_Entry]]] = []
        staged: list[str] = []
        real_job: str | None = None
        for e in dirs:
            if e.kind == "link":
                if real_job is None:
                    real_job = await self._realpath(job)
                target = await self._realpath(posixpath.join(job, e.name))
                if not (target + "/").startswith(real_job.rstrip("/") + "/"):
                    problems.append(f"{e.name}: symlink to {target}, outside the job dir; not followed")
                else:
                    problems.append(f"{e.name}: symlink inside the job dir; not followed (counted once)")
                continue
            if e.kind != "dir":
                continue
            if e.name in denied:
                # a dir we may not read: counted as an errored trial, as the local scanner does
                if not e.name.startswith("."):
                    self._denied[(job, e.name)] = f"trial dir unreadable: {denied[e.name]}"
                    found.append((e.name, e.name, []))
                continue
            listing = by_name.get(e.name) or []
            if _has_trial_files(listing):
                found.append((e.name, e.name, listing))
            elif not e.name.startswith("."):
                staged.append(e.name)
        for folder in staged:
            inner = by_name.get(folder) or []
            subs = [s for s in inner if s.kind == "dir"]
            for s in inner:
                if s.kind == "link":
                    problems.append(f"{folder}/{s.name}: symlink; not followed")
            sub_lists = await asyncio.gather(*(self._list_or_why(posixpath.join(job, folder, s.name)) for s in subs))
            for s, lst in zip(subs, sub_lists, strict=True):
                rel = f"{folder}/{s.name}"
                if lst == "Permission denied":
                    self._denied[(job, rel)] = f"trial dir unreadable: {lst}"
                    found.append((rel, s.name, []))
                elif isinstance(lst, list) and lst and _has_trial_files(lst):
                    found.append((rel, s.name, lst))
        return found

    async def scan_job(self, job: str, source: str, source_label: str) -> Experiment:
        problems: list[str] = []
        top = await self._list(job) or []
        state = self._jobs.setdefault(job, _JobState())
        self._denied = {k: v for k, v in self._denied.items() if k[0] != job}
        trial_dirs = await self._discover(job, top, problems)
        for rel, _, _ in trial_dirs:
            why = self._denied.get((job, rel))
            if why is not None:
                problems.append(f"{rel}: {why}; counted as errored")

        async def load(rel: str, name: str, listing: list[_Entry]) -> tuple[str, _CachedTrial]:
            denied = self._denied.get((job, rel))
            if denied is not None:
                return rel, _CachedTrial((-3, -3), None, parse_trial(rel, name, None, None, None, denied))
            base = posixpath.join(job, rel)
            files = {e.name: e for e in listing}
            r, c = files.get("result.json"), files.get("config.json")
            if r is not None:
                r = await self._resolve(posixpath.join(base, "result.json"), r)
            if c is not None:
                c = await self._resolve(posixpath.join(base, "config.json"), c)
            rkey, ckey = (r.key if r else None), (c.key if c else None)
            cached = state.trials.get(rel)
            if cached is not None and rkey is not None and cached.rkey == rkey:
                return rel, cached
            if cached is not None and cached.rkey == rkey and cached.ckey == ckey:
                return rel, cached
            rbytes: bytes | None = None
            rerr: str | None = None
            if r is not None and r.kind == "file":
                rbytes, rerr = await self._read(posixpath.join(base, "result.json"), rkey)
            elif r is not None and r.kind == "dangling":
                rerr = "result.json unreadable: a symlink to a missing file"
            elif r is not None:
                # never open a fifo or device: the read would block the server and the scan
                rerr = "result.json unreadable: " + ("Is a directory" if r.kind == "dir" else "not a regular file")
            cbytes = None
            if (rbytes is None or b'"task_name"' not in rbytes) and c is not None and c.kind == "file":
                cbytes, _ = await self._read(posixpath.join(base, "config.json"), ckey)
            mtime = max((k[0] for k in (rkey, ckey) if k is not None and k[0] >= 0), default=0) / 1e9 or None
            return rel, _CachedTrial(rkey, ckey, parse_trial(rel, name, rbytes, cbytes, mtime, rerr))

        loaded = await asyncio.gather(*(load(rel, name, lst) for rel, name, lst in trial_dirs))
        state.trials = dict(loaded)

        async def job_file(name: str, entries: Iterable[_Entry], folder: str = "") -> bytes | None:
            e = next((x for x in entries if x.name == name and x.kind == "file"), None)
            if e is None:
                return None
            cache_key = posixpath.join(folder, name)
            old = state.files.get(cache_key)
            if old is not None and old[0] == e.key:
                return old[1]
            data, err = await self._read(posixpath.join(job, folder, name), e.key)
            if err:
                problems.append(err)
            state.files[cache_key] = (e.key, data)
            return data

        files = {n: await job_file(n, top) for n in _JOB_FILES}
        eval_cfg = files["eval_config.json"]
        if eval_cfg is None and any(e.name == "configs" and e.kind == "dir" for e in top):
            cfg_dir = await self._list(posixpath.join(job, "configs")) or []
            name = next((e.name for e in cfg_dir if e.name.endswith("_eval_config.json")), None)
            if name:
                eval_cfg = await job_file(name, cfg_dir, "configs")
        return assemble_experiment(
            job_id=posixpath.basename(job.rstrip("/")) or job,
            path=job,
            source=source,
            source_label=source_label,
            trials=[c.trial for c in state.trials.values()],
            policy=self.policy,
            config_bytes=files["config.json"],
            result_bytes=files["result.json"],
            eval_config_bytes=eval_cfg,
            env_bytes=files["meta.env"],
            problems=problems,
        )

    def job_config(self, job: str) -> bytes | None:
        state = self._jobs.get(job)
        cached = state.files.get("config.json") if state else None
        return cached[1] if cached else None

    async def scan(self, roots: list[str], source: str, source_label: str
                   ) -> tuple[list[Experiment], list[SourceError]]:
        experiments: list[Experiment] = []
        errors: list[SourceError] = []
        seen: set[str] = set()
        for root in roots:
            unreadable: list[tuple[str, str]] = []
            jobs = await self.find_job_dirs(root, unreadable)
            where = f"{self.host}:{root}"
            if isinstance(jobs, str):
                errors.append(SourceError(source=source_label, where=where, message=jobs))
                continue
            for path, why in unreadable:
                errors.append(SourceError(source=source_label, where=f"{self.host}:{path}",
                                          message=f"cannot read: {why}", unreadable=True))
            if not jobs and not unreadable:
                errors.append(SourceError(source=source_label, where=where, message="no Harbor job dirs found"))
            for job in jobs:
                seen.add(job)
                experiments.append(await self.scan_job(job, source, source_label))
        for gone in set(self._jobs) - seen:
            del self._jobs[gone]
        return experiments, errors


def _has_trial_files(listing: list[_Entry]) -> bool:
    return any(e.name in ("result.json", "config.json") for e in listing)
