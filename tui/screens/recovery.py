"""Dialogs of the write path that are not a dry run: an unfinished write found at start
(finish / roll back / later), and a target locked by another writer (who, since when, and —
when the lock looks stale — breaking it, which this dialog is the confirmation of)."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from services.remediations.errors import LockHeld
from services.remediations.lock import LockOwner
from services.remediations.recovery import Pending
from tui.actions import bindings_for

FINISH, ROLL_BACK, LATER = "finish", "rollback", "later"


class RecoveryScreen(ModalScreen[str]):
    """An unfinished write, offered as Finish, Roll back or Later (the default: nothing changes)."""

    SCREEN_ID = "recovery"
    BINDINGS = bindings_for("recovery")
    CSS_PATH = "recovery.tcss"

    def __init__(self, pending: Pending, refusal: str | None = None) -> None:
        super().__init__()
        self.pending = pending
        self.refusal = refusal

    def compose(self) -> ComposeResult:
        p = self.pending
        with Vertical(id="dialog") as box:
            box.border_title = "Unfinished write"
            yield Static(Text(f"An earlier {p.action} stopped before it ended (a crash, a kill or a lost "
                              "connection). Its record says how far it got:"), classes="title")
            yield Static(Text("\n".join(p.summary())), classes="body", id="summary")
            if self.refusal:
                yield Static(Text(self.refusal), classes="stale", id="refusal")
            else:
                yield Static(Text("Finish carries it on to the end. Roll back puts back everything it did. "
                                  "Later leaves it as it is; evaldesk asks again at the next start."), classes="hint")
            with Horizontal(id="buttons"):
                yield Button("Finish \\[f]", id="finish", variant="primary", disabled=self.refusal is not None)
                yield Button("Roll back \\[b]", id="rollback", variant="warning", disabled=self.refusal is not None)
                yield Button("Later \\[esc]", id="later")

    def on_mount(self) -> None:
        self.query_one("#later", Button).focus()  # a stray enter changes nothing

    def action_finish(self) -> None:
        if self.refusal is None:
            self.dismiss(FINISH)
        else:
            self.app.bell()

    def action_rollback(self) -> None:
        if self.refusal is None:
            self.dismiss(ROLL_BACK)
        else:
            self.app.bell()

    def action_later(self) -> None:
        self.dismiss(LATER)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        {"finish": self.action_finish, "rollback": self.action_rollback}.get(event.button.id or "",
                                                                              self.action_later)()


def holder_lines(held: LockHeld, now: datetime) -> list[str]:
    owner = held.owner if isinstance(held.owner, LockOwner) else None
    if owner is None:
        return [f"Holder:  a writer that has not said who it is (no owner in {held.path})"]
    lines = [f"Holder:  {owner.user}@{owner.host}, pid {owner.pid}"]
    if owner.action:
        lines.append(f"Doing:   {owner.action} {owner.record}".rstrip())
    since = owner.started_at.astimezone(UTC)
    minutes = max((now - owner.started_at).total_seconds(), 0) / 60
    ago = f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"
    lines.append(f"Since:   {since:%Y-%m-%d %H:%M:%S} UTC ({ago} ago)")
    return lines


class LockScreen(ModalScreen[bool]):
    """A write could not start: another writer holds the target's lock. A stale lock may be
    broken from here — this dialog is that confirmation; a live one never can."""

    SCREEN_ID = "lock"
    BINDINGS = bindings_for("lock")
    CSS_PATH = "recovery.tcss"

    def __init__(self, what: str, held: LockHeld, now: datetime) -> None:
        super().__init__()
        self.what = what
        self.held = held
        self.now = now

    def compose(self) -> ComposeResult:
        held = self.held
        with Vertical(id="dialog") as box:
            box.border_title = "Locked"
            yield Static(Text(f"{self.what} cannot start: {held.target or held.path} is being changed by "
                              "another writer. Nothing was changed."), classes="title")
            yield Static(Text("\n".join(holder_lines(held, self.now))), classes="body", id="holder")
            if held.can_break:
                yield Static(Text(f"The lock looks stale: {held.stale_reason}. Breaking it lets this write go "
                                  "ahead; do it only if you are sure that writer is gone."), classes="stale",
                             id="stale")
            else:
                yield Static(Text("Try again when it is done."), classes="hint")
            with Horizontal(id="buttons"):
                if held.can_break:
                    yield Button("Break lock \\[b]", id="break", variant="error")
                yield Button("Close \\[esc]", id="close", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()

    def action_break(self) -> None:
        if self.held.can_break:
            self.dismiss(True)
        else:
            self.app.bell()

    def action_close(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "break":
            self.action_break()
        else:
            self.action_close()
