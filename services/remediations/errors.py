"""How a write says no: a refusal changed nothing; a failed step says what was put back."""

from __future__ import annotations

from typing import Protocol


class Holder(Protocol):
    def describe(self) -> str: ...


class WriteRefused(Exception):
    """Nothing was changed, on purpose: read-only, a plan the target no longer matches, a
    lock held by someone else, an undo over newer content. The message says why."""


class LockHeld(WriteRefused):
    def __init__(self, owner: Holder, path: str, stale_reason: str | None) -> None:
        self.owner = owner
        self.path = path
        self.stale_reason = stale_reason
        what = f"{path} is locked by {owner.describe()}"
        if stale_reason:
            what += f"; the lock looks stale ({stale_reason}) and can be broken"
        super().__init__(what)


class StepFailed(Exception):
    """A step could not be done exactly; what was done before it has been rolled back (or the
    message says what could not be). `record_id` names the record that tells the story."""

    def __init__(self, message: str, record_id: str) -> None:
        super().__init__(message)
        self.record_id = record_id
