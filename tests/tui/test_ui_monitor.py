"""Pilot tests and SVG snapshots of the live monitor, on a Harbor job played back step by step
with the App's clock tied to the playback (so every running time and idle time is fixed).

Regenerate the snapshots with: python -m pytest tests/tui/test_ui_monitor.py --snapshot-update
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from services.core.config import Config
from services.core.xdg import default_baselines_dir
from services.harbor.source import HarborSource
from tui.app import EvaldeskApp
from tui.screens.experiments import ExperimentsScreen
from tui.screens.monitor import MonitorScreen

try:
    from playback import JobPlayback, Script
    from ui_demo import settle, use_utc
except ImportError:  # collected as a package
    from tests.support.playback import JobPlayback, Script
    from tests.support.ui_demo import settle, use_utc

TASKS = [
    "fix-git-history", "build-cython-ext", "kv-store-grpc", "nginx-proxy", "sqlite-wal", "rust-cli",
    "pandas-etl", "cron-backup", "tls-certs", "docker-compose", "pytorch-ckpt", "raft-log", "redis-cluster",
    "latex-build", "openssl-fips", "django-admin", "sympy-simplify", "regex-engine", "png-decoder",
    "make-deps", "git-bisect", "jq-filters", "ffmpeg-trim", "postgres-index", "lua-sandbox", "wasm-build",
    "grpc-health", "bash-lint", "s3-sync", "tar-restore",
]
JOB = "terminal_bench_2_playback-model_2026-11-20__16-00-00"
KEY = f"live::{JOB}"


def live_script(pb: JobPlayback) -> Script:
    """Eight trials start; every two minutes two finish and two start. `fix-git-history` keeps
    working past 1.5 × its 10 min timeout (rule d); two others never log (dispatched)."""
    queue = list(TASKS)
    first: list[str] = []

    def begin(p: JobPlayback) -> None:
        first.extend(p.start_many([queue.pop(0) for _ in range(8)]))
        p.advance(60)
        for n in first[3:]:
            p.log(n, "episode 0: keystrokes='ls -la'")
        p.log(first[0], "episode 0: keystrokes='git log --oneline'")

    def tick(i: int) -> Callable[[JobPlayback], None]:
        def step(p: JobPlayback) -> None:
            p.advance(120)
            silent = set(first[1:3])
            workers = [n for n in p.running() if n not in silent and n != first[0]]
            for j, n in enumerate(workers[:2]):
                if i % 3 == 2 and j == 1:
                    p.finish(n, exception="DaytonaError")
                else:
                    p.finish(n, reward=1.0 if (i + j) % 2 == 0 else 0.0)
            for n in p.running():
                if n not in silent:
                    p.log(n, f"episode {i + 1}: keystrokes='make -j4' tokens in={1200 * (i + 3)}")
            for _ in range(2):
                if queue:
                    p.start(queue.pop(0))

        return step

    return Script(pb, [begin, *(tick(i) for i in range(9))])


def make_app(tmp_path: Path, baseline: float | None = 0.6) -> tuple[EvaldeskApp, Script]:
    use_utc()
    if baseline is not None:
        folder = default_baselines_dir()  # the config dir's baselines/
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tb2-reference.json").write_text(
            json.dumps({"benchmark": "terminal_bench_2", "pass_rate": baseline}))
    pb = JobPlayback(tmp_path / "jobs", name=JOB, planned=30)
    config = Config(journal_path=str(tmp_path / "journal.jsonl"))
    source = HarborSource(tmp_path / "jobs", config.policy, label="live")
    app = EvaldeskApp([source], config, now=pb.clock, poll=False, cursor_blink=False)
    return app, live_script(pb)


async def play(pilot: object, script: Script, steps: int | None = None) -> None:
    app = pilot.app  # type: ignore[attr-defined]
    await settle(pilot)
    for _ in range(steps if steps is not None else len(script.steps)):
        script.step()
        app.refresh_sources()
        await settle(pilot)


def monitor(app: EvaldeskApp) -> MonitorScreen:
    screen = app.screen
    assert isinstance(screen, MonitorScreen)
    return screen


async def test_m_opens_the_monitor_with_figures_running_table_and_red_warnings(tmp_path: Path) -> None:
    app, script = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await play(pilot, script)
        home = app.screen
        assert isinstance(home, ExperimentsScreen)
        # rule d holds for three trials: one warning names the longest-running one and counts the rest
        warned = app.monitor.warnings_for(KEY)
        assert [(w.rule, w.trial.split("__")[0]) for w in warned] == [("d", "build-cython-ext")]  # type: ignore[union-attr]
        assert "(3 trials past the limit)" in warned[0].evidence
        detail = str(home.query_one("#detail", Static).render())
        assert "⚠ rule d: trial build-cython-ext__" in detail
        # the list shows the live ETA beside the progress bar of a running experiment
        from tui.screens.experiments import format_age

        eta = app.monitor.reading(KEY).eta_s  # type: ignore[union-attr]
        assert eta is not None
        assert format_age(eta) in "".join(c.plain for c in home.query_one(DataTable).get_row_at(0))
        row_cells = home.query_one(DataTable).get_row_at(0)
        assert all("bold red" in str(c.spans[-1].style) for c in row_cells if c.plain)
        assert any(e.level == "warning" and "rule d" in e.message for e in app.event_log)

        await pilot.press("m")
        screen = monitor(app)
        assert screen.keys == [KEY]
        warnings = str(screen.query_one("#mon-warnings", Static).render())
        assert "trial build-cython-ext__caaaaaa running 19 min, 1.5 × the 10 min timeout is 15 min" in warnings
        assert "3 trials past" in warnings
        figures = str(screen.query_one("#mon-figures", Static).render())
        assert "valid      15 valid of 30 expected\nerrors     3 invalid errors\nscore      0.533" in figures
        assert "pass rate  44.4%  CI 24.6%–66.3%" in figures
        assert "expected   60.0% vs actual 44.4%" in figures and "tb2-reference, n=18" in figures
        assert "throughput 1.00/min, last 10 min" in figures and "ETA        12 min at that rate" in figures
        assert "cost       $0.18" in figures
        table = screen.query_one("#mon-running", DataTable)
        assert table.row_count == 8
        rows = {table.get_row_at(i)[0].plain.split("__")[0]: [c.plain for c in table.get_row_at(i)]
                for i in range(table.row_count)}
        assert rows["fix-git-history"][1:3] == ["19 min", "0 s"]
        assert rows["fix-git-history"][3].startswith("episode 9: keystrokes='make -j4'")
        assert rows["build-cython-ext"][1:] == ["19 min", "19 min", "Starting trial for task build-cython-ext"]
        assert rows["wasm-build"][1:3] == ["0 s", "0 s"]
        series = app.monitor.series(KEY)
        assert series is not None and len(series.samples) == 11

        await pilot.press("escape")
        assert app.screen is home


async def test_p_pauses_polling_and_r_still_reads_once(tmp_path: Path) -> None:
    app, script = make_app(tmp_path, baseline=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await play(pilot, script, steps=3)
        app.open_monitor([KEY])
        await pilot.pause()
        screen = monitor(app)
        title = screen.query_one("#mon-title", Static)
        assert "poll 4 " in str(title.render())
        await pilot.press("p")
        await pilot.pause()
        assert app.paused and screen.paused and "PAUSED" in str(title.render())
        await play(pilot, script, steps=2)  # a forced read (r) goes through while paused
        assert "poll 6 " in str(title.render()) and "PAUSED" in str(title.render())
        await pilot.press("p")
        await settle(pilot)
        assert not app.paused and "PAUSED" not in str(title.render())
        figures = str(screen.query_one("#mon-figures", Static).render())
        assert "— (no baseline)" in figures
        # `t` and `a` drill in from here
        await pilot.press("a")
        assert type(app.screen).__name__ == "AuditScreen"


async def test_unknown_key_says_so(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path, baseline=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.push_screen(MonitorScreen(["live::gone"]))
        await pilot.pause()
        assert "gone: not in the latest scan" in str(monitor(app).query_one("#mon-title", Static).render())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_snapshot(snap_compare: Callable[..., bool], tmp_path: Path, size: tuple[int, int]) -> None:
    app, script = make_app(tmp_path)

    async def run_before(pilot: object) -> None:
        await play(pilot, script)
        app.open_monitor([KEY])
        await pilot.pause()  # type: ignore[attr-defined]

    assert snap_compare(app, terminal_size=size, run_before=run_before)
