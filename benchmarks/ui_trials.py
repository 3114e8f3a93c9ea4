"""Time to first frame and key-to-frame of the trials screen on a 100k-attempt experiment.

Timers run inside the app (a Pilot round trip costs ~62 ms whatever the app does, DESIGN 9):
a key's time is stamped when the App receives the Key event and the frame when the App hands
the compositor's update to the driver — after which the update is also encoded to terminal
bytes, as a real terminal would need.

    python benchmarks/ui_trials.py [--rows 100000] [--size 120x40] [--compare]

`--compare` also times textual-fastdatatable (ArrowBackend) over the same rows, when installed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tui  # noqa: F401  (before textual: the console's frame rate, as `evaldesk` runs it)

# isort: split
from textual import events
from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from services.core.failures import failure_class
from services.core.models import Experiment, Trial, TrialStatus
from services.transport.fs import LocalFS

NOW = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)
EXCEPTIONS = ["DaytonaError", "AgentTimeoutError", "VerifierOutputParseError", "ApiRateLimitError",
              "NonZeroAgentExitCodeError", "EnvironmentStartTimeoutError"]


def synthetic_experiment(n: int, seed: int = 3) -> Experiment:
    """Trials made in the order a scan makes them: by trial dir name."""
    rng = random.Random(seed)
    n_tasks = max(1, n // 3)
    trials = []
    picks = sorted((rng.randrange(n_tasks), i) for i in range(n))
    for task_no, i in picks:
        task = f"task-{task_no:06d}-fix-something"
        roll = rng.random()
        exc = rng.choice(EXCEPTIONS) if roll < 0.12 else None
        running = roll > 0.97
        reward = None if running or (exc and rng.random() < 0.6) else float(rng.random() < 0.4)
        status = TrialStatus.running if running else (TrialStatus.valid if reward is not None
                                                      else TrialStatus.errored)
        started = NOW - timedelta(seconds=rng.uniform(600, 90_000))
        name = f"{task[:32].rstrip('_-')}__{i:07d}"
        trials.append(Trial(
            trial_name=name, task_name=task, path=name, status=status, reward=reward, rewards={},
            exception_type=exc, exception_message=f"{exc}: synthetic" if exc else None,
            failure_class=failure_class(exc), parse_error=None, started_at=started,
            finished_at=None if running else started + timedelta(seconds=rng.uniform(60, 1500)),
            n_input_tokens=rng.randint(10_000, 900_000), n_cache_tokens=None,
            n_output_tokens=rng.randint(1_000, 40_000), cost_usd=rng.uniform(0.01, 1.0),
            model_name="m", agent_name="a", source="s", mtime=None, attempt=1 + i % 3, copy_of=None))
    return Experiment(id=f"synthetic-{n}", source="harbor", source_label="bench", path="/nonexistent/synthetic",
                      trials=trials)


class _Source:
    def fs(self) -> LocalFS:
        return LocalFS()


class TimedApp(App[None]):
    """Stamps key arrivals and frames; `frames` holds the perf_counter of each frame sent."""

    def __init__(self) -> None:
        super().__init__()
        self.key_at: float | None = None
        self.key_to_frame: list[tuple[str, float]] = []
        self._key_name = ""
        self.frames: list[float] = []
        self.keys_seen = 0
        self._last_key: events.Key | None = None

    async def on_event(self, event: events.Event) -> None:
        # a key event bubbling back up to the App must not restart its clock
        if isinstance(event, events.Key) and event is not self._last_key:
            self._last_key = event
            self.key_at = time.perf_counter()
            self._key_name = event.key
            self.keys_seen += 1
        await super().on_event(event)

    def _display(self, screen: Screen[Any], renderable: Any) -> None:
        super()._display(screen, renderable)
        if renderable is None:
            return
        if hasattr(renderable, "render_segments"):
            renderable.render_segments(self.console)  # what a real terminal would be sent
        now = time.perf_counter()
        self.frames.append(now)
        if self.key_at is not None:
            self.key_to_frame.append((self._key_name, now - self.key_at))
            self.key_at = None


class TrialsBenchApp(TimedApp):
    def __init__(self, exp: Experiment) -> None:
        super().__init__()
        self.exp = exp
        self.read_only = True
        self.pushed_at = 0.0

    def experiment(self, key: str) -> Experiment | None:
        return self.exp

    def audit(self, key: str) -> None:
        return None

    def source_for(self, key: str) -> _Source:
        return _Source()

    def now(self) -> datetime:
        return NOW

    def compose(self) -> ComposeResult:
        yield Static("bench")


class FastTableApp(TimedApp):
    def __init__(self, exp: Experiment) -> None:
        super().__init__()
        self.exp = exp
        self.pushed_at = 0.0

    def compose(self) -> ComposeResult:
        yield Static("bench")


def _first_frame_after(frames: list[float], t0: float, min_frames: int = 1) -> float | None:
    after = [f for f in frames if f > t0]
    return after[min_frames - 1] - t0 if len(after) >= min_frames else None


KEYS = ["down"] * 20 + ["pagedown"] * 10 + ["pageup"] * 5 + ["end", "home"] + ["up"] * 5


async def bench_trials(exp: Experiment, size: tuple[int, int]) -> dict[str, Any]:
    from tui.screens.trials import TrialsScreen
    from widgets.trial_table import VirtualTable

    app = TrialsBenchApp(exp)
    out: dict[str, Any] = {}
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.frames.clear()
        t0 = time.perf_counter()
        screen = TrialsScreen("bench::x", poll_interval=60)
        await app.push_screen(screen)
        # wait until the table has painted its rows
        deadline = time.monotonic() + 60
        while True:
            await pilot.pause(0.01)
            table = screen.query_one(VirtualTable)
            if table.row_count == len(exp.trials) and app.frames and app.frames[-1] > t0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the table never painted")
        out["screen_frame_s"] = _first_frame_after(app.frames, t0)
        out["first_frame_s"] = app.frames[-1] - t0
        await pilot.pause(0.3)
        app.key_to_frame.clear()
        for key in [*KEYS, "s", "s", "s", "s", "g", "g"]:
            await pilot.press(key)
            await pilot.pause(0.02)
        out["keys"] = list(app.key_to_frame)
    return out


async def bench_fastdatatable(exp: Experiment, size: tuple[int, int]) -> dict[str, Any]:
    from textual_fastdatatable import ArrowBackend, DataTable

    from widgets.trial_table import trial_cells

    app = FastTableApp(exp)
    out: dict[str, Any] = {}
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.frames.clear()
        t0 = time.perf_counter()
        trials = sorted(exp.trials, key=lambda t: (t.task_name, t.attempt, t.trial_name))
        records = [tuple(c if isinstance(c, str) else c[0] for c in trial_cells(t, NOW)) for t in trials]
        labels = ("task", "#", "reward", "state", "exception", "class", "time", "tokens", "cost", "trial")
        backend = ArrowBackend.from_records([labels, *records], has_header=True)
        table = DataTable(backend=backend)
        await app.mount(table)
        table.focus()
        deadline = time.monotonic() + 120
        while not (app.frames and app.frames[-1] > t0 and table.row_count == len(trials)):
            await pilot.pause(0.01)
            if time.monotonic() > deadline:
                raise RuntimeError("fastdatatable never painted")
        out["first_frame_s"] = _first_frame_after(app.frames, t0)
        await pilot.pause(0.3)
        app.key_to_frame.clear()
        for key in KEYS:
            await pilot.press(key)
            await pilot.pause(0.02)
        out["keys"] = list(app.key_to_frame)
    return out


def summarize(name: str, result: dict[str, Any]) -> None:
    if "screen_frame_s" in result:
        print(f"{name}: screen painted {1000 * result['screen_frame_s']:.0f} ms, "
              f"rows painted (time to first frame of the table) {1000 * result['first_frame_s']:.0f} ms")
    else:
        print(f"{name}: time to first frame {1000 * result['first_frame_s']:.0f} ms")
    by_key: dict[str, list[float]] = {}
    for key, dt in result["keys"]:
        by_key.setdefault(key, []).append(dt * 1000)
    for key, values in by_key.items():
        values.sort()
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        print(f"  key {key:<9} n={len(values):<3} median {statistics.median(values):6.1f} ms"
              f"   p95 {p95:6.1f} ms   max {values[-1]:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--size", default="120x40")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="move the snapshot out of the collector's reach first (gc.freeze)")
    parser.add_argument("--compare", action="store_true", help="also time textual-fastdatatable")
    args = parser.parse_args()
    w, h = (int(x) for x in args.size.lower().split("x"))
    t = time.perf_counter()
    exp = synthetic_experiment(args.rows)
    if args.gc_freeze:
        gc.collect()
        gc.freeze()
    print(f"{args.rows:,} synthetic attempts built in {time.perf_counter() - t:.2f} s (not timed below); "
          f"terminal {w}x{h}")
    summarize("trials screen (VirtualTable)", asyncio.run(bench_trials(exp, (w, h))))
    if args.compare:
        try:
            import textual_fastdatatable  # noqa: F401
        except ImportError:
            print("textual-fastdatatable is not installed: skipped")
            return
        summarize("textual-fastdatatable, ArrowBackend (rows formatted + table built)",
                  asyncio.run(bench_fastdatatable(exp, (w, h))))


if __name__ == "__main__":
    main()
