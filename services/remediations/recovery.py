"""Unfinished writes, found at start: what the console's dialog and batch's stderr lines offer.

A write left half done (kill -9, a crash, a lost connection) has a record whose status is
`applying` (or `failed`, when its roll-back was incomplete). It is found in two places: this
machine's index of records, and the quarantine of any job dir evaldesk reads (a record made
on another machine, or one whose index entry a crash kept from being written). Each is
offered as **finish** (carry it on to the end) or **roll back** (undo what it did).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.core.config import Config
from services.core.source import Source, SourceUnavailable
from services.remediations.base import WritePath, quarantine_job
from services.remediations.errors import WriteRefused
from services.remediations.lock import DirLock, pid_alive
from services.remediations.records import FINAL, UNDOABLE, UNFINISHED, Record, RecordIndex, RecordStore
from services.remediations.registry import records_for
from services.remediations.steps import ExternalStep
from services.transport.fs import JobFS, LocalFS

# a console reading many job dirs looks into this many quarantines at once
CONCURRENT_LOOKS = 8


@dataclass(kw_only=True)
class Pending:
    """One unfinished write, as a person needs to see it to decide."""

    id: str
    action: str
    target: str
    host: str | None = None
    store: str | None = field(default=None, metadata={"description": "the bucket the target lives in (gs://name, s3://name)"})
    status: str
    n_done: int
    n_steps: int
    created_at: datetime | None = None
    user: str | None = None
    machine: str | None = None
    pid: int | None = None
    error: str | None = None
    command: str | None = field(default=None, metadata={"description": "a command it started whose end nobody saw"})

    @property
    def where(self) -> str:
        return self.host or self.store or "this machine"

    def progress(self) -> str:
        return f"{self.n_done} of {self.n_steps} step{'s' if self.n_steps != 1 else ''} done"

    def line(self) -> str:
        """One stderr line for batch, naming the two commands."""
        started = f", started {self.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if self.created_at else ""
        by = f" by {self.user}@{self.machine} pid {self.pid}" if self.user and self.machine else ""
        running = f"; {self.command_line()}" if self.command else ""
        return (f"evaldesk: unfinished {self.action} {self.id} on {self.target} ({self.where}): {self.progress()}"
                f"{started}{by}{running} — `evaldesk --batch finish {self.id}` carries it on, "
                f"`evaldesk --batch undo {self.id}` rolls it back")

    def command_line(self) -> str:
        return (f"it started {self.command}, which may still run: finish and undo wait until it has ended "
                "(or --force, after a look on the host)")

    def summary(self) -> list[str]:
        """The lines of the console's dialog."""
        out = [
            f"Action:  {self.action}",
            f"Target:  {self.target}",
            f"Host:    {self.where}",
            f"Steps:   {self.progress()} (status {self.status.replace('_', ' ')})",
        ]
        if self.created_at:
            by = f" by {self.user}@{self.machine} pid {self.pid}" if self.user and self.machine else ""
            out.append(f"Started: {self.created_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC{by}")
        out.append(f"Record:  {self.id}")
        if self.command:
            out.append(f"Command: {self.command_line()}")
        if self.error:
            out.append(f"Error:   {self.error}")
        return out

    @classmethod
    def of(cls, record: Record) -> Pending:
        return cls(id=record.id, action=record.action, target=record.target, host=record.host,
                   store=record.plan.store, status=record.status, n_done=record.n_done, n_steps=len(record.plan.steps),
                   created_at=record.created_at, user=record.user, machine=record.machine, pid=record.pid,
                   error=record.error, command=_started_command(record))

    @classmethod
    def of_entry(cls, entry: dict[str, Any]) -> Pending:
        created = entry.get("created_at")
        loc = entry.get("location") or {}
        return cls(id=str(entry.get("id")), action=str(entry.get("action")), target=str(entry.get("target")),
                   host=entry.get("host"), store=loc.get("store") if isinstance(loc, dict) else None,
                   status=str(entry.get("status")), n_done=int(entry.get("n_done") or 0),
                   n_steps=int(entry.get("n_steps") or 0),
                   created_at=datetime.fromisoformat(created) if isinstance(created, str) else None)


def _started_command(record: Record) -> str | None:
    from services.remediations.command_process import describe
    from services.remediations.job_step import outlived

    for step in record.plan.steps:
        if isinstance(step, ExternalStep):
            started = outlived(step)
            if started is not None:
                return describe(started, str(step.args.get("argv", ["?"])[0]))
    return None


async def in_progress(fs: JobFS, record: Record) -> bool:
    """True when the record's writer is still at work (it holds the target's lock for this
    record and the lock is not stale): that is a write going on, not an unfinished one."""
    if record.plan.lock_dir:
        try:
            found = await DirLock(fs, record.plan.lock_dir).inspect()
        except OSError:
            return False
        return found is not None and found[0] is not None and found[0].record == record.id and found[1] is None
    return record.machine == socket.gethostname() and pid_alive(record.pid)


async def from_index(index: RecordIndex) -> list[Pending]:
    """Unfinished records in this machine's index. A record kept on this machine's disk is
    read to confirm (a crash between its last mark and the index update leaves the index
    behind; the index is brought up to date); one on a remote host or in a bucket is taken as
    the index says."""
    out = []
    for entry in index.unfinished():
        loc = entry.get("location") or {}
        where = loc.get("record_dir")
        if entry.get("host") is None and not loc.get("store") and where:
            try:
                record = await RecordStore(LocalFS(), str(where)).load()
            except FileNotFoundError:
                continue  # the job dir went away, or an undo moved the record and was interrupted
            except (OSError, ValueError):
                out.append(Pending.of_entry(entry))
                continue
            if record.status not in UNFINISHED:
                index.put(record, loc)
                continue
            if not await in_progress(LocalFS(), record):
                out.append(Pending.of(record))
        else:
            out.append(Pending.of_entry(entry))
    return out


async def in_job_dirs(fs: JobFS, job_dirs: Iterable[str], problems: list[str] | None = None) -> list[Pending]:
    """Unfinished records in the quarantines of these job dirs (one listing each)."""
    gate = asyncio.Semaphore(CONCURRENT_LOOKS)

    async def look(job: str) -> list[Record]:
        async with gate:
            return [r for r in await records_for(fs, job, problems)
                    if r.status in UNFINISHED and not await in_progress(fs, r)]

    found = await asyncio.gather(*(look(j) for j in job_dirs))
    return [Pending.of(r) for records in found for r in records]


async def stale_locks(fs: JobFS, job_dirs: Iterable[str]) -> list[str]:
    """One line per stale lock on these jobs (theirs, or beside them) that no unfinished
    record explains: a writer died before its record was written."""
    from services.remediations.records import aside_root

    out = []
    for job in job_dirs:
        for target in (job, aside_root(job)):
            try:
                found = await DirLock(fs, target).inspect()
            except OSError:
                continue
            if found is None or found[1] is None:
                continue
            owner, reason = found
            who = owner.describe() if owner is not None else "a writer that never said who it was"
            out.append(f"evaldesk: a stale lock on {target} ({who}: {reason}) stops writes to {job} — "
                       f"`evaldesk --batch undo {job}` clears it (with --break-lock if its holder was elsewhere)")
    return out


def merge(*groups: Iterable[Pending]) -> list[Pending]:
    """One entry per record id, oldest first (the order they were started)."""
    seen: dict[str, Pending] = {}
    for group in groups:
        for p in group:
            # read from the record itself (it has a user): newer than this machine's index
            if p.id not in seen or (p.user and not seen[p.id].user):
                seen[p.id] = p
    return sorted(seen.values(), key=lambda p: (p.created_at or datetime.min.replace(tzinfo=UTC), p.id))


def target_spec(target: str, host: str | None, store: str | None = None) -> str:
    """The SOURCE that opens a record's target: its path here, an ssh:// URL on its host, or
    the URL of its object in a bucket (`/<name>/<key>` in gs://name is gs://name/<key>)."""
    if store:
        name = store.partition("://")[2]
        key = target[len(name) + 2:] if target.startswith(f"/{name}/") else ""
        return f"{store}/{key}" if key else store
    return f"ssh://{host}{target}" if host else target


async def locate(write_path: WritePath, spec: str, config: Config, *,
                 want: frozenset[str] = UNDOABLE) -> tuple[Source, Record | None, str]:
    """The source, record and job dir that `undo SPEC` / `finish SPEC` act on. SPEC is a
    record id (or a unique prefix of one) this machine knows, or a job dir (local path, ssh://,
    gs:// or s3:// URL) whose newest record with a status in `want` is taken (None: there is none).

    A record named by id is returned whatever its status; the caller checks it.
    Raises SourceUnavailable when the target cannot be opened, WriteRefused when SPEC names
    nothing evaldesk knows."""
    from services.core.registry import open_source

    entry = None if (os.path.exists(spec) or "://" in spec) else write_path.index.find(spec)
    if entry is None and not (os.path.exists(spec) or "://" in spec):
        raise WriteRefused(f"{spec}: neither a job dir nor a record id this machine knows "
                           "(a record made elsewhere is undone by naming its job dir)")
    if entry is not None:
        loc = entry.get("location") or {}
        job = quarantine_job(loc.get("record_dir")) if loc.get("on_target") else None
        target = str(entry.get("target"))
        if job is None and not (os.path.isabs(target) or entry.get("host")):
            raise WriteRefused(f"record {entry['id']} changed {target}, which evaldesk cannot open from here")
        source = open_source(target_spec(job or target, entry.get("host"), loc.get("store")), config)
        if not loc.get("on_target"):
            record = await RecordStore(LocalFS(), str(loc.get("record_dir"))).load()
            return source, record, job or target
        try:
            found = [r for r in await records_for(source.fs(), job or target) if r.id == entry["id"]]
        except Exception:
            await source.close()
            raise
        if not found:
            await source.close()
            status = entry.get("status")
            if status in FINAL:
                raise WriteRefused(f"record {entry['id']} is {str(status).replace('_', ' ')}: nothing to do")
            raise SourceUnavailable(spec, f"record {entry['id']} is no longer in {job}")
        return source, found[0], str(job)
    source = open_source(spec, config)
    try:
        snap = await source.scan()
        if len(snap.experiments) != 1:
            raise SourceUnavailable(spec, "name one job dir (or a record id)")
        job = snap.experiments[0].path
        problems: list[str] = []
        records = [r for r in await records_for(source.fs(), job, problems) if r.status in want]
        if not records and problems:
            raise WriteRefused("; ".join(problems))
    except Exception:
        await source.close()
        raise
    return source, (records[0] if records else None), job
