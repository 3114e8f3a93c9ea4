"""A `--batch audit` of a folder of Harbor job dirs, and what other backends' looking costs it.

    python benchmarks/folder_audit.py [--jobs 30] [--trials 300] [--repeat 9] [--dir /tmp/evaldesk-bench-folder]

Every backend is asked of a local folder: csbench results or AISBench task roots may sit beside
Harbor jobs. Each looks through its own `find.py` (a few stats) and loads its models and sources
only when it finds something. This times the audit as it is against the same audit with every
backend's models and sources loaded first, as they were when looking loaded them. The parse cache
is full (one audit fills it first), so the figures are a cron job's next run. Process wall-clock
medians of interleaved runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.synth import write_job  # noqa: E402
from benchmarks.targets import _env  # noqa: E402

# what looking at a folder loaded of the other backends before each had a find.py
EVERY_BACKEND = ("services.csbench.source", "services.csbench.checklist", "services.aisbench.source",
                 "services.aisbench.hosts", "services.rock.source", "services.objectstore.store")


def write_folder(root: Path, jobs: int, trials: int) -> None:
    """`jobs` copies of one synthetic job, named apart by their dates."""
    seed = Path(tempfile.mkdtemp(prefix="evaldesk-folder-seed-"))
    one = write_job(seed, trials)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(jobs):
        shutil.copytree(one, root / one.name.replace("2026-11-01__00-00-00", f"2026-11-{1 + i % 28:02d}__{i:06d}"))
    shutil.rmtree(seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--dir", default="/tmp/evaldesk-bench-folder")
    args = ap.parse_args()
    folder = Path(args.dir) / f"{args.jobs}x{args.trials}"
    if not folder.exists():
        write_folder(folder, args.jobs, args.trials)
    cache = tempfile.mkdtemp(prefix="evaldesk-folder-cache-")
    env = _env(XDG_CACHE_HOME=cache)
    audit = ["--batch", "audit", str(folder), "--format", "json"]
    loaded = "import sys, importlib; [importlib.import_module(m) for m in sys.argv[1].split(',')]; " \
             "sys.argv = ['evaldesk', *sys.argv[2:]]; from tui.cli import entry; entry()"
    ways = {
        "as it is": [sys.executable, "-m", "tui.cli", *audit],
        "every backend loaded": [sys.executable, "-c", loaded, ",".join(EVERY_BACKEND), *audit],
    }
    subprocess.run(ways["as it is"], env=env, stdout=subprocess.DEVNULL, check=False)  # fills the parse cache
    times: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(args.repeat):
        for label, cmd in ways.items():
            t = time.perf_counter()
            done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
            times[label].append(time.perf_counter() - t)
            if done.returncode not in (0, 1):
                raise SystemExit(f"{label}: exit {done.returncode}: {done.stderr.decode()[-400:]}")
    shutil.rmtree(cache, ignore_errors=True)
    print(f"--batch audit of {args.jobs} Harbor job dirs x {args.trials} trials in one folder, parse cache full, "
          f"medians of {args.repeat} (load average {os.getloadavg()[0]:.1f}):")
    for label, ts in times.items():
        print(f"  {label:<24} {statistics.median(ts):.3f} s")


if __name__ == "__main__":
    main()
