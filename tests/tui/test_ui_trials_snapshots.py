"""SVG snapshots of the trials screen at 80x24 and 120x40 on the demo data: fixed clock, no
polling of sources, no cursor blink, and the log tail waited for so its text is settled.

Regenerate with: python -m pytest tests/tui/test_ui_trials_snapshots.py --snapshot-update
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tui.screens.trials import TrialsScreen

try:
    from ui_demo import make_demo_app, settle, shared_demo
except ImportError:  # collected as a package
    from tests.support.ui_demo import make_demo_app, settle, shared_demo

SERA = "demo::terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00"


async def _open(pilot: Any, keys: list[str]) -> None:
    app = pilot.app
    await settle(pilot)
    app.open_trials(SERA)
    await settle(pilot)
    for key in keys:
        await pilot.press(key)
    screen = app.screen
    assert isinstance(screen, TrialsScreen)
    deadline = time.monotonic() + 10
    while True:
        await settle(pilot, 2)
        trial = screen.selected_trial()
        info = screen.diagnose.info
        tail = screen.log_tail
        ready = trial is None or (info is not None and info.title == trial.trial_name
                                  and bool(tail.lines) and trial.trial_name in tail.title)
        if ready or time.monotonic() > deadline:
            break
    # the app's own notices (monitor rules on the demo's running job) would cover the panels
    app.clear_notifications()
    await pilot.pause(0.1)


def at(keys: list[str]) -> Callable[[Any], Awaitable[None]]:
    async def run_before(pilot: Any) -> None:
        await _open(pilot, keys)

    return run_before


CASES = [
    ("trials_80x24", (80, 24), at(["down", "down"])),
    ("trials_errored_diagnose_80x24", (80, 24), at(["s", "s", "d"])),
    ("trials_grouped_80x24", (80, 24), at(["E"])),
    ("trials_errored_120x40", (120, 40), at(["s", "s"])),
    ("trials_marked_80x24", (80, 24), at(["space", "space"])),
]


@pytest.mark.parametrize(("name", "size", "run_before"), CASES, ids=[c[0] for c in CASES])
def test_trials_snapshot(name: str, size: tuple[int, int], run_before: Callable[[Any], Awaitable[None]],
                         snap_compare: Any, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=run_before)
