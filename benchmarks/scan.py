"""Scan and audit time for 10k and 100k synthetic trials, cold and warm, against a json.load loop.

Run: python benchmarks/scan.py [--sizes 10000,100000] [--dir /tmp/evaldesk-bench]
The baseline is the runbook's check-4 loop: glob */result.json, json.load each, test the reward.
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.synth import touch_results, write_job
from services.audit.verdict import audit_experiment
from services.core.policy import Policy
from services.harbor.source import HarborSource


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
        return True
    except OSError:
        return False


def baseline(job: Path) -> tuple[float, int, int]:
    t = time.perf_counter()
    valid = err = 0
    for f in glob.glob(f"{job}/*/result.json"):
        try:
            with open(f) as fh:
                d = json.load(fh)
        except Exception:
            err += 1
            continue
        r = ((d.get("verifier_result") or {}).get("rewards") or {}).get("reward")
        if isinstance(r, int | float):
            valid += 1
        else:
            err += 1
    return time.perf_counter() - t, valid, err


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--dir", default="/tmp/evaldesk-bench")
    ap.add_argument("--cold-cache", action="store_true", help="drop the page cache before cold runs (root)")
    args = ap.parse_args()
    policy = Policy()
    print(f"{'trials':>8} {'what':<44} {'seconds':>8}  note")
    for n in (int(s) for s in args.sizes.split(",")):
        root = Path(args.dir) / str(n)
        job = next(root.glob("*"), None) if root.exists() else None
        if job is None:
            t = time.perf_counter()
            job = write_job(root, n)
            print(f"{n:>8} {'(write synthetic job)':<44} {time.perf_counter() - t:8.2f}")
        if args.cold_cache:
            drop_caches()
        b_t, b_valid, b_err = baseline(job)
        print(f"{n:>8} {'json.load loop (runbook check 4)':<44} {b_t:8.2f}  valid={b_valid} errored={b_err}")

        if args.cold_cache:
            drop_caches()
        gc.collect()
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        src = HarborSource(job, policy, cache=False)  # in-process figures: the parse cache is benchmarks/targets.py's
        t = time.perf_counter()
        snap = src.scan_sync()
        scan_cold = time.perf_counter() - t
        exp = snap.experiments[0]
        t = time.perf_counter()
        report = audit_experiment(exp, policy)
        audit_t = time.perf_counter() - t
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        c = exp.counts
        print(f"{n:>8} {'evaldesk cold scan (new process state)':<44} {scan_cold:8.2f}  "
              f"valid={c.valid} errored={c.errored} ({b_t / scan_cold:.1f}x the loop)")
        print(f"{n:>8} {'evaldesk audit of the snapshot':<44} {audit_t:8.2f}  verdict={report.verdict}")
        print(f"{n:>8} {'peak RSS growth, cold scan + audit':<44} {(rss1 - rss0) / 1024:8.1f}  MiB "
              f"(process peak {rss1 / 1024:.0f} MiB)")

        t = time.perf_counter()
        snap = src.scan_sync()
        warm = time.perf_counter() - t
        t = time.perf_counter()
        audit_experiment(snap.experiments[0], policy)
        warm_audit = time.perf_counter() - t
        print(f"{n:>8} {'warm rescan, nothing changed':<44} {warm:8.2f}  files read={snap.stats['files_read']}")
        print(f"{n:>8} {'warm rescan + audit':<44} {warm + warm_audit:8.2f}  "
              f"({b_t / (warm + warm_audit):.1f}x faster than the loop)")
        touch_results(job, 10)
        src.verify_all()  # finished trials rewritten in place: what `r` does (else the rotation finds them)
        t = time.perf_counter()
        snap = src.scan_sync()
        inc = time.perf_counter() - t
        print(f"{n:>8} {'incremental rescan, 10 trials changed':<44} {inc:8.2f}  files read={snap.stats['files_read']}")
        del src, snap, exp
        gc.collect()


if __name__ == "__main__":
    main()
