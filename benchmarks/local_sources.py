"""Several local sources read at once, as the console's first start reads them: when the first
answer comes and when the last does, with local scans taking turns (services/harbor/source.py
`local_scan_turn`) and side by side (QUEUE_WAIT_S = 0: no scan waits), interleaved.

Uses the job dirs of benchmarks/ui_open.py (written there once, under --dir), each run with an
empty parse cache (a first start) or without one (--no-cache).

    python benchmarks/local_sources.py [--dir /tmp/evaldesk-bench-open] [--repeat 3] [--no-cache]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.ui_open import write_jobs
from services.core.policy import Policy
from services.harbor import source as harbor_source
from services.harbor.source import HarborSource


async def read_all(root: Path, cache: bool) -> tuple[float, float]:
    sources = [HarborSource(d, Policy(), label=d.name, cache=cache) for d in sorted(root.iterdir()) if d.is_dir()]
    t0 = time.perf_counter()
    answers: list[float] = []

    async def one(src: HarborSource) -> None:
        await src.scan()
        answers.append(time.perf_counter() - t0)

    await asyncio.gather(*(one(s) for s in sources))
    for s in sources:
        await s.close()
    return min(answers), max(answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/evaldesk-bench-open")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args()
    root = Path(args.dir)
    if not root.exists():
        write_jobs(root, 300, 300, 10)
    n = sum(1 for d in root.iterdir() if d.is_dir())
    waits = {"taking turns": harbor_source.QUEUE_WAIT_S, "side by side": 0.0}
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in waits}
    for _ in range(args.repeat):
        for name, wait in waits.items():
            cache = tempfile.mkdtemp(prefix="evaldesk-cache-")
            os.environ["XDG_CACHE_HOME"] = cache
            harbor_source.QUEUE_WAIT_S = wait
            got[name].append(asyncio.run(read_all(root, not args.no_cache)))
            shutil.rmtree(cache, ignore_errors=True)
    mode = "no parse cache" if args.no_cache else "empty parse cache"
    print(f"{n} local sources read at once ({mode}), medians of {args.repeat}:")
    for name, runs in got.items():
        first = statistics.median(r[0] for r in runs)
        last = statistics.median(r[1] for r in runs)
        print(f"  {name:<14} first answer {first:6.2f} s   last answer {last:6.2f} s")


if __name__ == "__main__":
    main()
