"""What one monitor poll of a running 100k-trial Harbor job costs: files read and seconds.

    python benchmarks/monitor_poll.py [--trials 100000] [--running 64] [--dir DIR]

Writes minimal but Harbor-shaped trial dirs (config.json, result.json; running trials have
config.json and a trial.log only), then measures: the cold poll (scan + activity probe +
monitor feed), a warm poll with nothing changed, and a poll after 10 running trials finished.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.core.policy import Policy
from services.harbor.source import HarborSource
from services.monitor.activity import probe_snapshot
from services.monitor.state import MonitorState

NOW = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)


def _iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def write_job(job: Path, n: int, running: int) -> list[Path]:
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({
        "job_name": job.name, "n_attempts": 1,
        "agents": [{"name": "terminus-2", "model_name": "hosted_vllm/bench", "override_timeout_sec": 1500}],
        "datasets": [{"name": "bench-100k"}],
    }))
    (job / "result.json").write_text(json.dumps({
        "id": "bench", "started_at": "2026-11-20T08:00:00", "finished_at": None, "n_total_trials": n + running,
        "stats": {"n_completed_trials": n - running, "evals": {}},
    }))
    live: list[Path] = []
    start = NOW - timedelta(hours=10)
    for i in range(n):
        name = f"task-{i:06d}__b{i:06d}"
        d = job / name
        d.mkdir()
        cfg = b'{"trial_name": "%s", "task": {"path": "datasets/bench-100k/task-%06d"}}' % (name.encode(), i)
        with open(d / "config.json", "wb") as fh:
            fh.write(cfg)
        if i >= n - running:
            with open(d / "trial.log", "w") as fh:
                fh.write("2026-11-20 17:59:00,000 INFO    harbor.trial: episode 3\n")
            live.append(d)
            continue
        st = start + timedelta(seconds=i * 0.3)
        reward = "1.0" if i % 3 == 0 else "0.0"
        with open(d / "result.json", "w") as fh:
            fh.write(
                f'{{"task_name": "task-{i:06d}", "trial_name": "{name}", "started_at": "{_iso(st)}", '
                f'"finished_at": "{_iso(st + timedelta(seconds=600))}", '
                f'"agent_result": {{"n_input_tokens": 1000, "n_output_tokens": 100, "cost_usd": 0.001}}, '
                f'"verifier_result": {{"rewards": {{"reward": {reward}}}}}}}'
            )
    return live


async def poll(src: HarborSource, mon: MonitorState) -> dict[str, float]:
    t0 = time.perf_counter()
    snap = await src.scan()
    t1 = time.perf_counter()
    activity = await probe_snapshot(snap, src.fs())
    t2 = time.perf_counter()
    mon.feed(snap, activity)
    t3 = time.perf_counter()
    return {
        "trial_dirs": snap.stats.get("trial_dirs", 0),
        "files_read": snap.stats.get("files_read", 0),
        "logs_probed": sum(len(a) for a in activity.values()),
        "scan_s": t1 - t0,
        "probe_s": t2 - t1,
        "feed_s": t3 - t2,
        "total_s": t3 - t0,
    }


def show(label: str, r: dict[str, float]) -> None:
    print(f"{label:<28} dirs {int(r['trial_dirs']):>7}  files read {int(r['files_read']):>7}  "
          f"logs {int(r['logs_probed']):>3}  scan {r['scan_s']:.2f}s  probe {r['probe_s']:.3f}s  "
          f"feed {r['feed_s']:.3f}s  total {r['total_s']:.2f}s")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100_000)
    ap.add_argument("--running", type=int, default=64)
    ap.add_argument("--dir", help="where to write the job (default: a temp dir, removed after)")
    args = ap.parse_args()
    tmp = None if args.dir else tempfile.TemporaryDirectory(prefix="evaldesk-bench-")
    root = Path(args.dir or tmp.name)  # type: ignore[union-attr]
    job = root / "bench-100k_model_2026-11-20__08-00-00"
    t0 = time.perf_counter()
    live = write_job(job, args.trials, args.running)
    print(f"wrote {args.trials} trial dirs ({args.running} running) in {time.perf_counter() - t0:.1f}s "
          f"on {os.cpu_count()} cores")
    src = HarborSource(root, Policy())
    mon = MonitorState(Policy(), clock=lambda: NOW)
    try:
        show("cold poll", await poll(src, mon))
        show("warm poll, nothing changed", await poll(src, mon))
        for d in live[:10]:
            (d / "result.json").write_text('{"verifier_result": {"rewards": {"reward": 1.0}}}')
        show("after 10 trials finished", await poll(src, mon))
    finally:
        await src.close()
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
