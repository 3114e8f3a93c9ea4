"""The one write path: how evaldesk changes anything outside itself (DESIGN 5).

plan → preview → lock → write-ahead record → apply → verify → undo / recover.

A remediation only describes its steps (`Plan`); this module carries them out:

1. **Plan**: ordered `Step`s, each with its inverse, plus `input_hash`, a digest of what the
   planner read. Planning reads; it never writes.
2. **Preview**: `Plan.preview` is the text the confirm dialog and `--batch … ` (no `--apply`)
   both print.
3. **Lock**: one lock per target (a job dir: an atomic `mkdir` of `.evaldesk-lock` holding
   host, pid, user and start time; it works over SFTP too). A second writer gets `LockHeld`
   naming the holder; a stale lock (dead pid on this host, or older than `STALE_LOCK_S`) says
   so and is broken only on request (`break_lock`, after a person confirmed it). Recovery
   (undo, finish) takes over a lock only when its holder is provably dead and was writing the
   very record being recovered.
4. **Write-ahead record**: under the lock, an unfinished record on the target stops the write
   (finish or roll it back first); the plan is re-made from fresh reads and must hash the same
   (what was previewed is what runs); every step must be startable; then `record.json` (the
   plan, every step pending) is written durably and the journal gets its `begin` entry before
   the first change. Each step is marked done in an append-only, fsync'd `steps.log`.
5. **Apply** step by step. A step that cannot be done exactly (permission denied, a cross-
   device rename, a target that is not what the plan read) stops the plan, what was done is
   rolled back, and the error names the path. Moves are renames, never copies.
6. **Verify** every step's after-state, then record the watched dirs' entries.
7. **Undo / recover**: a record left unfinished (crash, kill -9, lost connection) is found at
   the next start (`RecordIndex.unfinished`, `records_in`) and can be finished (`finish`) or
   rolled back (`undo`). Undo first checks that everything it restores over is still what
   apply left (hashes; entries that appeared in watched dirs) and otherwise refuses and says
   what changed, leaving the record open — it never overwrites newer content. After an undo
   the target holds exactly what it held before: no lock, no quarantine, no temporary file;
   the record moves to this machine's index and stays in the journal.

Every interruption point has a name (`EVALDESK_CRASH_AT=<name>` kills the process there,
`EVALDESK_STOP_AT=<name>` stops it): `locked`, `recorded`, `step:<i>:dirs` (a move's parent
dirs made, not yet renamed), `step:<i>:backup` (a file's original saved, not yet replaced),
`step:<i>:starting` (a command marked started, not yet spawned), `step:<i>:ran` (done, not
yet marked), `step:<i>` (marked), `verified`, `applied`,
`undo:step:<i>`, and `write:<file name>` inside every atomic write (temporary file written,
not yet renamed).

`--read-only` is decided here, once (`WritePath.refusal`). Records hold paths as written by
the OS: names that are not UTF-8 survive through JSON's surrogate escapes (stdlib json), and
secrets never enter a plan — steps name environment variables, never their values.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from services.core.journal import Journal, current_user
from services.core.plain import dump
from services.remediations.errors import LockHeld, ReadOnly, StepFailed, TargetUnwritable, WriteRefused
from services.remediations.lock import DirLock, LockOwner, provably_dead
from services.remediations.records import (
    FINAL,
    LISTING_FILE,
    QUARANTINE_DIR,
    RECORD_FILE,
    STEPS_LOG,
    UNFINISHED,
    Plan,
    Record,
    RecordIndex,
    RecordStore,
    records_in,
)
from services.remediations.steps import (
    MAX_READ_BYTES,
    ExternalStep,
    MoveStep,
    StepContext,
    WriteFileStep,
    describe_error,
    do_step,
    step_state,
    step_text,
    undo_check,
    undo_step,
)
from services.transport.fs import CRASH_ENV, TMP_MARK, JobFS, LocalFS, checkpoint, tmp_prefix

Replan = Callable[[], Awaitable[Plan]]
Progress = Callable[[int, int, str], None]

# names evaldesk keeps in a target dir; never counted as the target's own entries
OWN_PREFIX = ".evaldesk-"
MAX_NAMES_SHOWN = 8


def _own(name: str) -> bool:
    return name.startswith(OWN_PREFIX) or TMP_MARK in name


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES_SHOWN])
    return shown + (f" and {len(names) - MAX_NAMES_SHOWN} more" if len(names) > MAX_NAMES_SHOWN else "")


def _store_of(plan: Plan) -> dict[str, Any]:
    """The bucket a target lives in, for the index entry (a record id reopens it)."""
    return {"store": plan.store} if plan.store else {}


def quarantine_job(record_dir: str | None) -> str | None:
    """The job dir whose quarantine holds `record_dir`, or None for a record kept locally.

    Two layouts: `<job>/.evaldesk-quarantine/<record>` (dedupe and most writes), and
    `<jobs>/.evaldesk-quarantine/<job>/<record>` beside the job, for writes after which Harbor's
    own resume runs (it deletes every folder of a job that is not a trial, ours included)."""
    if not record_dir:
        return None
    parent = posixpath.dirname(record_dir.rstrip("/"))
    if posixpath.basename(parent) == QUARANTINE_DIR:
        return posixpath.dirname(parent)
    top = posixpath.dirname(parent)
    if posixpath.basename(top) == QUARANTINE_DIR:
        return posixpath.join(posixpath.dirname(top), posixpath.basename(parent))
    return None


class WritePath:
    """Carries out plans; the only object in evaldesk that changes anything outside itself."""

    CRASH_ENV: ClassVar[str] = CRASH_ENV

    def __init__(self, journal: Journal | None = None, *, read_only: bool = False,
                 index: RecordIndex | None = None, read_only_why: str = "--read-only") -> None:
        self.journal = journal or Journal()
        self.read_only = read_only
        self.read_only_why = read_only_why
        self.index = index or RecordIndex()

    # -- read-only is decided here, once ---------------------------------------------------

    def refusal(self, action: str) -> str | None:
        """Why `action` may not write now, or None. The one place read-only mode is decided."""
        if self.read_only:
            return (f"Read-only mode is on ({self.read_only_why}): {action} would change things outside "
                    "evaldesk, so it is disabled.")
        return None

    def _refuse_if_read_only(self, action: str) -> None:
        why = self.refusal(action)
        if why:
            raise ReadOnly(why)

    # -- where records live ------------------------------------------------------------------

    def _local_dir(self, record_id: str) -> str:
        return str(self.index.root / record_id)

    def _store(self, plan: Plan, ctx: StepContext) -> RecordStore:
        if plan.record_dir:
            return RecordStore(ctx.fs, plan.record_dir)
        return RecordStore(LocalFS(), self._local_dir(plan.id))

    def _location(self, plan: Plan) -> dict[str, Any]:
        return {"record_dir": plan.record_dir or self._local_dir(plan.id), "host": plan.host,
                "on_target": bool(plan.record_dir), **_store_of(plan)}

    def _index(self, record: Record) -> None:
        self.index.put(record, self._location(record.plan))

    # -- apply ---------------------------------------------------------------------------------

    async def apply(self, plan: Plan, ctx: StepContext, *, replan: Replan | None = None,
                    progress: Progress | None = None) -> Record:
        """Lock, check the plan still holds, record, apply, verify. Raises WriteRefused (nothing
        changed) or StepFailed (rolled back, or says what could not be)."""
        self._refuse_if_read_only(plan.action)
        if plan.nothing_to_do:
            raise WriteRefused(f"{plan.title}: nothing to do")
        if plan.blocked:
            raise WriteRefused(plan.blocked)
        lock = DirLock(ctx.fs, plan.lock_dir) if plan.lock_dir else None
        if lock is not None:
            try:
                await lock.acquire(plan.action, plan.id)
            except LockHeld as held:
                await self._refuse_if_holder_left_unfinished(held, plan, ctx)
                raise
        try:
            checkpoint("locked")
            await self._refuse_if_unfinished(plan, ctx)
            if replan is not None:
                fresh = await replan()
                if fresh.input_hash != plan.input_hash:
                    raise WriteRefused(f"{plan.target} changed since this {plan.action} was previewed; nothing was "
                                       "changed — review the new preview and confirm again")
            # every step must be startable before anything moves: a target that drifted from
            # the plan is a refusal, not a half-applied plan
            for i, step in enumerate(plan.steps):
                state, detail = await step_state(step, ctx)
                if state != "not_done":
                    raise WriteRefused(f"step {i + 1} of {plan.title} cannot start: "
                                       f"{detail or 'it looks already done'}; nothing was changed")
            return await self._run(plan, ctx, progress)
        finally:
            await self._release(lock)

    async def _release(self, lock: DirLock | None) -> None:
        if lock is not None:
            # a lock that cannot be removed is left to look stale (its pid is gone once we exit)
            with contextlib.suppress(OSError):
                await lock.release()
            await _remove_empty_aside(lock.fs, lock.target)

    async def _refuse_if_holder_left_unfinished(self, held: LockHeld, plan: Plan, ctx: StepContext) -> None:
        """A stale lock whose gone writer left its record unfinished is not something to break:
        that write is to be finished or rolled back (which takes the lock over)."""
        owner = held.owner if isinstance(held.owner, LockOwner) else None
        job = quarantine_job(plan.record_dir)
        if not held.can_break or owner is None or not owner.record or job is None:
            return
        try:
            rec = await RecordStore(ctx.fs, posixpath.join(job, QUARANTINE_DIR, owner.record)).load()
        except (OSError, ValueError):
            return
        if rec.status in UNFINISHED:
            raise WriteRefused(
                f"{plan.target} has an unfinished {rec.action} {rec.id} whose writer is gone ({owner.describe()}): "
                f"{rec.n_done} of {len(rec.plan.steps)} steps done — `evaldesk --batch finish {rec.id}` carries it "
                f"on, `evaldesk --batch undo {rec.id}` rolls it back; nothing was changed")

    async def _refuse_if_unfinished(self, plan: Plan, ctx: StepContext) -> None:
        """A half-done write on the same target must be finished or rolled back first: a new
        plan made over it would move what the old one still has to account for."""
        found: list[str] = []
        job = quarantine_job(plan.record_dir)
        if job is not None:
            found += [f"{r.action} {r.id} ({r.n_done} of {len(r.plan.steps)} steps done, by {r.user}@{r.machine})"
                      for r in await records_in(ctx.fs, job) if r.status in UNFINISHED and r.id != plan.id]
        else:
            for entry in self.index.unfinished():
                if entry.get("target") == plan.target and entry.get("host") == plan.host and entry.get("id") != plan.id:
                    found.append(f"{entry.get('action')} {entry.get('id')}")
        if found:
            raise WriteRefused(f"{plan.target} has an unfinished write: {'; '.join(found)} — finish it or roll "
                               "it back first (evaldesk --batch finish ID / evaldesk --batch undo ID); nothing was "
                               "changed")

    async def _run(self, plan: Plan, ctx: StepContext, progress: Progress | None) -> Record:
        record = Record(id=plan.id, action=plan.action, target=plan.target, host=plan.host,
                        experiment=plan.experiment, user=current_user(), machine=socket.gethostname(),
                        pid=os.getpid(), created_at=datetime.now(UTC), done=[False] * len(plan.steps), plan=plan)
        store = self._store(plan, ctx)
        try:
            await store.create(record)
        except OSError as exc:
            with contextlib.suppress(OSError):
                await _remove_record_files(store)
            raise TargetUnwritable(f"cannot write the record of this {plan.action} in {store.dir}: "
                                   f"{describe_error(exc)}; nothing was changed") from None
        self._index(record)
        try:
            self._journal(record, "begin")
        except OSError as exc:
            # the journal is written ahead too: without it, no change is made
            with contextlib.suppress(OSError):
                await _remove_record_files(store)
            self.index.forget(record.id)
            raise WriteRefused(f"cannot write the journal {self.journal.path}: {describe_error(exc)}; "
                               "nothing was changed") from None
        checkpoint("recorded")
        n = len(plan.steps)
        for i, step in enumerate(plan.steps):
            if progress:
                progress(i, n, getattr(step, "label", "") or plan.action)
            ctx.checkpoint = _step_checkpoint(i)
            ctx.note = _step_note(store, i)
            try:
                result = await do_step(step, ctx)
                checkpoint(f"step:{i}:ran")
                record.done[i] = True
                if result:
                    record.results[i] = result
                await store.mark(step=i, state="done", result=result or None)
            except Exception as exc:
                message = f"step {i + 1} of {n} ({step_text(step)}) failed: {describe_error(exc)}"
                await self._fail(record, store, ctx, message)
                raise StepFailed(self._failure_message(record, message), record.id) from None
            checkpoint(f"step:{i}")
        try:
            await self._verify(record, store, ctx)
        except _VerifyFailed as exc:
            message = f"verify failed: {exc}"
            await self._fail(record, store, ctx, message)
            raise StepFailed(self._failure_message(record, message), record.id) from None
        record.status = "applied"
        record.finished_at = datetime.now(UTC)
        try:
            await store.mark(status="applied")
        except OSError as exc:
            # every step is done and verified; only the mark is missing, and finish adds it
            raise StepFailed(f"{plan.title}: every step is done and verified, but its record could not be "
                             f"marked ({describe_error(exc)}); `evaldesk --batch finish {record.id}` marks it",
                             record.id) from None
        self._index(record)
        self._journal_end(record, "apply")
        checkpoint("applied")
        return record

    async def _verify(self, record: Record, store: RecordStore, ctx: StepContext) -> None:
        """Every step's after-state holds on the target; then the watched dirs' entries are
        recorded for undo to compare against."""
        problems = []
        for i, step in enumerate(record.plan.steps):
            state, detail = await step_state(step, ctx)
            if state != "done":
                problems.append(f"step {i + 1}: {detail or state}")
        if problems:
            raise _VerifyFailed("; ".join(problems))
        if record.plan.watch:
            record.listing = await self._listing(record.plan, ctx)
            try:
                await store.write_listing(record.listing)
            except OSError as exc:
                raise _VerifyFailed(f"cannot record the job's entries: {describe_error(exc)}") from None
        checkpoint("verified")

    async def _fail(self, record: Record, store: RecordStore, ctx: StepContext, message: str) -> None:
        record.status = "failed"
        record.error = message
        with contextlib.suppress(OSError):
            await store.mark(status="failed", error=message)
        self._index(record)
        left = await self._invert(record, store, ctx, strict=False)
        if left is None:
            record.status = "rolled_back"
            with contextlib.suppress(OSError):
                await store.mark(status="rolled_back")
            self._index(record)
            with contextlib.suppress(OSError):
                await self._tidy(record, ctx)
        else:
            record.error = f"{message}; not put back: {'; '.join(left)}"
        self._journal_end(record, "apply-failed")

    @staticmethod
    def _failure_message(record: Record, message: str) -> str:
        if record.status == "rolled_back":
            return f"{message}; everything done before it was put back, nothing else was touched (record {record.id})"
        return (f"{message}; rolling back was not complete — `evaldesk --batch undo {record.id}` says what is "
                "left, and nothing else was touched")

    async def _invert(self, record: Record, store: RecordStore, ctx: StepContext, strict: bool) -> list[str] | None:
        """Undo the done steps, newest first. Returns None when all were undone, else what blocked."""
        blocked: list[str] = []
        for i in reversed(range(len(record.plan.steps))):
            step = record.plan.steps[i]
            state, detail = await step_state(step, ctx)
            if state == "not_done":
                record.done[i] = False
                continue
            if state == "conflict":
                blocked.append(f"step {i + 1}: {detail}")
                continue
            if strict:
                why = await undo_check(step, ctx)
                if why:
                    blocked.append(why)
                    continue
            try:
                await undo_step(step, ctx)
            except Exception as exc:
                blocked.append(f"step {i + 1} ({step_text(step, undo=True)}): {describe_error(exc)}")
                continue
            record.done[i] = False
            with contextlib.suppress(OSError):
                await store.mark(step=i, state="undone")
            checkpoint(f"undo:step:{i}")
        return blocked or None

    # -- locks ---------------------------------------------------------------------------------

    async def break_lock(self, ctx: StepContext, held: LockHeld) -> LockOwner | None:
        """Break a stale lock a person confirmed breaking; journaled. Refuses a live holder."""
        self._refuse_if_read_only("breaking a lock")
        owner = held.owner if isinstance(held.owner, LockOwner) else None
        lock = DirLock(ctx.fs, held.target or posixpath.dirname(held.path))
        return await self._break(lock, owner, f"broken on request: {held.stale_reason or 'stale'}")

    async def _break(self, lock: DirLock, owner: LockOwner | None, why: str) -> LockOwner | None:
        broken = await lock.break_stale(owner)
        held = dump(owner, json=True) if owner else None
        self.journal.append("lock:break", lock.target, before={"lock": held}, after={"lock": None}, reason=why,
                            record=owner.record if owner else None)
        return broken

    async def _lock_for(self, record: Record, ctx: StepContext, action: str) -> DirLock | None:
        """The target's lock for recovering `record`. A lock left by a process that is gone
        from this host while it was writing this same record is taken over (and said so)."""
        if not record.plan.lock_dir:
            return None
        lock = DirLock(ctx.fs, record.plan.lock_dir)
        try:
            await lock.acquire(action, record.id)
        except LockHeld as held:
            owner = held.owner if isinstance(held.owner, LockOwner) else None
            if owner is None or not provably_dead(owner) or owner.record != record.id:
                raise
            await self._break(lock, owner, f"taken over to {action}: its holder is gone")
            record.notes.append(f"took over the lock left by {owner.describe()}: that process is gone")
            await lock.acquire(action, record.id)
        return lock

    async def clear_dead_lock(self, ctx: StepContext, target_dir: str, *, record_root: str | None = None,
                              stale: bool = False) -> LockOwner | None:
        """Remove a lock whose holder is provably dead and whose write never began (no record)
        or already ended, together with what that write left half made; None when there is no
        such lock. A lock of a live, remote or ownerless holder is left alone — unless `stale`
        (a person asked with --break-lock), when any lock that looks stale goes. Records live in
        `record_root` (default: the target's quarantine)."""
        self._refuse_if_read_only("clearing a lock")
        lock = DirLock(ctx.fs, target_dir)
        found = await lock.inspect()
        if found is None:
            return None
        owner, reason = found
        if not (provably_dead(owner) or (stale and reason is not None)):
            return None
        root = record_root or posixpath.join(target_dir, QUARANTINE_DIR)
        rec_dir = posixpath.join(root, owner.record) if owner is not None and owner.record else None
        if rec_dir is not None:
            try:
                rec = await RecordStore(ctx.fs, rec_dir).load()
            except FileNotFoundError:
                rec = None
            except (OSError, ValueError):
                return None  # a record that cannot be read: a person has to look
            if rec is not None and rec.status not in FINAL:
                return None  # an unfinished write: finish or undo it (that takes the lock over)
        await self._break(lock, owner, f"its holder is gone ({reason}) and its write never began or had ended")
        if rec_dir is not None and await ctx.fs.stat(posixpath.join(rec_dir, RECORD_FILE)) is None:
            # a crash while the record was being written leaves only a temporary file there
            with contextlib.suppress(OSError):
                await _remove_own_tree(ctx.fs, rec_dir)
            with contextlib.suppress(OSError):
                await ctx.fs.rmdir(posixpath.dirname(rec_dir))
        await _remove_empty_aside(ctx.fs, target_dir)
        return owner or LockOwner(host="?", pid=0, user="?", started_at=datetime.now(UTC))

    # -- undo, recovery ---------------------------------------------------------------------

    async def load(self, record_id: str, ctx: StepContext, record_dir: str | None = None) -> Record:
        entry = self.index.get(record_id)
        where = record_dir or (entry or {}).get("location", {}).get("record_dir")
        if not where:
            raise WriteRefused(f"no record {record_id} on this machine")
        fs = ctx.fs if (entry or {}).get("location", {}).get("on_target", True) else LocalFS()
        return await RecordStore(fs, where).load()

    async def undo_preview(self, record: Record, ctx: StepContext) -> tuple[list[str], list[str]]:
        """(what undo would do, what blocks it). Reads only."""
        lines: list[str] = []
        blocked: list[str] = []
        for i in reversed(range(len(record.plan.steps))):
            step = record.plan.steps[i]
            state, detail = await step_state(step, ctx)
            if state == "not_done":
                continue
            if state == "conflict":
                # said as undo sees it: what changed since apply left it
                blocked.append(await undo_check(step, ctx) or detail)
                continue
            why = await undo_check(step, ctx)
            if why:
                blocked.append(why)
                continue
            lines.append(f"  {step_text(step, undo=True)}")
        blocked += await self._appeared(record, ctx)
        return lines, blocked

    async def undo(self, record: Record, ctx: StepContext) -> Record:
        """Put back what a record changed. All or nothing: if anything it would restore over has
        changed since apply, it refuses, says what, and the record stays open as it was."""
        self._refuse_if_read_only(f"undo of {record.action}")
        if record.status in ("undone", "rolled_back"):
            raise WriteRefused(f"record {record.id} is already {record.status.replace('_', ' ')}: nothing to undo")
        lock = await self._lock_for(record, ctx, f"undo {record.action}")
        try:
            _, blocked = await self.undo_preview(record, ctx)
            if blocked:
                raise WriteRefused(f"undo of {record.action} {record.id} refused, nothing changed and the record "
                                   f"stays open: {'; '.join(blocked)}")
            store = self._store(record.plan, ctx)
            left = await self._invert(record, store, ctx, strict=True)
            if left:
                record.error = "; ".join(left)
                with contextlib.suppress(OSError):
                    await store.mark(status=record.status, error=record.error)
                self._index(record)
                raise StepFailed("undo stopped: " + record.error, record.id)
            record.status = "undone"
            record.undone_at = datetime.now(UTC)
            try:
                await store.mark(status="undone")
                self._index(record)
                await self._tidy(record, ctx)
            except OSError as exc:
                # everything is back; what is left is evaldesk's own bookkeeping in the job dir
                self._index(record)
                record.notes.append(f"everything was put back, but the record could not be moved out of the job "
                                    f"dir: {describe_error(exc)}")
            self._journal_end(record, "undo")
            return record
        finally:
            await self._release(lock)

    async def finish(self, record: Record, ctx: StepContext, progress: Progress | None = None) -> Record:
        """Carry an interrupted record on from where the target stands, to the end."""
        self._refuse_if_read_only(f"finishing {record.action}")
        if record.status in FINAL:
            raise WriteRefused(f"record {record.id} is {record.status.replace('_', ' ')}: nothing to finish")
        lock = await self._lock_for(record, ctx, f"finish {record.action}")
        try:
            states = [await step_state(step, ctx) for step in record.plan.steps]
            conflicts = [f"step {i + 1}: {d}" for i, (s, d) in enumerate(states) if s == "conflict"]
            if conflicts:
                raise WriteRefused(f"cannot finish {record.action} {record.id}, nothing changed: "
                                   f"{'; '.join(conflicts)}")
            store = self._store(record.plan, ctx)
            if record.status != "applying":
                record.status = "applying"
                await store.mark(status="applying")
            n = len(record.plan.steps)
            for i, step in enumerate(record.plan.steps):
                if states[i][0] == "not_done":
                    if progress:
                        progress(i, n, getattr(step, "label", "") or record.action)
                    ctx.checkpoint = _step_checkpoint(i)
                    ctx.note = _step_note(store, i)
                    try:
                        result = await do_step(step, ctx)
                    except Exception as exc:
                        message = f"finish stopped at step {i + 1} of {n} ({step_text(step)}): {describe_error(exc)}"
                        record.status, record.error = "failed", message
                        with contextlib.suppress(OSError):
                            await store.mark(status="failed", error=message)
                        self._index(record)
                        self._journal_end(record, "finish-failed")
                        raise StepFailed(f"{message}; the record stays open: finish it again once that is "
                                         f"fixed, or roll it back with `evaldesk --batch undo {record.id}`",
                                         record.id) from None
                    if result:
                        record.results[i] = result
                    await store.mark(step=i, state="done", result=result or None)
                elif not record.done[i]:
                    # a command that ended while nobody watched: its record says so from now on
                    kept = step.result if isinstance(step, ExternalStep) and step.result else None
                    await store.mark(step=i, state="done", result=kept)
                    if kept:
                        record.results[i] = kept
                record.done[i] = True
            try:
                await self._verify(record, store, ctx)
            except _VerifyFailed as exc:
                record.status, record.error = "failed", f"verify failed: {exc}"
                with contextlib.suppress(OSError):
                    await store.mark(status="failed", error=record.error)
                self._index(record)
                raise StepFailed(record.error, record.id) from None
            await self._sweep(record, ctx)
            record.status = "applied"
            record.error = None
            record.finished_at = datetime.now(UTC)
            try:
                await store.mark(status="applied", error=None)
            except OSError as exc:
                raise StepFailed(f"every step of {record.id} is done and verified, but its record could not be "
                                 f"marked: {describe_error(exc)}", record.id) from None
            self._index(record)
            self._journal_end(record, "finish")
            return record
        finally:
            await self._release(lock)

    # -- what the target holds -----------------------------------------------------------------

    async def _listing(self, plan: Plan, ctx: StepContext) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for d in plan.watch:
            with contextlib.suppress(OSError):
                out[d] = [n for n in await ctx.fs.list_dir(d) if not _own(n)]
        return out

    async def _appeared(self, record: Record, ctx: StepContext) -> list[str]:
        """Entries that appeared in the watched dirs since apply ended (a trial added after a
        dedupe): undo would put back files written before they existed."""
        if record.listing is None and record.status == "applied":
            try:
                record.listing = await self._store(record.plan, ctx).load_listing()
            except (OSError, ValueError) as exc:
                return [f"the job's entries recorded at apply cannot be read: {describe_error(exc)}"]
        if not record.listing:
            return []
        out = []
        for d, then in record.listing.items():
            try:
                now = [n for n in await ctx.fs.list_dir(d) if not _own(n)]
            except OSError:
                continue
            own = {posixpath.basename(s.src) for s in record.plan.steps
                   if isinstance(s, MoveStep) and posixpath.dirname(s.src) == d}
            new = sorted(set(now) - set(then) - own)
            new = [n for n in new if not await self._holds_only_own(record, ctx, posixpath.join(d, n))]
            if new:
                where = posixpath.relpath(d, record.target) if d != record.target else posixpath.basename(d)
                out.append(f"{len(new)} new entr{'y' if len(new) == 1 else 'ies'} in {where} since the "
                           f"{record.action}: {_names(new)} — undoing would put back files written before "
                           f"{'it' if len(new) == 1 else 'they'} existed")
        return out

    async def _holds_only_own(self, record: Record, ctx: StepContext, folder: str) -> bool:
        """Whether `folder` holds nothing but what the record's moves put back: in an object
        store a folder of staged copies is gone once they are moved (a prefix is there only
        while it has objects), and comes back with the first of them."""
        moved = {posixpath.basename(s.src) for s in record.plan.steps
                 if isinstance(s, MoveStep) and posixpath.dirname(s.src) == folder}
        if not moved:
            return False
        try:
            return {n for n in await ctx.fs.list_dir(folder) if not _own(n)} <= moved
        except OSError:
            return False

    async def _sweep(self, record: Record, ctx: StepContext) -> None:
        """Remove the temporary files an interrupted run left beside what the plan writes."""
        dirs = {posixpath.dirname(s.path) for s in record.plan.steps if isinstance(s, WriteFileStep)}
        dirs |= {posixpath.dirname(s.backup) for s in record.plan.steps if isinstance(s, WriteFileStep)}
        if record.plan.record_dir:
            dirs.add(record.plan.record_dir)
        for d in sorted(dirs):
            try:
                names = await ctx.fs.list_dir(d)
            except OSError:
                continue
            for name in names:
                if TMP_MARK in name and name.startswith("."):
                    with contextlib.suppress(OSError):
                        await ctx.fs.remove_file(posixpath.join(d, name))

    async def _tidy(self, record: Record, ctx: StepContext) -> None:
        """After an undo or a complete roll-back the target holds exactly what it held before:
        backups identical to what was put back, temporary files of interrupted writes, the
        record's own files and the empty quarantine dirs go. The record stays in this machine's
        index (with its files) and in the journal."""
        fs = ctx.fs
        for step in record.plan.steps:
            if isinstance(step, WriteFileStep):
                await _remove_tmp_leftovers(fs, step.path)
                # a backup identical to what undo put back is a copy of nothing
                if step.old_sha256 is not None:
                    with contextlib.suppress(OSError, TimeoutError):
                        if (await fs.sha256(step.backup, MAX_READ_BYTES) == step.old_sha256
                                and await fs.sha256(step.path, MAX_READ_BYTES) == step.old_sha256):
                            await fs.remove_file(step.backup)
        if not record.plan.record_dir:
            self._index(record)
            return
        store = self._store(record.plan, ctx)
        local = Path(self._local_dir(record.id))
        local.mkdir(parents=True, exist_ok=True)
        for name in (RECORD_FILE, STEPS_LOG, LISTING_FILE):
            path = posixpath.join(store.dir, name)
            try:
                data = await fs.read_regular(path, MAX_READ_BYTES)
            except FileNotFoundError:
                continue
            (local / name).write_bytes(data)
            await fs.remove_file(path)
        self.index.put(record, {"record_dir": str(local), "host": record.host, "on_target": False,
                                **_store_of(record.plan)})
        await _remove_own_tree(fs, store.dir)
        parent = posixpath.dirname(store.dir)
        if posixpath.basename(parent) == QUARANTINE_DIR:
            with contextlib.suppress(OSError):  # other records still live there
                await fs.rmdir(parent)
        else:
            await _remove_empty_aside(fs, parent)

    # -- the journal ---------------------------------------------------------------------------

    def _journal_end(self, record: Record, event: str) -> None:
        """The entry that closes a write: the change is made, so a journal that cannot be
        written is said (in the record's notes), not a reason to fail what was done."""
        try:
            self._journal(record, event)
        except OSError as exc:
            record.notes.append(f"the journal {self.journal.path} could not be written: {describe_error(exc)}")

    def _journal(self, record: Record, event: str) -> None:
        """One journal entry per event of a write: `begin` (write-ahead, before the first
        change), `apply`, `apply-failed`, `finish`, `finish-failed`, `undo`. `before`/`after`
        are the plan's own figures (for dedupe: attempts and trial dir paths) and the before/
        after of every external step that reported them (a leaderboard row)."""
        j = record.plan.meta.get("journal") or {}
        rest = {k: v for k, v in j.items() if k not in ("before", "after")} if isinstance(j, dict) else {}
        before = dict(j.get("before") or {}) if isinstance(j, dict) else {}
        after = dict(j.get("after") or {}) if isinstance(j, dict) else {}
        if event == "undo":
            before, after = after, before
        # every external step's own account, by step index: a leaderboard row's before and after,
        # a command's exit code and output tails (readers such as `--batch journal` unpack them)
        for i, step in enumerate(record.plan.steps):
            result = record.results.get(i) or (step.result if isinstance(step, ExternalStep) else {})
            if isinstance(result, dict) and result:
                after[str(i)] = result
        self.journal.append(
            f"{record.action}:{event}",
            record.target,
            before=before or None,
            after=after or None,
            record=record.id,
            status=record.status,
            steps=len(record.plan.steps),
            done=record.n_done,
            host=record.host,
            experiment=record.experiment,
            error=record.error,
            notes=record.notes or None,
            meta=rest or None,
        )


class _VerifyFailed(Exception):
    pass


async def _remove_record_files(store: RecordStore) -> None:
    for name in (RECORD_FILE, STEPS_LOG):
        with contextlib.suppress(FileNotFoundError):
            await store.fs.remove_file(posixpath.join(store.dir, name))
    await _remove_own_tree(store.fs, store.dir)
    if posixpath.basename(posixpath.dirname(store.dir)) == QUARANTINE_DIR:
        with contextlib.suppress(OSError):
            await store.fs.rmdir(posixpath.dirname(store.dir))


async def _remove_empty_aside(fs: JobFS, root: str) -> None:
    """`<jobs>/.evaldesk-quarantine/<job>` and the quarantine itself, when nothing is left in
    them (rmdir only: anything still there stays)."""
    top = posixpath.dirname(root.rstrip("/"))
    if posixpath.basename(top) != QUARANTINE_DIR:
        return
    for d in (root, top):
        try:
            await fs.rmdir(d)
        except FileNotFoundError:
            continue
        except OSError:
            return


def _step_checkpoint(i: int) -> Callable[[str], None]:
    return lambda name: checkpoint(f"step:{i}:{name}")


def _step_note(store: RecordStore, i: int) -> Callable[[dict[str, Any]], Awaitable[None]]:
    async def note(result: dict[str, Any]) -> None:
        # durable before the step goes on: the record says what may be running
        await store.mark(step=i, state="started", result=result)
    return note


async def _remove_tmp_leftovers(fs: JobFS, path: str) -> None:
    """Temporary files an interrupted atomic write of `path` left beside it."""
    parent = posixpath.dirname(path)
    prefix = tmp_prefix(path)
    try:
        names = await fs.list_dir(parent)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            with contextlib.suppress(OSError):
                await fs.remove_file(posixpath.join(parent, name))


async def _remove_own_tree(fs: JobFS, top: str) -> None:
    """rmdir every dir under `top` that is empty (deepest first), after removing temporary
    files of interrupted writes; no other file is ever removed."""
    try:
        names = await fs.list_dir(top)
    except OSError:
        return
    for name in names:
        path = posixpath.join(top, name)
        st = await fs.lstat(path)  # a symlink is never followed out of the quarantine
        if st is not None and st.is_dir and not st.is_link:
            await _remove_own_tree(fs, path)
        elif TMP_MARK in name:
            with contextlib.suppress(OSError):
                await fs.remove_file(path)
    with contextlib.suppress(OSError):
        await fs.rmdir(top)
