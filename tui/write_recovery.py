"""The console's side of recovery: unfinished writes found at start are offered one by one
(finish / roll back / later), and a write stopped by another writer's lock shows who holds it
(and, when the lock is stale, offers to break it). Mixed into the App, which owns the state;
all IO runs in workers that only post messages.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from textual.message import Message
from textual.screen import ModalScreen

from services.core.models import Snapshot, experiment_key
from services.core.source import Source
from services.remediations import recovery
from services.remediations.errors import LockHeld, StepFailed, WriteRefused
from services.remediations.records import Record, RecordStore
from services.remediations.registry import records_for
from services.remediations.steps import StepContext
from services.transport.fs import LocalFS
from tui.messages import WriteDone

Retry = Callable[[], Awaitable[None]]


class PendingFound(Message):
    """Unfinished writes were found (in this machine's index, or in a source's job dirs)."""

    def __init__(self, pending: list[recovery.Pending]) -> None:
        super().__init__()
        self.pending = pending


class LockBlocked(Message):
    """A write could not take its target's lock; `retry` runs it again once the lock is broken."""

    def __init__(self, what: str, key: str, held: LockHeld, ctx: StepContext, retry: Retry) -> None:
        super().__init__()
        self.what = what
        self.key = key
        self.held = held
        self.ctx = ctx
        self.retry = retry


class RecoveryFlow:
    """Mixin for the App: finding and offering unfinished writes; the lock-held dialog."""

    _offered: set[str]
    _queue: list[recovery.Pending]
    _looked_in: set[str]

    def _init_recovery(self) -> None:
        self._offered = set()
        self._queue = []
        self._looked_in = set()

    # -- finding ----------------------------------------------------------------------------

    def look_for_pending(self, source: Source | None = None, snapshot: Snapshot | None = None) -> None:
        """In this machine's index (no source), or in the quarantines of a source's job dirs
        after its first scan."""
        app = self._app()
        if source is not None:
            if source.label in self._looked_in:
                return
            self._looked_in.add(source.label)
        paths = [e.path for e in snapshot.experiments] if snapshot is not None else []

        async def look() -> None:
            if source is None:
                found = await recovery.from_index(app.write_path.index)
            else:
                found = await recovery.in_job_dirs(source.fs(), paths)
            if found:
                app.post_message(PendingFound(found))

        app.run_worker(look(), name="unfinished writes", group=f"pending-{source.label if source else ''}",
                       exclusive=True, exit_on_error=False, description="looking for unfinished writes")

    def on_pending_found(self, message: PendingFound) -> None:
        for p in message.pending:
            if p.id not in self._offered and all(q.id != p.id for q in self._queue):
                self._queue.append(p)
        self._offer_next()

    def _offer_next(self) -> None:
        app = self._app()
        if not self._queue:
            return
        if isinstance(app.screen, ModalScreen):
            # never over a dialog the person is answering: ask again in a moment
            app.set_timer(1.0, self._offer_next)
            return
        from tui.screens.recovery import RecoveryScreen

        p = self._queue.pop(0)
        self._offered.add(p.id)
        app.push_screen(RecoveryScreen(p, app.write_refusal(f"finishing or rolling back {p.action}")),
                        callback=lambda choice: self._on_recovery_choice(p, choice))

    def _on_recovery_choice(self, p: recovery.Pending, choice: str | None) -> None:
        from tui.screens.recovery import FINISH, ROLL_BACK

        app = self._app()
        if choice not in (FINISH, ROLL_BACK):
            app.record("information", p.action, f"unfinished {p.action} {p.id} left as it is; "
                       "evaldesk asks again at the next start", notify=False)
            self._offer_next()
            return
        app.run_worker(self._recover(p, choice), name=f"{choice} {p.action}", group="write", exclusive=False,
                       exit_on_error=False, description=f"{choice} of {p.action} {p.id}")
        self._offer_next()

    # -- finishing, rolling back ------------------------------------------------------------------

    def _source_of(self, p: recovery.Pending) -> tuple[Source | None, str]:
        """The open source whose experiment is the record's target, and that experiment's key."""
        app = self._app()
        for exp in app.experiments():
            if exp.path == p.target:
                src = app.source_for(experiment_key(exp))
                host = getattr(src, "host", None)
                if (host if isinstance(host, str) else None) == p.host:
                    return src, experiment_key(exp)
        return None, ""

    async def _recover(self, p: recovery.Pending, choice: str) -> None:
        from services.core.registry import open_source
        from services.remediations import registry
        from tui.screens.recovery import FINISH

        app = self._app()
        source, key = self._source_of(p)
        opened = None
        try:
            if source is None:
                opened = source = open_source(recovery.target_spec(p.target, p.host, p.store), app.config)
            record = await _load(app, source, p)
            ctx = registry.context(record.action, source, app.config)

            async def run() -> None:
                if choice == FINISH:
                    done = await app.write_path.finish(record, ctx)
                    summary = f"finished {done.action} {done.id} on {p.target}: all {len(done.plan.steps)} steps done"
                else:
                    done = await app.write_path.undo(record, ctx)
                    summary = f"rolled back {done.action} {done.id} on {p.target}: everything it did was put back"
                for note in done.notes:
                    summary += f" ({note})"
                app.post_message(WriteDone(done.action, key, summary, rescan=bool(key)))

            await guarded(app, f"{choice} of {p.action}", key, ctx, run)
        except (WriteRefused, StepFailed, OSError) as exc:
            app.post_message(WriteDone(p.action, key, f"{choice} of {p.action} {p.id}: {exc}", rescan=bool(key)))
        finally:
            if opened is not None:
                with contextlib.suppress(Exception):
                    await opened.close()

    # -- a lock in the way ----------------------------------------------------------------------

    def on_lock_blocked(self, message: LockBlocked) -> None:
        from tui.screens.recovery import LockScreen

        app = self._app()
        app._writing = False
        held = message.held
        app.record("warning", "lock", str(held), notify=False)

        def answered(broken: bool | None) -> None:
            if not broken:
                app.record("information", "lock", f"{message.what}: not started, nothing was changed", notify=False)
                return

            async def break_then_retry() -> None:
                try:
                    owner = await app.write_path.break_lock(message.ctx, held)
                except WriteRefused as exc:
                    app.post_message(WriteDone("lock", message.key, f"lock not broken: {exc}", rescan=False))
                    return
                who = owner.describe(app.now()) if owner is not None else "a writer that never said who it was"
                app.post_message(WriteDone("lock", message.key, f"broke the stale lock held by {who}",
                                           rescan=False))
                await message.retry()

            app._writing = True
            app.run_worker(break_then_retry(), name="break lock", group="write", exclusive=False,
                           exit_on_error=False, description=f"breaking the lock for {message.what}")

        app.push_screen(LockScreen(message.what, held, app.now()), callback=answered)

    def _app(self) -> Any:
        # the App this is mixed into (typed loosely: a module the App imports cannot import it back)
        return self


async def guarded(app: Any, what: str, key: str, ctx: StepContext, run: Retry) -> None:
    """Run a write; a lock in the way becomes the lock dialog, with `run` as its retry."""
    try:
        await run()
    except LockHeld as held:
        app.post_message(LockBlocked(what, key, held, ctx, lambda: guarded(app, what, key, ctx, run)))


async def _load(app: Any, source: Source, p: recovery.Pending) -> Record:
    """The record of a pending write, read where it lives (the job's quarantine, or this machine)."""
    for record in await records_for(source.fs(), p.target):
        if record.id == p.id:
            return record
    entry = app.write_path.index.get(p.id) or {}
    loc = entry.get("location") or {}
    if loc.get("record_dir") and not loc.get("on_target"):
        return await RecordStore(LocalFS(), str(loc["record_dir"])).load()
    raise WriteRefused(f"the record {p.id} is no longer in {p.target}")
