"""How a write says no: a refusal changed nothing; a failed step says what was put back.

Batch maps them to exit codes: a lock held by someone else, read-only mode and a target
evaldesk cannot write to are exit 2 (like an unreachable source); any other refusal or a
failed step is exit 1 (something needs a person).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Holder(Protocol):
    def describe(self, now: datetime | None = None) -> str: ...


class WriteRefused(Exception):
    """Nothing was changed, on purpose: read-only, a plan the target no longer matches, a
    lock held by someone else, an undo over newer content. The message says why."""


class ReadOnly(WriteRefused):
    """Read-only mode is on (`--read-only`, `read_only = true`, EVALDESK_READ_ONLY)."""


class TargetUnwritable(WriteRefused):
    """evaldesk may not write where the target lives (the lock or the record could not be
    made: permission denied, read-only filesystem); nothing was changed."""


class LockHeld(WriteRefused):
    """Another writer holds the target's lock. `stale_reason` is set when the holder looks
    gone (a dead pid on this host, or a lock older than the limit): it may then be broken."""

    def __init__(self, owner: Holder | None, path: str, stale_reason: str | None, target: str = "") -> None:
        self.owner = owner
        self.path = path
        self.target = target
        self.stale_reason = stale_reason
        who = owner.describe() if owner is not None else "a writer that has not said who it is yet"
        what = f"{path} is locked by {who}"
        if stale_reason:
            what += f"; the lock looks stale ({stale_reason}) and can be broken"
        super().__init__(what)

    @property
    def can_break(self) -> bool:
        return self.stale_reason is not None


class StepFailed(Exception):
    """A step could not be done exactly; what was done before it has been rolled back (or the
    message says what could not be). `record_id` names the record that tells the story."""

    def __init__(self, message: str, record_id: str) -> None:
        super().__init__(message)
        self.record_id = record_id
