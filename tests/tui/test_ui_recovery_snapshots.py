"""SVG snapshots of the write path's dialogs at 80x24 and 120x40: an unfinished write found at
start, and a target held by a stale lock. Fixed records and a fixed clock, so they never move.

Regenerate with: python -m pytest tests/tui/test_ui_recovery_snapshots.py --snapshot-update
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from services.remediations.errors import LockHeld
from services.remediations.lock import LockOwner
from services.remediations.recovery import Pending
from tui.screens.recovery import LockScreen, RecoveryScreen

try:
    from ui_demo import FIXED_NOW, make_demo_app, settle, shared_demo
except ImportError:  # collected as a package
    from tests.support.ui_demo import FIXED_NOW, make_demo_app, settle, shared_demo

SIZES = [(80, 24), (120, 40)]
JOB = "/data/jobs/dev_set_v2_gpt-5-mini_2026-11-19__08-30-00"
PENDING = Pending(id="20261120T180000000000Z-dedupe-3f9a1c", action="dedupe", target=JOB, host="login-a",
                  status="applying", n_done=4, n_steps=22, created_at=FIXED_NOW - timedelta(minutes=20),
                  user="alice", machine="ws-17", pid=31337)
OWNER = LockOwner(host="login-b", pid=4242, user="bob", started_at=FIXED_NOW - timedelta(hours=7),
                  action="dedupe", record="20261120T110500000000Z-dedupe-77aa01")
HELD = LockHeld(OWNER, f"{JOB}/.evaldesk-lock", "held for 7.0 h, over the 6 h limit", JOB)


def opened(make: Callable[[object], object]) -> Callable[[object], Awaitable[None]]:
    async def run_before(pilot: object) -> None:
        await settle(pilot)
        app = pilot.app  # type: ignore[attr-defined]
        app.clear_notifications()  # a monitor rule's toast would cover the dialog
        app.push_screen(make(app))
        await settle(pilot, 2)
        app.clear_notifications()
        await pilot.pause()  # type: ignore[attr-defined]

    return run_before


DIALOGS = {
    "recovery": opened(lambda app: RecoveryScreen(PENDING)),
    "lock": opened(lambda app: LockScreen("dedupe of dev_set_v2_gpt-5-mini_2026-11-19__08-30-00", HELD,
                                          app.now())),  # type: ignore[attr-defined]
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dialog", list(DIALOGS))
def test_dialog_snapshot(snap_compare: Callable[..., bool], tmp_path_factory: pytest.TempPathFactory,
                         tmp_path: Path, dialog: str, size: tuple[int, int]) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=DIALOGS[dialog])
