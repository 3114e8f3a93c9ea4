"""A Rock regression work dir for the demo: one finished experiment that needs a retry.

Laid out as regression.py leaves it (results/, configs/, logs/), written by evaldesk's own
code with a fixed seed, so its figures are the same on every machine.
"""

from __future__ import annotations

import json
import os
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from services.core.times import DEMO_NOW

EXPERIMENT_ID = "exp-7f3a9c21"
_TASKS = [
    "fix-git-merge", "build-cython-ext", "configure-nginx-tls", "debug-flaky-pytest", "migrate-sqlite-wal",
    "optimize-numpy-loop", "recover-deleted-branch", "secure-ssh-config", "port-bash-to-python", "profile-go-service",
    "train-tiny-mlp", "parse-apache-logs", "compress-parquet", "cron-backup-rotate", "dedupe-csv-rows",
    "docker-multistage", "fix-cmake-link", "k8s-readiness-probe", "latex-bibliography", "make-parallel-build",
    "openssl-self-signed", "pandas-groupby-fix", "postgres-index-tune", "redis-persistence", "regex-log-filter",
    "rust-borrow-fix", "sympy-integral", "tar-incremental", "tmux-session-script", "unicode-normalize",
    "vim-macro-refactor", "wasm-hello-world", "xml-to-json", "yaml-schema-validate", "zip-slip-patch",
    "jq-report", "git-bisect-bug", "systemd-timer", "iptables-rules", "lsof-port-leak",
]
_ERRORS = {
    "RewardFileNotFoundError": "reward file /logs/verifier/reward.txt not found after the verifier ran",
    "RuntimeError": "docker: Error response from daemon: no space left on device",
}


def _iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def _outcomes(rng: random.Random) -> list[tuple[str, float | None, str | None]]:
    """(status, reward, exception type) per task: 30 scored, 7 errors, 2 timeouts, 1 cancelled."""
    plan: list[tuple[str, float | None, str | None]] = []
    plan += [("completed", 1.0, None)] * 17 + [("completed", 0.0, None)] * 13
    plan += [("error", None, "RewardFileNotFoundError")] * 4 + [("error", None, "RuntimeError")] * 3
    plan += [("timeout", None, "AgentTimeoutError")] * 2 + [("cancelled", None, None)]
    rng.shuffle(plan)
    return plan


def _log(rng: random.Random, task: str, start: datetime, status: str, exc: str | None, reward: float | None) -> str:
    t = start
    lines = []

    def log(level: str, msg: str) -> None:
        nonlocal t
        t += timedelta(seconds=rng.randint(5, 90))
        lines.append(f"{t:%Y-%m-%d %H:%M:%S},{rng.randint(0, 999):03d} {level} regression: {msg}")

    log("INFO", f"dispatch {task} to sandbox sb-{rng.getrandbits(32):08x}")
    log("INFO", "sandbox alive; pulling image rock-registry/terminal-bench-core:2026.11")
    log("INFO", "agent claude-code started")
    for i in range(rng.randint(2, 5)):
        cmd = rng.choice(["ls -la", "pytest -q", "make", "git status", "cat README"])
        log("INFO", f"agent step {i + 1}: ran {cmd}")
    if exc == "RuntimeError":
        log("ERROR", "sandbox command failed")
        lines += ["Traceback (most recent call last):",
                  '  File "regression.py", line 412, in run_task',
                  "    result = rc_agent_run(task, cfg)",
                  '  File "regression.py", line 288, in rc_agent_run',
                  "    raise RuntimeError(stderr.strip())",
                  f"RuntimeError: {_ERRORS['RuntimeError']}"]
    elif exc == "RewardFileNotFoundError":
        log("INFO", "agent finished; running verifier")
        log("ERROR", _ERRORS["RewardFileNotFoundError"])
        lines += ["Traceback (most recent call last):",
                  '  File "regression.py", line 455, in collect_reward',
                  "    raise RewardFileNotFoundError(path)",
                  f"RewardFileNotFoundError: {_ERRORS['RewardFileNotFoundError']}"]
    elif exc == "AgentTimeoutError":
        log("WARNING", "agent exceeded its 1800 s budget; stopped")
    elif status == "cancelled":
        log("WARNING", "task cancelled by the operator")
    else:
        log("INFO", "agent finished; running verifier")
        log("INFO", f"reward {reward:g}")
    return "\n".join(lines) + "\n"


def write_demo(root: str | Path, now: datetime = DEMO_NOW, seed: int = 11) -> list[Path]:
    """Write the work dir under `root`; returns the results file."""
    rng = random.Random(seed)
    root = Path(root)
    for sub in ("results", "configs", f"logs/{EXPERIMENT_ID}"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    began = now - timedelta(hours=3)
    tasks: list[dict[str, Any]] = []
    for i, (task, (status, reward, exc)) in enumerate(zip(_TASKS, _outcomes(rng), strict=True)):
        start = began + timedelta(minutes=4 * (i // 8), seconds=rng.randint(0, 200))
        dur = rng.randint(300, 1500) if exc != "AgentTimeoutError" else 1800
        end = start + timedelta(seconds=dur)
        n_in = rng.randint(200_000, 1_500_000)
        rec: dict[str, Any] = {
            "task_id": task, "job_name": f"tbc-{task}-{rng.getrandbits(16):04x}", "status": status,
            "reward": reward, "exception_type": exc, "exception_message": _ERRORS.get(exc or "")
            or ("Agent execution timed out after 1800 s" if exc else None),
            "started_at": _iso(start), "finished_at": _iso(end), "sandbox_id": f"sb-{rng.getrandbits(32):08x}",
            "n_input_tokens": n_in, "n_output_tokens": n_in // rng.randint(20, 40),
            "cost_usd": round(n_in * 3e-6, 4),
        }
        tasks.append(rec)
        log = root / "logs" / EXPERIMENT_ID / f"{task}.log"
        log.write_text(_log(rng, task, start, status, exc, reward))
        os.utime(log, (end.timestamp(), end.timestamp()))
    finished = max(datetime.fromisoformat(t["finished_at"].replace("Z", "+00:00")) for t in tasks)
    results = {
        "experiment_id": EXPERIMENT_ID, "bench": "terminal-bench-core", "dataset": "terminal-bench-core",
        "split": "test", "agent": "claude-code", "model": "anthropic/claude-sonnet-4-5",
        "created_at": _iso(began), "updated_at": _iso(finished), "finished_at": _iso(finished), "tasks": tasks,
    }
    config = {
        "bench": "terminal-bench-core", "dataset": "terminal-bench-core", "split": "test", "agent": "claude-code",
        "model": "anthropic/claude-sonnet-4-5", "image": "rock-registry/terminal-bench-core:2026.11",
        "cluster": "vpc-zb-a", "concurrency": 8, "window_size": 10, "pre": True, "poll": 30, "tasks": None,
        "set": ["agent.kwargs.temperature=0.7", "agent.kwargs.max_tokens=32000"], "ee": ["AGENT_TIMEOUT=1800"],
    }
    out = root / "results" / f"{EXPERIMENT_ID}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    (root / "configs" / f"{EXPERIMENT_ID}.json").write_text(json.dumps(config, indent=2) + "\n")
    for p in (out, root / "configs" / f"{EXPERIMENT_ID}.json"):
        os.utime(p, (finished.timestamp(), finished.timestamp()))
    return [out]
