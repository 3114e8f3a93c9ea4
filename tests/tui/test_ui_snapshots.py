"""SVG snapshots of the console's screens at 80x24 and 120x40, on the demo data with a fixed
clock (ages, refresh time and audits never move) and cursor blink off.

Regenerate with: python -m pytest tests/tui/test_ui_snapshots.py --snapshot-update
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tui.app import EvaldeskApp
from widgets.checklist import Checklist

try:
    from ui_demo import DEV_KEY, make_demo_app, settle, snapshot_jobs
except ImportError:  # collected as a package
    from tests.support.ui_demo import DEV_KEY, make_demo_app, settle, snapshot_jobs

SIZES = [(80, 24), (120, 40)]
Pilot = object


def snapshot_app(factory: pytest.TempPathFactory, state: Path) -> EvaldeskApp:
    """The console on the demo jobs (written once into a tmp dir) with the clock fixed at
    the demo's 'now' + 5 minutes, no polling and no cursor blink."""
    return make_demo_app(snapshot_jobs(), state)


async def quiet(pilot: Pilot) -> None:
    """Toasts (a monitor rule firing on the running demo job) would cover the screen."""
    pilot.app.clear_notifications()  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


async def at_home(pilot: Pilot) -> None:
    await settle(pilot)
    await quiet(pilot)


async def at_audit(pilot: Pilot) -> None:
    await settle(pilot)
    app = pilot.app  # type: ignore[attr-defined]
    app.open_audit(DEV_KEY)
    await quiet(pilot)


async def at_confirm(pilot: Pilot) -> None:
    await at_audit(pilot)
    app = pilot.app  # type: ignore[attr-defined]
    checklist = app.screen.query_one(Checklist)
    checklist.highlighted = [i.id for i in checklist.items].index("duplicates")
    await pilot.press("x")  # type: ignore[attr-defined]
    await settle(pilot, 3)
    await quiet(pilot)


async def at_help(pilot: Pilot) -> None:
    await settle(pilot)
    await pilot.press("question_mark")  # type: ignore[attr-defined]
    await quiet(pilot)


async def at_log(pilot: Pilot) -> None:
    await settle(pilot)
    await pilot.press("L")  # type: ignore[attr-defined]
    await quiet(pilot)


async def at_describe(pilot: Pilot) -> None:
    await settle(pilot)
    await pilot.press("d")  # type: ignore[attr-defined]
    await quiet(pilot)


async def at_marked_dedupe(pilot: Pilot) -> None:
    """Two runs marked, their dedupe in one preview (`:dedupe`)."""
    await settle(pilot)
    await pilot.press("space", "space", "colon", *"dedupe", "enter")  # type: ignore[attr-defined]
    await settle(pilot)
    await quiet(pilot)


async def at_command_line(pilot: Pilot) -> None:
    await settle(pilot)
    await quiet(pilot)
    await pilot.press("colon", "j")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


async def at_journal(pilot: Pilot) -> None:
    await settle(pilot)
    await pilot.press("colon", *"journal", "enter")  # type: ignore[attr-defined]
    await settle(pilot)
    await quiet(pilot)


SCREENS: dict[str, Callable[[Pilot], Awaitable[None]]] = {
    "experiments": at_home,
    "audit": at_audit,
    "confirm": at_confirm,
    "help": at_help,
    "log": at_log,
    "describe": at_describe,
    "marked-dedupe": at_marked_dedupe,
    "command-line": at_command_line,
    "journal": at_journal,
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen_snapshot(
    snap_compare: Callable[..., bool],
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    screen: str,
    size: tuple[int, int],
) -> None:
    app = snapshot_app(tmp_path_factory, tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=SCREENS[screen])


def test_filtered_home_snapshot(
    snap_compare: Callable[..., bool], tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    app = snapshot_app(tmp_path_factory, tmp_path)
    assert snap_compare(app, terminal_size=(80, 24), press=["slash", *"terminal", "enter"],
                        run_before=at_home)
