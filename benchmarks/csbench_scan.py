"""Scan and audit time of a csbench results dir with many task runs, cold and warm.

Run: python benchmarks/csbench_scan.py [--sizes 1000,10000] [--dir /tmp/evaldesk-csbench-bench]
The runs are copies of the demo campaign's record (the real csbench's output) under new run
ids, in the layout `csbench fetch --dest` writes; the baseline is a json.load of every record.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.audit.verdict import audit_experiment
from services.csbench.demo import BUNDLE
from services.csbench.source import ResultsSource


def write_runs(dest: Path, n: int) -> None:
    bundle = json.loads(BUNDLE.read_text(encoding="utf-8"))
    _, text = next((k, v) for k, v in bundle["files"].items() if k.endswith(".json"))
    record = json.loads(text)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for i in range(n):
        run_id = f"run-20261120-141200-{i:06x}"
        record["run"]["run_id"] = run_id
        (dest / f"suite:swe-bench--{run_id}.json").write_text(json.dumps(record, indent=2))


async def measure(dest: Path) -> tuple[float, float, float]:
    src = ResultsSource(str(dest), label="bench")
    t = time.perf_counter()
    await src.scan()
    cold = time.perf_counter() - t
    t = time.perf_counter()
    snap = await src.scan()
    warm = time.perf_counter() - t
    t = time.perf_counter()
    for e in snap.experiments:
        audit_experiment(e)
    return cold, warm, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--dir", default="/tmp/evaldesk-csbench-bench")
    args = ap.parse_args()
    print(f"{'runs':>7} {'json.load':>10} {'cold scan':>10} {'warm scan':>10} {'audit':>8}")
    for n in (int(x) for x in args.sizes.split(",")):
        dest = Path(args.dir) / f"camp-{n:08x}"
        write_runs(dest, n)
        t = time.perf_counter()
        for f in glob.glob(f"{dest}/*.json"):
            json.loads(Path(f).read_bytes())
        base = time.perf_counter() - t
        cold, warm, aud = asyncio.run(measure(dest))
        print(f"{n:>7} {base:>9.2f}s {cold:>9.2f}s {warm:>9.2f}s {aud:>7.3f}s")


if __name__ == "__main__":
    main()
