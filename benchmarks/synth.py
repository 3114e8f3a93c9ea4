"""Write a large synthetic Harbor job dir quickly (Harbor-shaped files of realistic size)."""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path


def write_job(root: Path, n_trials: int, n_attempts: int = 3, seed: int = 1, running: int = 0) -> Path:
    rng = random.Random(seed)
    job = root / f"synthetic-bench_synthetic-{n_trials}_2026-11-01__00-00-00"
    job.mkdir(parents=True, exist_ok=True)
    n_tasks = max(1, -(-n_trials // n_attempts))
    (job / "config.json").write_text(json.dumps({
        "job_name": job.name, "n_attempts": n_attempts,
        "agents": [{"name": "terminus-2", "model_name": "hosted_vllm/laion/Synthetic-8B"}],
        "datasets": [{"name": "synthetic-bench"}],
    }))
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    cfg_pad = {"environment": {"type": "daytona", "kwargs": {f"k{i}": "v" * 20 for i in range(12)}},
               "verifier": {"disable": False}, "timeout_multiplier": 1.0}
    for i in range(n_trials):
        task = f"task-{i % n_tasks:06d}"
        name = f"{task}__{i:07d}"
        d = job / name
        d.mkdir(exist_ok=True)
        cfg = {"task": {"path": f"datasets/terminal_bench_2/{task}"}, "trial_name": name,
               "agent": {"name": "terminus-2", "model_name": "hosted_vllm/laion/Synthetic-8B"}, **cfg_pad}
        (d / "config.json").write_text(json.dumps(cfg))
        if i >= n_trials - running:
            continue
        errored = rng.random() < 0.05
        st = t0 + timedelta(seconds=i)
        res = {
            "id": f"{rng.getrandbits(128):032x}", "task_name": task, "trial_name": name,
            "trial_uri": f"file://{d}", "task_id": {"path": f"datasets/terminal_bench_2/{task}"},
            "source": "synthetic-bench", "task_checksum": f"{rng.getrandbits(64):016x}", "config": cfg,
            "agent_info": {"name": "terminus-2", "version": "2.0.0",
                           "model_info": {"name": "laion/Synthetic-8B", "provider": "hosted_vllm"}},
            "agent_result": {"n_input_tokens": 123456, "n_cache_tokens": 4567, "n_output_tokens": 8910,
                             "cost_usd": 0.12},
            "verifier_result": None if errored else {"rewards": {"reward": float(rng.random() < 0.4)}},
            "exception_info": {"exception_type": "DaytonaError", "exception_message": "503",
                               "exception_traceback": "Traceback ...\n" * 5,
                               "occurred_at": st.isoformat()} if errored else None,
            "started_at": st.isoformat(), "finished_at": (st + timedelta(seconds=600)).isoformat(),
            "environment_setup": {"started_at": st.isoformat(), "finished_at": st.isoformat()},
            "agent_setup": {"started_at": st.isoformat(), "finished_at": st.isoformat()},
            "agent_execution": {"started_at": st.isoformat(), "finished_at": st.isoformat()},
            "verifier": {"started_at": st.isoformat(), "finished_at": st.isoformat()},
        }
        (d / "result.json").write_text(json.dumps(res, indent=4))
    (job / "result.json").write_text(json.dumps({
        "id": "synthetic", "started_at": "2026-11-01T00:00:00", "finished_at": "2026-11-02T00:00:00",
        "n_total_trials": n_trials,
        "stats": {"evals": {"terminus-2__laion/Synthetic-8B__synthetic-bench": {"metrics": [{"mean": 0.4}]}}},
    }))
    return job


def touch_results(job: Path, count: int) -> list[Path]:
    """Rewrite `count` trial results (new content, new mtime), as a live job does."""
    changed = []
    dirs = sorted(p for p in job.iterdir() if p.is_dir())[:count]
    for d in dirs:
        f = d / "result.json"
        if f.exists():
            data = json.loads(f.read_text())
            data["verifier_result"] = {"rewards": {"reward": 1.0}}
            f.write_text(json.dumps(data, indent=4))
            st = os.stat(f)
            os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
            changed.append(f)
    return changed
