"""A monitor fed the scanner's deltas keeps the same figures as one that walks every trial."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from services.core.models import experiment_key
from services.core.plain import copy_with
from services.core.policy import Policy
from services.harbor.source import HarborSource
from services.monitor.state import MonitorState
from tests.support.harbor_factory import JobBuilder

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _reading(mon: MonitorState, exp_key: str) -> tuple:
    r = mon.reading(exp_key)
    assert r is not None
    return (r.finished, r.pass_rate, r.mean_reward_valid, r.throughput_per_min,
            sorted((x.path, round(x.running_s)) for x in r.running), dict(r.counts))


def test_deltas_give_what_a_full_pass_gives(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path / "jobs", "terminal_bench_2_live_2026-01-01__00-00-00", n_attempts=2,
                     finished=False, n_total_trials=40)
    for i in range(20):
        job.add(f"task-{i % 8}", float(i % 3 == 0) if i % 4 else None, "DaytonaError" if i % 4 == 0 else None,
                started=NOW - timedelta(minutes=60 - i), duration_s=1800.0)
    for i in range(6):
        job.add(f"live-{i}", running=True)
    d = job.write()
    src = HarborSource(d, verify_window_s=0)
    live = MonitorState(Policy(), clock=lambda: NOW)
    deltas = []

    def step() -> None:
        snap = src.scan_sync()
        exp = snap.experiments[0]
        deltas.append(exp._delta is not None)
        live.feed(snap, {})
        fresh = MonitorState(Policy(), clock=lambda: NOW)
        fresh.feed_experiment(copy_with(exp))  # the same trials with no history: one full pass
        key = experiment_key(exp)
        assert _reading(live, key) == _reading(fresh, key)

    step()
    for t in [t for t in job.trials if t.running][:3]:  # three running trials finish
        t.running = False
        t.reward = 1.0
        t.started = NOW - timedelta(minutes=4)
        job.write_trial(t)
    step()
    first = job.trials[0]
    shutil.copytree(d / (first.name or ""), d / "restored" / (first.name or ""))  # a staged copy appears
    step()
    shutil.rmtree(d / (first.name or ""))  # the original goes: the copy counts now
    step()
    gone = job.trials[5]
    shutil.rmtree(d / (gone.name or ""))
    res = d / (job.trials[6].name or "") / "result.json"
    data = json.loads(res.read_text())
    data["verifier_result"] = {"rewards": {"reward": 0.5}}
    res.write_text(json.dumps(data))
    new = job.add("task-new", 1.0, started=NOW - timedelta(minutes=5), duration_s=180.0)
    job.write_trial(new)
    step()
    step()  # nothing changed
    assert deltas == [False, True, True, True, True, True]
