"""The console's leaderboard poller: a worker reads the leaderboard (and the trace datasets its
rows link) on its own interval and posts the view; the App re-audits with it.

The leaderboard is not a source of experiments: it only sharpens their audits. A read that
fails keeps the last view, marked stale, and the header says the leaderboard is down; nothing
waits on it.
"""

from __future__ import annotations

from typing import Any, Protocol

from textual.message import Message

from services.core.config import Config
from services.core.models import Experiment, Snapshot
from services.leaderboard.rows import LeaderboardView

LABEL = "leaderboard"


class LeaderboardRead(Message):
    def __init__(self, view: LeaderboardView) -> None:
        super().__init__()
        self.view = view


class AuditsRefreshed(Message):
    """Audits re-made with a new leaderboard view (experiment key → report or exception)."""

    def __init__(self, audits: dict[str, Any]) -> None:
        super().__init__()
        self.audits = audits


class PollingApp(Protocol):
    """What the poller needs of the App."""

    config: Config
    leaderboard_view: LeaderboardView | None
    snapshots: dict[str, Snapshot]

    def experiments(self) -> list[Experiment]: ...

    def post_message(self, message: Message) -> bool: ...

    def _audit_all(self, snapshot: Snapshot) -> dict[str, object]: ...


def configured(app: PollingApp) -> bool:
    from services.leaderboard import configured as has_leaderboard

    return has_leaderboard(app.config)


async def read(app: PollingApp) -> None:
    """One read; the App runs it as a worker in the `leaderboard` group."""
    from services.leaderboard.view import load_view

    view = await load_view(app.config, app.experiments(), previous=app.leaderboard_view)
    app.post_message(LeaderboardRead(view))


async def reaudit(app: PollingApp) -> None:
    import asyncio

    audits: dict[str, Any] = {}
    for snap in list(app.snapshots.values()):
        audits.update(await asyncio.to_thread(app._audit_all, snap))
    app.post_message(AuditsRefreshed(audits))
