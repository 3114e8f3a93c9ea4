"""Batch commands over write records: `undo`, `finish`, and the unfinished-write notices
every batch command prints on stderr at start. No Textual import here.

    evaldesk --batch undo JOB_DIR|RECORD_ID…     roll back the job's newest write, or that record
    evaldesk --batch finish JOB_DIR|RECORD_ID…   carry an interrupted write on to the end
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Awaitable, Callable
from typing import IO, Any, TypeVar

from services.core.config import Config
from services.core.journal import Journal
from services.core.models import Experiment
from services.core.source import Source
from services.core.text import dumps, term_safe
from services.remediations import recovery
from services.remediations.base import WritePath
from services.remediations.errors import LockHeld
from services.remediations.lock import LockOwner
from services.remediations.records import FINAL, UNDOABLE, UNFINISHED, Record, aside_root
from services.remediations.steps import StepContext, step_text

T = TypeVar("T")


def write_path_for(args: argparse.Namespace, config: Config) -> WritePath:
    """The write path batch uses; whether it may write is its `refusal`, asked before any work."""
    why = config.read_only_why or ("--read-only" if getattr(args, "read_only", False)
                                   else "read_only = true in the config or EVALDESK_READ_ONLY")
    return WritePath(Journal(config.journal_path), read_only=bool(config.read_only or args.read_only),
                     read_only_why=why)


def print_pending(pending: list[recovery.Pending], err: IO[str], skip: set[str] | None = None) -> None:
    for p in pending:
        if p.id not in (skip or set()):
            err.write(term_safe(p.line()) + "\n")
    err.flush()


async def notice_pending(write_path: WritePath, exps: list[tuple[Source, Experiment]], err: IO[str],
                         say_locks: bool = True) -> None:
    """One stderr line per unfinished write: in this machine's index, or in the quarantine of
    a job dir this command read."""
    by_source: dict[int, tuple[Source, list[str]]] = {}
    for src, exp in exps:
        by_source.setdefault(id(src), (src, []))[1].append(exp.path)
    found = [await recovery.from_index(write_path.index)]
    locks: list[str] = []
    for src, paths in by_source.values():
        try:
            found.append(await recovery.in_job_dirs(src.fs(), paths))
            if say_locks:  # a write about to start says a lock in its way itself
                locks += await recovery.stale_locks(src.fs(), paths)
        except Exception as exc:  # a host that went away mid-command: the command itself says so
            err.write(f"evaldesk: cannot look for unfinished writes on {src.label}: {exc}\n")
    pending = recovery.merge(*found)
    print_pending(pending, err)
    # a lock an unfinished record explains is said by that record's line
    explained = {p.target for p in pending}
    for line in locks:
        if not any(f" to {t} " in line for t in explained):
            err.write(term_safe(line) + "\n")


async def writes_unfinished(write_path: WritePath, job_dirs: list[str]) -> bool:
    """Whether any write to these job dirs (or any this machine knows of) is unfinished, live
    or not: a live writer that dies later would need saying with no file changed."""
    from services.remediations.registry import records_for
    from services.transport.fs import LocalFS

    if write_path.index.unfinished():
        return True
    fs = LocalFS()
    for job in job_dirs:
        if any(r.status in UNFINISHED for r in await records_for(fs, job)):
            return True
    return False


async def with_lock_breaking(args: argparse.Namespace, write_path: WritePath, ctx: StepContext, err: IO[str],
                             run: Callable[[], Awaitable[T]]) -> T:
    """Run a write; with --break-lock, a stale lock in the way is broken (saying whose) and
    the write tried once more. A live holder's lock is never broken."""
    try:
        return await run()
    except LockHeld as held:
        if not getattr(args, "break_lock", False) or not held.can_break:
            raise
        owner = await write_path.break_lock(ctx, held)
        who = owner.describe() if isinstance(owner, LockOwner) else "a writer that never said who it was"
        err.write(f"evaldesk: broke the stale lock on {held.target} held by {who}: {held.stale_reason}\n")
        err.flush()
        return await run()


def lock_held_line(held: LockHeld) -> str:
    hint = " — add --break-lock to break it" if held.can_break else " — try again when it is done"
    return f"evaldesk: {held}{hint}\n"


async def run_records_command(args: argparse.Namespace, config: Config, fmt: str, out: IO[str], err: IO[str]) -> int:
    """`undo` or `finish` for every SPEC; exit 0 when each was done or there was nothing to do."""
    write_path = write_path_for(args, config)
    command = args.command
    # the records this command acts on are not announced as waiting
    named = {e["id"] for s in args.sources if (e := write_path.index.find(s)) is not None}
    targets = {os.path.abspath(s) for s in args.sources if os.path.exists(s)}
    print_pending([p for p in await recovery.from_index(write_path.index)
                   if p.id not in named and not (p.host is None and p.target in targets)], err)
    results = []
    for spec in args.sources:
        result = await _one(args, config, write_path, command, spec, err)
        results.append(result)
        if fmt == "table":
            out.write(term_safe(str(result["message"])) + "\n")
            for note in result.get("notes") or []:
                out.write(f"  note: {term_safe(str(note))}\n")
    if fmt in ("json", "jsonl"):
        for result in results:
            out.write(_dump(result) + "\n")
    return 0


def _dump(obj: Any) -> str:
    return dumps(obj)


async def _one(args: argparse.Namespace, config: Config, write_path: WritePath, command: str, spec: str,
               err: IO[str]) -> dict[str, Any]:
    from services.remediations import registry

    want = UNDOABLE if command == "undo" else UNFINISHED
    entry = None if (os.path.exists(spec) or "://" in spec) else write_path.index.find(spec)
    if entry is not None and entry.get("status") in FINAL and entry.get("status") not in want \
            and not (entry.get("location") or {}).get("on_target"):
        status = str(entry.get("status")).replace("_", " ")
        return {"target": entry.get("target"), "record": entry.get("id"), "status": entry.get("status"),
                "restored" if command == "undo" else "done": [],
                "message": f"nothing to {command}: record {entry.get('id')} is already {status}", "notes": []}
    if command == "undo" and entry is not None and not (entry.get("location") or {}).get("on_target"):
        # a record kept on this machine (leaderboard rows, a moved run dir): its context needs no job dir
        from tui.batch_leaderboard import undo_local

        return await undo_local(entry, config, write_path)
    source, record, job = await recovery.locate(write_path, spec, config, want=want)
    try:
        if record is None or record.status not in want:
            ctx = StepContext(source.fs())
            notes = []
            stale = bool(getattr(args, "break_lock", False))
            # the job's own lock, and the one beside it (a resume's, with its records)
            for target, root in ((job, None), (aside_root(job), aside_root(job))):
                cleared = await write_path.clear_dead_lock(ctx, target, record_root=root, stale=stale)
                if cleared:
                    notes.append(f"removed the lock on {target} left by {cleared.describe()}: that process is gone "
                                 "and its write never began (or had ended), so nothing was changed")
            if record is not None:
                what = f"record {record.id} is {record.status.replace('_', ' ')}"
            elif command == "undo":
                what = "no applied write in its quarantine"
            else:
                what = "no unfinished write in its quarantine"
            return {"target": job, "record": None, "status": None, "restored" if command == "undo" else "done": [],
                    "message": f"nothing to {command}: {what}", "notes": notes}
        ctx = registry.context(record.action, source, config)
        ctx.resources["force"] = bool(getattr(args, "force", False))  # a person looked on the host
        rec: Record = record
        if command == "undo":
            lines, _ = await write_path.undo_preview(rec, ctx)
            done = await with_lock_breaking(args, write_path, ctx, err, lambda: write_path.undo(rec, ctx))
            restored = [ln.strip() for ln in lines]
            return {"target": job, "record": done.id, "status": done.status, "restored": restored,
                    "message": f"undid {done.action} {done.id}: {len(restored)} step(s) put back in {job}",
                    "notes": done.notes}
        before = rec.n_done
        done = await with_lock_breaking(args, write_path, ctx, err, lambda: write_path.finish(rec, ctx))
        steps = [step_text(s) for s in done.plan.steps]
        return {"target": job, "record": done.id, "status": done.status, "done": steps,
                "message": f"finished {done.action} {done.id}: all {len(steps)} step(s) done and verified in {job} "
                           f"({before} were marked done before the interruption)",
                "notes": done.notes}
    finally:
        await source.close()
