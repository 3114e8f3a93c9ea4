"""Opening the console on many runs: how soon the first rows show, cold and from the last read,
and how the fresh answer arrives source by source.

Writes (once, cached under --dir) --jobs synthetic job dirs of --trials attempts each, split
over --sources folders (one source each), then opens the console headless twice with timers
inside the app (a Pilot round trip costs ~62 ms whatever the app does, DESIGN 9):
- cold: no last read kept (a first start, or a new state dir): time to the first rows, to all;
- warm: the last read of the cold run kept (tui/last_read.py): time to the first frame with
  rows (from the last read), then when each source's fresh answer replaced its rows.
Both runs read with the parse cache kept beside --dir (`--no-cache` to read every file); the
first run on a new --dir fills it, so its cold figure is a first start's.

    python benchmarks/ui_open.py [--jobs 300] [--trials 300] [--sources 10] [--dir /tmp/evaldesk-bench-open]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.synth import write_job
from services.core.config import Config
from services.harbor.source import HarborSource
from tui.app import EvaldeskApp
from tui.messages import ScanFinished


def write_jobs(root: Path, jobs: int, trials: int, sources: int) -> None:
    """`jobs` copies of one synthetic job, named apart (their dates), over `sources` folders."""
    seed = Path(tempfile.mkdtemp(prefix="evaldesk-open-seed-"))
    one = write_job(seed, trials, n_attempts=3)
    for i in range(jobs):
        folder = root / f"src{i % sources:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        day, minute = divmod(i, 60 * 24)
        stamp = f"2026-11-{1 + day % 28:02d}__{minute // 60:02d}-{minute % 60:02d}-00"
        name = one.name.replace("2026-11-01__00-00-00", stamp)
        shutil.copytree(one, folder / name)
    shutil.rmtree(seed)


class TimedApp(EvaldeskApp):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.t0 = time.perf_counter()
        self.first_rows: float | None = None
        self.from_last_read: float | None = None
        self.answers: list[float] = []
        self.first_frame: float | None = None

    def on_mount(self) -> None:
        # (Textual runs EvaldeskApp.on_mount as well, as it runs every class's handler: no super())
        # the first frame with rows: the list's table has them and the screen has been painted since
        self._watch = self.set_interval(0.005, self._look)

    def _look(self) -> None:
        from textual.widgets import DataTable

        tables = list(self.screen.query(DataTable))
        if tables and tables[0].row_count:
            self._watch.stop()
            self.screen.call_after_refresh(self._painted)

    def _painted(self) -> None:
        if self.first_frame is None:
            self.first_frame = time.perf_counter() - self.t0

    def _show_last_read(self, kept: object) -> None:
        super()._show_last_read(kept)  # type: ignore[arg-type]
        self.from_last_read = time.perf_counter() - self.t0
        self._first()

    def on_scan_finished(self, message: ScanFinished) -> None:
        # besides the app's own handler: when each source's answer came
        self.answers.append(time.perf_counter() - self.t0)
        self.call_after_refresh(self._first)

    def _first(self) -> None:
        if self.first_rows is None and self.experiments():
            self.first_rows = time.perf_counter() - self.t0


async def open_once(root: Path, no_cache: bool) -> dict[str, float | int | None]:
    config = Config(journal_path=str(Path(tempfile.mkdtemp()) / "journal.jsonl"), scan_cache=not no_cache)
    sources = [HarborSource(d, config.policy, label=d.name, cache=not no_cache)
               for d in sorted(root.iterdir()) if d.is_dir()]
    app = TimedApp(sources, config, False, poll=False, cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        while len(app.answers) < len(sources):
            await pilot.pause(0.02)
        await app.workers.wait_for_complete()
        rows = len(app.experiments())
    return {"rows": rows, "first_rows_s": app.first_rows, "from_last_read_s": app.from_last_read,
            "first_frame_s": app.first_frame,
            "first_answer_s": app.answers[0] if app.answers else None,
            "last_answer_s": app.answers[-1] if app.answers else None, "answers": len(app.answers)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--sources", type=int, default=10)
    parser.add_argument("--dir", default="/tmp/evaldesk-bench-open")
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args()
    root = Path(args.dir)
    if not root.exists():
        t = time.perf_counter()
        write_jobs(root, args.jobs, args.trials, args.sources)
        print(f"wrote {args.jobs} job dirs x {args.trials} trials in {time.perf_counter() - t:.1f} s")
    # a state dir of the benchmark's own: cold has no last read, warm has the cold run's
    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="evaldesk-open-state-")
    # the parse cache beside the jobs it caches, never in the user's home: the first run on a
    # new --dir parses every file, later runs on it read the cache (--no-cache: never)
    os.environ["XDG_CACHE_HOME"] = str(root.parent / (root.name + ".cache"))
    for name in ("cold", "warm"):
        result = asyncio.run(open_once(root, args.no_cache))
        print(name)
        for k, v in result.items():
            print(f"  {k:20s} {v:.3f}" if isinstance(v, float) else f"  {k:20s} {v}")


if __name__ == "__main__":
    main()
