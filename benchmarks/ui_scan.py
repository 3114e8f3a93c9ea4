"""The console while a 100k-attempt job is scanned: does progress show, and does the
experiments table stay usable?

Writes (once, cached under --dir) a synthetic job of --trials attempts, opens the console
headless on it and measures, with timers inside the app (a Pilot round trip costs ~62 ms
whatever the app does, DESIGN 9):
- how many progress updates reached the header and the first one's delay,
- the event loop's worst lag during the scan (a 50 ms ticker's overshoot),
- key-to-handled for sort keys pressed while the scan runs,
- the scan's wall time until the table shows the experiment.

    python benchmarks/ui_scan.py [--trials 100000] [--dir /tmp/evaldesk-bench-100k]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.synth import write_job
from services.core.config import Config
from services.harbor.source import HarborSource
from tui.app import EvaldeskApp
from tui.messages import ScanProgress
from tui.screens.experiments import ExperimentsScreen


class MeasuredApp(EvaldeskApp):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.t0 = time.perf_counter()
        self.progress_at: list[float] = []
        self.lags: list[float] = []
        self.lags_after: list[float] = []
        self._last_tick = 0.0

    def on_scan_progress(self, message: ScanProgress) -> None:
        self.progress_at.append(time.perf_counter() - self.t0)

    def tick(self) -> None:
        now = time.perf_counter()
        if self._last_tick:
            lag = max(0.0, now - self._last_tick - 0.05)
            # the tick that lands once the scan is over includes the result's handling
            (self.lags if self.scan_state else self.lags_after).append(lag)
        self._last_tick = now


async def run(job_root: Path, size: tuple[int, int]) -> dict[str, float]:
    config = Config(journal_path="/tmp/evaldesk-bench-journal.jsonl")
    app = MeasuredApp([HarborSource(job_root, config.policy, label="bench")], config, poll=False)
    key_times: list[float] = []
    async with app.run_test(size=size) as pilot:
        app.set_interval(0.05, app.tick)
        screen = app.screen
        assert isinstance(screen, ExperimentsScreen)
        while app.scan_state:
            t = time.perf_counter()
            screen.action_sort_next()  # what the `s` key runs, timed inside the loop
            key_times.append(time.perf_counter() - t)
            await pilot.pause(0.25)
        await app.workers.wait_for_complete()
        await pilot.pause(0.3)
        done = time.perf_counter() - app.t0
        rows = len(screen.shown)
    return {
        "rows": rows,
        "scan_to_table_s": done,
        "progress_updates": len(app.progress_at),
        "first_progress_s": app.progress_at[0] if app.progress_at else float("nan"),
        "max_loop_lag_ms": 1000 * max(app.lags, default=0.0),
        "median_loop_lag_ms": 1000 * statistics.median(app.lags) if app.lags else 0.0,
        "max_lag_handling_result_ms": 1000 * max(app.lags_after, default=0.0),
        "sort_during_scan_ms_max": 1000 * max(key_times, default=0.0),
        "sort_presses_during_scan": len(key_times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--dir", default="/tmp/evaldesk-bench-100k")
    parser.add_argument("--size", default="120x40")
    args = parser.parse_args()
    root = Path(args.dir)
    if not root.exists():
        t = time.perf_counter()
        write_job(root, args.trials)
        print(f"wrote {args.trials} trials in {time.perf_counter() - t:.1f} s")
    w, h = (int(x) for x in args.size.split("x"))
    for k, v in asyncio.run(run(root, (w, h))).items():
        print(f"{k:28s} {v:.3f}" if isinstance(v, float) else f"{k:28s} {v}")


if __name__ == "__main__":
    main()
