"""Report time and size for 10k and 100k synthetic trials: build (from a scanned experiment and
its audit), render HTML and JSON, and the file sizes.

Run: python benchmarks/report.py [--sizes 10000,100000] [--dir /tmp/evaldesk-bench]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.synth import write_job
from services.audit.verdict import audit_experiment
from services.core.policy import Policy
from services.harbor.source import HarborSource
from services.report.build import build_report
from services.report.html import render_html


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--dir", default="/tmp/evaldesk-bench")
    args = ap.parse_args()
    policy = Policy()
    print(f"{'trials':>8} {'tasks':>6} {'build':>8} {'html':>8} {'json':>8} {'html size':>10} {'json size':>10}")
    for n in (int(x) for x in args.sizes.split(",")):
        root = Path(args.dir) / f"report-{n}"
        job = root / f"synthetic-bench_synthetic-{n}_2026-11-01__00-00-00"
        if not job.exists():
            write_job(root, n)
        exp = HarborSource(root, policy).scan_sync().experiments[0]
        now = datetime.now(UTC)
        audit = audit_experiment(exp, policy, now)
        t0 = time.perf_counter()
        report = build_report([(exp, audit, None)], policy, now)
        t1 = time.perf_counter()
        page = render_html(report, policy.error_fraction_max)
        t2 = time.perf_counter()
        data = report.model_dump_json()
        t3 = time.perf_counter()
        print(f"{n:>8} {len(report.runs[0].tasks):>6} {t1 - t0:>7.2f}s {t2 - t1:>7.2f}s {t3 - t2:>7.2f}s "
              f"{len(page) / 2**20:>8.1f}MB {len(data) / 2**20:>8.1f}MB")


if __name__ == "__main__":
    main()
