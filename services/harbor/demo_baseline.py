"""The demo's alignment baseline: what the OpenThinker-Agent-8B run on terminal_bench_2 was
expected to score, and the config that score came from.

Written beside the demo job dirs (`<demo>/baselines/`), from the same seeded jobs, so the
audit of that run shows an `alignment` row with drift and top gap tasks out of the box.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from services.harbor.demo import build_jobs

JOB = "terminal_bench_2_laion-OpenThinker-Agent-8B_2026-11-19__12-00-00"
NAME = "terminal_bench_2-openthinker-agent-8b"
RAISED = 8  # tasks the reference run solved that this one mostly did not


def write_demo_baseline(root: Path, now: datetime, seed: int = 7) -> Path:
    job = next(j for j in build_jobs(now, seed) if j.name == JOB)
    outcomes: dict[str, list[float]] = {}
    for t in job.trials:
        outcomes.setdefault(t.task, []).append(min(max(t.reward or 0.0, 0.0), 1.0))
    expected = {task: round(sum(v) / len(v), 4) for task, v in sorted(outcomes.items())}
    for task in [t for t, e in expected.items() if e < 0.5][:RAISED]:
        expected[task] = 1.0
    baseline = {
        "benchmark": "terminal_bench_2",
        "model": "laion/OpenThinker-Agent-8B",
        "source": "demo: the reference run of the model card (made up for the demo)",
        "pass_rate": round(sum(expected.values()) / len(expected), 4),
        "n": 267,
        "config": {"model": "hosted_vllm/laion/OpenThinker-Agent-8B", "dataset_version": "head",
                   "temperature": 0.6, "timeout_multiplier": 2.0},
        "tasks": expected,
    }
    folder = root / "baselines"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{NAME}.json"
    path.write_text(json.dumps(baseline, indent=2) + "\n")
    return path
