"""Write regression.py work dirs for tests: results/<id>.json, configs/<id>.json,
logs/<id>/<task>.log, as the Rock runbook lays them out."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

T0 = datetime(2026, 11, 20, 10, 0, 0, tzinfo=UTC)


def iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


@dataclass
class RegressionRun:
    """One experiment of a work dir; `task(...)` adds or updates a task record, `write()` saves."""

    workdir: Path
    exp_id: str = "exp-0001"
    bench: str = "terminal-bench-core"
    model: str = "anthropic/claude-sonnet-4-5"
    config: dict[str, Any] | None = field(default_factory=lambda: {
        "bench": "terminal-bench-core", "dataset": "terminal-bench-core", "split": "test", "agent": "claude-code",
        "model": "anthropic/claude-sonnet-4-5", "concurrency": 8, "set": ["agent.kwargs.temperature=0.7"],
        "ee": ["AGENT_TIMEOUT=600"]})
    status: str | None = None
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def task(self, task_id: str, status: str, reward: float | None = None, exception: str | None = None,
             message: str | None = None, started: datetime | None = None, duration_s: float = 300.0,
             log: str | None = None) -> RegressionRun:
        started = started or T0
        rec: dict[str, Any] = {"task_id": task_id, "job_name": f"job-{task_id}", "status": status, "reward": reward,
                               "exception_type": exception, "exception_message": message,
                               "started_at": iso(started) if status not in ("pending",) else None}
        if status not in ("pending", "dispatched", "running"):
            rec["finished_at"] = iso(started + timedelta(seconds=duration_s))
        self.tasks[task_id] = rec
        if log is not None:
            p = self.workdir / "logs" / self.exp_id / f"{task_id}.log"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(log)
        return self

    def write(self, mtime: float | None = None) -> Path:
        for sub in ("results", "configs", f"logs/{self.exp_id}"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        data = {"experiment_id": self.exp_id, "bench": self.bench, "dataset": self.bench, "split": "test",
                "agent": "claude-code", "model": self.model, "created_at": iso(T0), "updated_at": iso(T0),
                "tasks": list(self.tasks.values()), **self.extra}
        if self.status:
            data["status"] = self.status
        path = self.workdir / "results" / f"{self.exp_id}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
        if self.config is not None:
            (self.workdir / "configs" / f"{self.exp_id}.json").write_text(json.dumps(self.config))
        if mtime is not None:
            os.utime(path, (mtime, mtime))
        return path
