"""SVG snapshots of the AISBench views at 80x24 and 120x40: the list with AISBench tasks beside
the Harbor jobs, the results view of a perf run (its latency plot) and of a failed run, and the
needs_input dialog. Demo data and a fixed clock, so nothing moves between runs.

Regenerate with: python -m pytest tests/tui/test_ui_aisbench_snapshots.py --snapshot-update
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

try:
    from test_ui_aisbench import DOWN, NEEDS, PERF, aisbench_root, make_app, select
    from ui_demo import settle, shared_demo
except ImportError:  # collected as a package
    from tests.support.ui_demo import settle, shared_demo
    from tests.tui.test_ui_aisbench import DOWN, NEEDS, PERF, aisbench_root, make_app, select

SIZES = [(80, 24), (120, 40)]
Pilot = object


async def quiet(pilot: Pilot) -> None:
    pilot.app.clear_notifications()  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


async def at_home(pilot: Pilot) -> None:
    await settle(pilot)
    # two sources finish their scans in either order, and the cursor stays on the row it was
    # on: put it on a task, whose line at the bottom then says why it failed
    select(pilot.app, DOWN)  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    await quiet(pilot)


def at_results(key: str) -> Callable[[Pilot], Awaitable[None]]:
    async def go(pilot: Pilot) -> None:
        await settle(pilot)
        pilot.app.open_results(key)  # type: ignore[attr-defined]
        await settle(pilot)
        await quiet(pilot)

    return go


async def at_inputs(pilot: Pilot) -> None:
    await settle(pilot)
    pilot.app.open_audit(NEEDS)  # type: ignore[attr-defined]
    await settle(pilot)
    await quiet(pilot)  # toasts belong to the screen under the dialog: clear them there
    await pilot.press("x")  # type: ignore[attr-defined]
    await settle(pilot)
    await quiet(pilot)


SCREENS: dict[str, Callable[[Pilot], Awaitable[None]]] = {
    "experiments": at_home,
    "results_perf": at_results(PERF),
    "results_failed": at_results(DOWN),
    "inputs": at_inputs,
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_aisbench_snapshot(snap_compare: Callable[..., bool], tmp_path_factory: pytest.TempPathFactory,
                           tmp_path: Path, screen: str, size: tuple[int, int]) -> None:
    app = make_app(shared_demo(tmp_path_factory), aisbench_root(tmp_path_factory), tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=SCREENS[screen])
