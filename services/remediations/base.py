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
   so and can be broken on request.
4. **Write-ahead record**: under the lock, the plan is re-made from fresh reads and must hash
   the same (what was previewed is what runs); then `record.json` (the plan, every step
   pending) is written durably before the first change, and each step is marked done in an
   append-only `steps.log` (fsync'd) as it completes. The record is the manifest and the
   journal entry.
5. **Apply** step by step. A step that cannot be done exactly (permission denied, a cross-
   device rename, a target that is not what the plan read) stops the plan and what was done
   is rolled back; the error names the path.
6. **Verify** every step's after-state.
7. **Undo / recover**: a record left pending (crash, kill -9, lost connection) is found at the
   next start (`RecordIndex.unfinished`) and can be finished or rolled back; undo first checks
   that everything it restores over is still what apply left (hashes) and otherwise refuses
   and says what changed — it never overwrites newer content.

`--read-only` is decided here, once (`WritePath.refusal`). Records hold paths as written by
the OS: names that are not UTF-8 survive through JSON's surrogate escapes (stdlib json), and
secrets never enter a plan — steps name environment variables, never their values.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import signal
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from services.core.config import state_dir
from services.core.journal import Journal, current_user
from services.remediations.errors import StepFailed, WriteRefused
from services.remediations.lock import DirLock
from services.remediations.records import (
    FINAL,
    QUARANTINE_DIR,
    RECORD_FILE,
    STEPS_LOG,
    Plan,
    Record,
    RecordIndex,
    RecordStore,
)
from services.remediations.steps import (
    MAX_READ_BYTES,
    MoveStep,
    StepContext,
    WriteFileStep,
    describe_error,
    do_step,
    step_state,
    undo_check,
    undo_step,
)
from services.transport.fs import JobFS, LocalFS

# ---- the executor ------------------------------------------------------------------------------

Replan = Callable[[], Awaitable[Plan]]
Progress = Callable[[int, int, str], None]


class WritePath:
    """Carries out plans; the only object in evaldesk that changes anything outside itself."""

    # a test (or a person debugging recovery) can name a point at which the process kills itself
    CRASH_ENV: ClassVar[str] = "EVALDESK_CRASH_AT"

    def __init__(self, journal: Journal | None = None, *, read_only: bool = False,
                 index: RecordIndex | None = None) -> None:
        self.journal = journal or Journal()
        self.read_only = read_only
        self.index = index or RecordIndex()

    # -- read-only is decided here, once
    def refusal(self, action: str) -> str | None:
        if self.read_only:
            return f"read-only mode is on: {action} would change things outside evaldesk, so it is disabled"
        return None

    def _checkpoint(self, name: str) -> None:
        want = os.environ.get(self.CRASH_ENV)
        if want and want == name:
            os.kill(os.getpid(), signal.SIGKILL)

    @staticmethod
    def _store(plan: Plan, ctx: StepContext) -> RecordStore:
        if plan.record_dir:
            return RecordStore(ctx.fs, plan.record_dir)
        return RecordStore(LocalFS(), str(state_dir() / "records" / plan.id))

    @staticmethod
    def _location(plan: Plan) -> dict[str, Any]:
        return {"record_dir": plan.record_dir or str(state_dir() / "records" / plan.id), "host": plan.host,
                "on_target": bool(plan.record_dir)}

    async def apply(self, plan: Plan, ctx: StepContext, *, replan: Replan | None = None,
                    progress: Progress | None = None) -> Record:
        """Lock, check the plan still holds, record, apply, verify. Raises WriteRefused (nothing
        changed) or StepFailed (rolled back, or says what could not be)."""
        why = self.refusal(plan.action)
        if why:
            raise WriteRefused(why)
        if plan.nothing_to_do:
            raise WriteRefused(f"{plan.title}: nothing to do")
        if plan.blocked:
            raise WriteRefused(plan.blocked)
        lock = DirLock(ctx.fs, plan.lock_dir) if plan.lock_dir else None
        if lock is not None:
            await lock.acquire(plan.action, plan.id)
        try:
            self._checkpoint("locked")
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
            if lock is not None:
                await lock.release()

    async def _run(self, plan: Plan, ctx: StepContext, progress: Progress | None) -> Record:
        record = Record(id=plan.id, action=plan.action, target=plan.target, host=plan.host,
                        experiment=plan.experiment, user=current_user(), machine=socket.gethostname(),
                        pid=os.getpid(), created_at=datetime.now(UTC), done=[False] * len(plan.steps), plan=plan)
        store = self._store(plan, ctx)
        await store.create(record)
        self.index.put(record, self._location(plan))
        self._checkpoint("recorded")
        n = len(plan.steps)
        for i, step in enumerate(plan.steps):
            if progress:
                progress(i, n, getattr(step, "label", "") or plan.action)
            try:
                result = await do_step(step, ctx)
            except Exception as exc:
                what = getattr(step, "label", "") or step.kind
                message = f"step {i + 1} of {n} ({what}) failed: {describe_error(exc)}"
                await self._fail(record, store, ctx, message)
                raise StepFailed(await self._rollback_message(record, message), record.id) from None
            record.done[i] = True
            if result:
                record.results[i] = result
            await store.mark(step=i, state="done", result=result or None)
            self._checkpoint(f"step:{i}")
        problems = []
        for i, step in enumerate(plan.steps):
            state, detail = await step_state(step, ctx)
            if state != "done":
                problems.append(f"step {i + 1}: {detail or state}")
        if problems:
            message = "verify failed: " + "; ".join(problems)
            await self._fail(record, store, ctx, message)
            raise StepFailed(await self._rollback_message(record, message), record.id)
        record.status = "applied"
        record.finished_at = datetime.now(UTC)
        await store.mark(status="applied")
        self.index.put(record, self._location(plan))
        self._journal(record, "apply")
        self._checkpoint("applied")
        return record

    async def _fail(self, record: Record, store: RecordStore, ctx: StepContext, message: str) -> None:
        record.status = "failed"
        record.error = message
        with contextlib.suppress(OSError):
            await store.mark(status="failed", error=message)
        self.index.put(record, self._location(record.plan))
        rolled = await self._invert(record, store, ctx, strict=False)
        if rolled is None:
            record.status = "rolled_back"
            with contextlib.suppress(OSError):
                await store.mark(status="rolled_back")
            self.index.put(record, self._location(record.plan))
        self._journal(record, "apply-failed")

    async def _rollback_message(self, record: Record, message: str) -> str:
        if record.status == "rolled_back":
            return f"{message}; everything done before it was put back (record {record.id})"
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
                blocked.append(f"step {i + 1}: {describe_error(exc)}")
                continue
            record.done[i] = False
            await store.mark(step=i, state="undone")
        return blocked or None

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
                blocked.append(detail)
                continue
            why = await undo_check(step, ctx)
            if why:
                blocked.append(why)
                continue
            if isinstance(step, MoveStep):
                lines.append(f"  restore {step.label or step.src}")
            elif isinstance(step, WriteFileStep):
                lines.append(f"  put back the original {step.label or step.path}")
            else:
                lines.append(f"  undo {step.label}")
        return lines, blocked

    async def undo(self, record: Record, ctx: StepContext) -> Record:
        """Put back what a record changed. All or nothing: if anything it would restore over has
        changed since apply, it refuses, says what, and the record stays as it was."""
        why = self.refusal(f"undo of {record.action}")
        if why:
            raise WriteRefused(why)
        if record.status in ("undone", "rolled_back"):
            raise WriteRefused(f"record {record.id} is already {record.status.replace('_', ' ')}: nothing to undo")
        lock = DirLock(ctx.fs, record.plan.lock_dir) if record.plan.lock_dir else None
        if lock is not None:
            await lock.acquire(f"undo {record.action}", record.id)
        try:
            _, blocked = await self.undo_preview(record, ctx)
            if blocked:
                raise WriteRefused("undo refused, nothing changed: " + "; ".join(blocked))
            store = self._store(record.plan, ctx)
            left = await self._invert(record, store, ctx, strict=True)
            if left:
                record.error = "; ".join(left)
                await store.mark(status=record.status, error=record.error)
                self.index.put(record, self._location(record.plan))
                raise StepFailed("undo stopped: " + record.error, record.id)
            record.status = "undone"
            record.undone_at = datetime.now(UTC)
            await store.mark(status="undone")
            self.index.put(record, self._location(record.plan))
            self._journal(record, "undo")
            await self._tidy(record, ctx)
            return record
        finally:
            if lock is not None:
                await lock.release()

    async def finish(self, record: Record, ctx: StepContext, progress: Progress | None = None) -> Record:
        """Carry an interrupted record on from where the target stands."""
        why = self.refusal(f"finishing {record.action}")
        if why:
            raise WriteRefused(why)
        if record.status in FINAL:
            raise WriteRefused(f"record {record.id} is {record.status}: nothing to finish")
        lock = DirLock(ctx.fs, record.plan.lock_dir) if record.plan.lock_dir else None
        if lock is not None:
            await lock.acquire(f"finish {record.action}", record.id)
        try:
            store = self._store(record.plan, ctx)
            for i, step in enumerate(record.plan.steps):
                state, detail = await step_state(step, ctx)
                if state == "conflict":
                    raise WriteRefused(f"cannot finish: step {i + 1}: {detail}")
                if state == "not_done":
                    if progress:
                        progress(i, len(record.plan.steps), getattr(step, "label", "") or record.action)
                    await do_step(step, ctx)
                if not record.done[i]:
                    record.done[i] = True
                    await store.mark(step=i, state="done")
            record.status = "applied"
            record.finished_at = datetime.now(UTC)
            await store.mark(status="applied")
            self.index.put(record, self._location(record.plan))
            self._journal(record, "finish")
            return record
        finally:
            if lock is not None:
                await lock.release()

    async def _tidy(self, record: Record, ctx: StepContext) -> None:
        """After an undo the target holds exactly what it held before: empty quarantine dirs and
        the record's own files on the target go (the record stays in this machine's index and
        the journal)."""
        if not record.plan.record_dir:
            return
        fs = ctx.fs
        store = self._store(record.plan, ctx)
        for step in record.plan.steps:
            # a backup identical to what undo put back is a copy of nothing
            if (isinstance(step, WriteFileStep) and step.old_sha256 is not None
                    and await fs.sha256(step.backup, MAX_READ_BYTES) == step.old_sha256
                    and await fs.sha256(step.path, MAX_READ_BYTES) == step.old_sha256):
                await fs.remove_file(step.backup)
        local = state_dir() / "records" / record.id
        local.mkdir(parents=True, exist_ok=True)
        for name in (RECORD_FILE, STEPS_LOG):
            path = posixpath.join(store.dir, name)
            try:
                (local / name).write_bytes(await fs.read_regular(path, MAX_READ_BYTES))
                await fs.remove_file(path)
            except FileNotFoundError:
                pass
        self.index.put(record, {"record_dir": str(local), "host": None, "on_target": False})
        await _remove_empty_tree(fs, store.dir)
        parent = posixpath.dirname(store.dir)
        if posixpath.basename(parent) == QUARANTINE_DIR:
            with contextlib.suppress(OSError):  # other records still live there
                await fs.rmdir(parent)

    def _journal(self, record: Record, event: str) -> None:
        self.journal.append(
            f"{record.action}:{event}",
            record.target,
            before={"status": "before " + record.action, "steps": len(record.plan.steps)},
            after={"status": record.status, "done": record.n_done, **{str(k): v for k, v in record.results.items()}},
            record=record.id,
            host=record.host,
            experiment=record.experiment,
            error=record.error,
            meta=record.plan.meta.get("journal", {}),
        )


async def _remove_empty_tree(fs: JobFS, top: str) -> None:
    """rmdir every dir under `top` that is empty (deepest first); files are never removed."""
    try:
        names = await fs.list_dir(top)
    except OSError:
        return
    for name in names:
        path = posixpath.join(top, name)
        st = await fs.stat(path)
        if st is not None and st.is_dir:
            await _remove_empty_tree(fs, path)
    with contextlib.suppress(OSError):
        await fs.rmdir(top)


