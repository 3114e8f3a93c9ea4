"""Play a running Harbor job back into a folder, one deterministic step at a time.

Files are shaped like Harbor's own output (job config.json and the live job result.json,
per-trial config.json at start, trial.log lines while it works, result.json when it ends) and
every file's mtime is set from a fake clock, so a scan of the folder sees exactly the
timeline the test wrote, whatever the speed of the machine.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

T0 = datetime(2026, 11, 20, 16, 0, 0, tzinfo=UTC)
_ALPHABET = "abcdefghijkmnopqrstuvwxyz23456789"


def _iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


@dataclass
class _PlayTrial:
    name: str
    task: str
    started: datetime
    reward: float | None = None
    exception: str | None = None
    finished: datetime | None = None


@dataclass
class JobPlayback:
    root: Path
    name: str = "terminal_bench_2_playback-model_2026-11-20__16-00-00"
    planned: int = 40
    n_attempts: int = 1
    timeout_s: float = 600.0
    dataset: str = "terminal_bench_2"
    agent: str = "terminus-2"
    model: str = "hosted_vllm/playback-model"
    now: datetime = T0
    trials: dict[str, _PlayTrial] = field(default_factory=dict)
    ended: bool = False
    _counter: int = 0

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.job_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "job_name": self.name,
            "jobs_dir": str(self.root),
            "n_attempts": self.n_attempts,
            "timeout_multiplier": 1.0,
            "n_concurrent_trials": 8,
            "agents": [{"name": self.agent, "model_name": self.model, "override_timeout_sec": self.timeout_s}],
            "datasets": [{"name": self.dataset, "version": "head"}],
        }
        self._write(self.job_dir / "config.json", json.dumps(config, indent=4))
        self._write_job_result()

    # -- time --------------------------------------------------------------------------
    @property
    def job_dir(self) -> Path:
        return self.root / self.name

    def clock(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    # -- what Harbor writes ------------------------------------------------------------
    def start(self, task: str) -> str:
        """A trial starts: its dir and config.json appear, and the job result is rewritten."""
        self._counter += 1
        n, suffix = self._counter, ""
        for _ in range(7):
            n, r = divmod(n, len(_ALPHABET))
            suffix += _ALPHABET[r]
        name = f"{task[:32].rstrip('_-')}__{suffix}"
        tdir = self.job_dir / name
        tdir.mkdir()
        cfg = {
            "task": {"path": f"datasets/{self.dataset}/{task}", "source": self.dataset},
            "trial_name": name,
            "trials_dir": str(self.job_dir),
            "agent": {"name": self.agent, "model_name": self.model, "override_timeout_sec": self.timeout_s},
        }
        self._write(tdir / "config.json", json.dumps(cfg, indent=4))
        self.trials[name] = _PlayTrial(name, task, self.now)
        self.log(name, f"Starting trial for task {task}")
        self._write_job_result()
        return name

    def start_many(self, tasks: list[str]) -> list[str]:
        return [self.start(t) for t in tasks]

    def log(self, trial: str, message: str) -> None:
        path = self.job_dir / trial / "trial.log"
        line = f"{self.now:%Y-%m-%d %H:%M:%S},000 INFO    harbor.trial: {message}\n"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line)
        self._touch(path)

    def finish(self, trial: str, reward: float | None = None, exception: str | None = None) -> None:
        t = self.trials[trial]
        t.reward, t.exception, t.finished = reward, exception, self.now
        self.log(trial, "Trial finished")
        result: dict[str, Any] = {
            "id": f"00000000-0000-4000-8000-{self._counter:012d}",
            "task_name": t.task,
            "trial_name": t.name,
            "trial_uri": f"file://{self.job_dir / t.name}",
            "source": self.dataset,
            "agent_info": {"name": self.agent, "version": "2.0.0",
                           "model_info": {"name": self.model.split("/", 1)[-1], "provider": "hosted_vllm"}},
            "agent_result": {"n_input_tokens": 10_000, "n_cache_tokens": 0, "n_output_tokens": 500,
                             "cost_usd": 0.01},
            "verifier_result": {"rewards": {"reward": reward}} if reward is not None else None,
            "exception_info": (
                {"exception_type": exception, "exception_message": f"{exception} in playback",
                 "exception_traceback": "", "occurred_at": _iso(self.now)} if exception else None
            ),
            "started_at": _iso(t.started),
            "finished_at": _iso(self.now),
        }
        self._write(self.job_dir / trial / "result.json", json.dumps(result, indent=4))
        self._write_job_result()

    def end_job(self) -> None:
        self.ended = True
        self._write_job_result()

    def running(self) -> list[str]:
        return [n for n, t in self.trials.items() if t.finished is None]

    # -- files -------------------------------------------------------------------------
    def _write_job_result(self) -> None:
        done = [t for t in self.trials.values() if t.finished is not None]
        rewards = [t.reward for t in done if t.reward is not None]
        n_err = sum(1 for t in done if t.exception)
        key = f"{self.agent}__{self.model}__{self.dataset}"

        def naive(dt: datetime) -> str:
            return dt.astimezone().replace(tzinfo=None).isoformat()

        result = {
            "id": "11111111-2222-4333-8444-555555555555",
            "started_at": naive(T0),
            "updated_at": naive(self.now),
            "finished_at": naive(self.now) if self.ended else None,
            "n_total_trials": self.planned,
            "stats": {
                "n_completed_trials": len(done),
                "n_errored_trials": n_err,
                "n_running_trials": len(self.trials) - len(done),
                "n_pending_trials": max(self.planned - len(self.trials), 0),
                "n_cancelled_trials": 0,
                "n_retries": 0,
                "evals": {key: {"n_trials": len(rewards), "n_errors": n_err,
                                "metrics": [{"mean": sum(rewards) / len(rewards) if rewards else 0.0}]}},
            },
        }
        self._write(self.job_dir / "result.json", json.dumps(result, indent=4))

    def _write(self, path: Path, text: str) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        self._touch(path)

    def _touch(self, path: Path) -> None:
        ts = self.now.timestamp()
        os.utime(path, (ts, ts))


Step = Callable[[JobPlayback], None]


class Script:
    """Steps applied one per call, so a source's scan can be stepped from the test."""

    def __init__(self, playback: JobPlayback, steps: list[Step]) -> None:
        self.playback = playback
        self.steps = list(steps)
        self.done = 0

    def step(self) -> None:
        if self.done < len(self.steps):
            self.steps[self.done](self.playback)
            self.done += 1
