"""Write Harbor-shaped job dirs for tests, field for field as Harbor 0.1.x – 0.26 writes them.

The shapes follow Harbor's own models (harbor/models/trial/result.py, job/result.py,
job/config.py): trial times are UTC-aware ("…Z"), job times naive local, trial dirs are
named f"{task_name[:32].rstrip('_-')}__{7 random chars}", the job result carries no
trial_results and 0.1.x job results keep n_trials/n_errors at the top of stats.
"""

from __future__ import annotations

import json
import math
import os
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

T0 = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
SHORTUUID_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

# Harbor's error-policy groups, as 0.26 serialises `exception_info.policy`.
_POLICY: dict[str, dict[str, bool]] = {
    "AgentTimeoutError": {"should_retry": False, "should_grade": True, "has_valid_reward": True},
    "ContextLengthExceededError": {"should_retry": False, "should_grade": True, "has_valid_reward": True},
    "VerificationNotCompletedError": {"should_retry": False, "should_grade": False, "has_valid_reward": False},
    "DaytonaError": {"should_retry": True, "should_grade": True, "has_valid_reward": True},
    "EnvironmentStartTimeoutError": {"should_retry": True, "should_grade": False, "has_valid_reward": False},
    "ApiRateLimitError": {"should_retry": True, "should_grade": True, "has_valid_reward": False},
    "CancelledError": {"should_retry": False, "should_grade": False, "has_valid_reward": False},
}
_UNKNOWN_POLICY = {"should_retry": True, "should_grade": True, "has_valid_reward": True}

MISSING: Any = object()  # leave a key out of the file entirely


def iso_utc(dt: datetime) -> str:
    """How pydantic writes an aware UTC datetime."""
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def iso_naive_local(dt: datetime) -> str:
    """How Harbor writes job times: datetime.now() — naive, local time."""
    return dt.astimezone().replace(tzinfo=None).isoformat()


def trial_dir_name(task: str, rng: random.Random) -> str:
    return f"{task[:32].rstrip('_-')}__{''.join(rng.choice(SHORTUUID_ALPHABET) for _ in range(7))}"


@dataclass
class TrialSpec:
    task: str
    reward: Any = 1.0  # a number, None for no verifier result, or any raw JSON value
    exception: str | None = None
    started: datetime = T0
    duration_s: float = 300.0
    name: str = ""  # the trial dir name; generated the way Harbor does when empty
    subdir: str | None = None  # a staged copy sits at <subdir>/<name>
    running: bool = False
    raw_result: str | bytes | None = None  # written verbatim instead of a TrialResult
    schema: Literal["0.1", "0.26"] = "0.1"
    n_input_tokens: int = 120_000
    n_output_tokens: int = 8_000
    cost_usd: float = 0.25
    path: Path | None = field(default=None, init=False)

    @property
    def has_reward(self) -> bool:
        r = self.reward
        return isinstance(r, int | float) and not isinstance(r, bool) and math.isfinite(r)


class JobBuilder:
    """A Harbor job dir under construction; `write()` puts it on disk and returns its path."""

    def __init__(
        self,
        root: Path,
        name: str = "terminal_bench_2_org-Model-8B_2026-03-02__09-00-00",
        *,
        dataset: str = "terminal_bench_2",
        model: str = "hosted_vllm/org/Model-8B",
        agent: str = "terminus-2",
        n_attempts: Any = 3,
        n_total_trials: Any = MISSING,  # MISSING: len(trials) of the plan, like Harbor
        finished: bool = True,
        legacy_stats: bool = False,
        score: Any = "auto",
        write_config: bool = True,
        write_result: bool = True,
        extra_config: dict[str, Any] | None = None,
        seed: int = 1,
        lean: bool = False,  # only config.json and result.json per trial: fast for big jobs
    ) -> None:
        self.lean = lean
        self.root = Path(root)
        self.name = name
        self.dir = self.root / name
        self.dataset = dataset
        self.model = model
        self.agent = agent
        self.n_attempts = n_attempts
        self.n_total_trials = n_total_trials
        self.finished = finished
        self.legacy_stats = legacy_stats
        self.score = score
        self.write_config = write_config
        self.write_result = write_result
        self.extra_config = extra_config or {}
        self.rng = random.Random(seed)
        self.trials: list[TrialSpec] = []

    # -- building -------------------------------------------------------------------------
    def add(self, task: str, reward: Any = 1.0, exception: str | None = None, **kw: Any) -> TrialSpec:
        spec = TrialSpec(task=task, reward=reward, exception=exception, **kw)
        if not spec.name:
            spec.name = trial_dir_name(task, self.rng)
        self.trials.append(spec)
        return spec

    def add_many(self, tasks: list[str], n_rep: int, reward: Any = 1.0, **kw: Any) -> list[TrialSpec]:
        out = []
        for a in range(n_rep):
            for i, task in enumerate(tasks):
                out.append(self.add(task, reward, started=T0 + timedelta(minutes=a * 100 + i), **kw))
        return out

    # -- shapes ---------------------------------------------------------------------------
    def agent_config(self) -> dict[str, Any]:
        return {"name": self.agent, "import_path": None, "model_name": self.model, "override_timeout_sec": None,
                "override_setup_timeout_sec": None, "max_timeout_sec": None, "kwargs": {}, "env": {}}

    def job_config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "schema_version": 1,
            "job_name": self.name,
            "jobs_dir": str(self.root),
            "n_attempts": self.n_attempts,
            "timeout_multiplier": 1.0,
            "debug": False,
            "n_concurrent_trials": 16,
            "quiet": False,
            "retry": {"max_retries": 0, "include_exceptions": None, "exclude_exceptions": ["CancelledError"],
                      "wait_multiplier": 1.0, "min_wait_sec": 1.0, "max_wait_sec": 60.0},
            "environment": {"type": "daytona", "import_path": None, "force_build": False, "delete": True,
                            "override_cpus": None, "override_memory_mb": None, "kwargs": {}},
            "verifier": {"override_timeout_sec": None, "max_timeout_sec": None, "disable": False},
            "metrics": [],
            "agents": [self.agent_config()],
            "datasets": [{"path": None, "name": self.dataset, "version": "head", "ref": None,
                          "registry_url": None, "task_names": None, "exclude_task_names": None, "n_tasks": None}],
            "tasks": [],
            "artifacts": [],
        }
        if self.n_attempts is MISSING:
            del cfg["n_attempts"]
        cfg.update(self.extra_config)
        return cfg

    def trial_config(self, t: TrialSpec) -> dict[str, Any]:
        return {
            "task": {"path": f"datasets/{self.dataset}/{t.task}", "git_url": None, "git_commit_id": None,
                     "name": None, "ref": None, "overwrite": False, "download_dir": None, "source": self.dataset},
            "trial_name": t.name,
            "trials_dir": str(self.dir),
            "timeout_multiplier": 1.0,
            "agent": self.agent_config(),
            "environment": {"type": "daytona", "force_build": False, "delete": True, "kwargs": {}},
            "verifier": {"override_timeout_sec": None, "max_timeout_sec": None, "disable": False},
            "artifacts": [],
            "job_id": str(uuid.UUID(int=self.rng.getrandbits(128))),
        }

    def trial_result(self, t: TrialSpec) -> dict[str, Any]:
        end = t.started + timedelta(seconds=t.duration_s)
        exc: dict[str, Any] | None = None
        if t.exception:
            exc = {
                "exception_type": t.exception,
                "exception_message": f"{t.exception}: raised in the test job",
                "exception_traceback": f"Traceback (most recent call last):\n  ...\n{t.exception}: boom\n",
                "occurred_at": iso_utc(end),
            }
            if t.schema == "0.26":
                exc["policy"] = _POLICY.get(t.exception, _UNKNOWN_POLICY)
        verifier = None if t.reward is None else {"rewards": {"reward": t.reward}}
        res: dict[str, Any] = {
            "id": str(uuid.UUID(int=self.rng.getrandbits(128))),
            "task_name": t.task,
            "trial_name": t.name,
            "trial_uri": (self.dir / (t.name or "")).as_uri(),
            "task_id": {"path": f"datasets/{self.dataset}/{t.task}"},
            "source": self.dataset,
            "task_checksum": f"{self.rng.getrandbits(64):016x}",
            "config": self.trial_config(t),
            "agent_info": {"name": self.agent, "version": "2.0.0",
                           "model_info": {"name": self.model.split("/", 1)[-1], "provider": "hosted_vllm"}},
            "agent_result": {"n_input_tokens": t.n_input_tokens, "n_cache_tokens": t.n_input_tokens // 4,
                             "n_output_tokens": t.n_output_tokens, "cost_usd": t.cost_usd,
                             "rollout_details": None, "metadata": None},
            "verifier_result": verifier,
            "exception_info": exc,
            "started_at": iso_utc(t.started),
            "finished_at": iso_utc(end),
            "environment_setup": {"started_at": iso_utc(t.started),
                                  "finished_at": iso_utc(t.started + timedelta(seconds=10))},
            "agent_setup": {"started_at": iso_utc(t.started + timedelta(seconds=10)),
                            "finished_at": iso_utc(t.started + timedelta(seconds=20))},
            "agent_execution": {"started_at": iso_utc(t.started + timedelta(seconds=20)),
                                "finished_at": iso_utc(end - timedelta(seconds=15))},
            "verifier": {"started_at": iso_utc(end - timedelta(seconds=15)), "finished_at": iso_utc(end)},
            "step_results": None,
        }
        if t.schema == "0.26":
            valid = t.has_reward and (exc is None or exc["policy"]["has_valid_reward"])
            res = {"schema_version": 1, **res, "verifier_environment_mode": "shared", "reward_valid": valid}
        return res

    def eval_key(self) -> str:
        return f"{self.agent}__{self.model.split('/', 1)[-1]}__{self.dataset}"

    def job_result(self) -> dict[str, Any]:
        originals = [t for t in self.trials if t.subdir is None]
        done = [t for t in originals if not t.running]
        rewards = [float(t.reward) for t in done if t.has_reward]
        reward_stats: dict[str, dict[str, list[str]]] = {"reward": {}}
        exception_stats: dict[str, list[str]] = {}
        for t in done:
            if t.has_reward:
                reward_stats["reward"].setdefault(str(float(t.reward)), []).append(t.name or "")
            if t.exception:
                exception_stats.setdefault(t.exception, []).append(t.name or "")
        n_err = sum(1 for t in done if t.exception)
        if self.score == "auto":
            mean: Any = sum(rewards) / len(rewards) if rewards else 0.0
        else:
            mean = self.score
        ev = {"n_trials": len(rewards), "n_errors": n_err, "metrics": [{"mean": mean}],
              "pass_at_k": {}, "reward_stats": reward_stats, "exception_stats": exception_stats}
        n_total = len(originals) if self.n_total_trials is MISSING else self.n_total_trials
        stats: dict[str, Any]
        if self.legacy_stats:
            # Harbor 0.1.x: the progress counters sat at the top of stats under older names
            stats = {"n_trials": len(done), "n_errors": n_err, "evals": {self.eval_key(): ev}}
        else:
            running = sum(1 for t in originals if t.running)
            stats = {
                "n_completed_trials": len(done), "n_errored_trials": n_err, "n_running_trials": running,
                "n_pending_trials": max((n_total or 0) - len(done) - running, 0),
                "n_cancelled_trials": sum(1 for t in done if t.exception == "CancelledError"), "n_retries": 0,
                "evals": {self.eval_key(): ev},
                "n_input_tokens": sum(t.n_input_tokens for t in done),
                "n_cache_tokens": sum(t.n_input_tokens // 4 for t in done),
                "n_output_tokens": sum(t.n_output_tokens for t in done),
                "cost_usd": sum(t.cost_usd for t in done),
            }
        started = min((t.started for t in self.trials), default=T0)
        ended = max((t.started + timedelta(seconds=t.duration_s) for t in self.trials), default=T0)
        res: dict[str, Any] = {
            "id": str(uuid.UUID(int=self.rng.getrandbits(128))),
            "started_at": iso_naive_local(started),
            "updated_at": iso_naive_local(ended),
            "finished_at": iso_naive_local(ended) if self.finished else None,
            "n_total_trials": n_total,
            "stats": stats,
        }
        if n_total is MISSING or n_total is None:
            res.pop("n_total_trials")
        if not self.legacy_stats:
            res = {"schema_version": 1, **res}
        return res

    # -- disk -----------------------------------------------------------------------------
    def write_trial(self, t: TrialSpec) -> Path:
        tdir = self.dir / t.subdir / (t.name or "") if t.subdir else self.dir / (t.name or "")
        tdir.mkdir(parents=True, exist_ok=True)
        (tdir / "config.json").write_text(json.dumps(self.trial_config(t), indent=4))
        if not self.lean:
            (tdir / "trial.log").write_text(f"starting trial {t.name}\n")
        t.path = tdir
        if t.running:
            return tdir
        rpath = tdir / "result.json"
        if t.raw_result is not None:
            data = t.raw_result.encode() if isinstance(t.raw_result, str) else t.raw_result
            rpath.write_bytes(data)
        elif self.lean:
            rpath.write_text(json.dumps(self.trial_result(t), ensure_ascii=False))
        else:
            (tdir / "verifier").mkdir(exist_ok=True)
            if t.has_reward:
                (tdir / "verifier" / "reward.txt").write_text(f"{t.reward}\n")
            rpath.write_text(json.dumps(self.trial_result(t), indent=4, ensure_ascii=False))
        return tdir

    def write(self) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.write_config:
            (self.dir / "config.json").write_text(json.dumps(self.job_config(), indent=4))
        for t in self.trials:
            self.write_trial(t)
        if self.write_result:
            (self.dir / "result.json").write_text(json.dumps(self.job_result(), indent=4, ensure_ascii=False))
        (self.dir / "job.log").write_text(f"Starting job {self.name}\n")
        return self.dir


def tasks(n: int, prefix: str = "task") -> list[str]:
    return [f"{prefix}-{i:03d}" for i in range(n)]


def healthy_job(root: Path, name: str = "terminal_bench_2_org-Model-8B_2026-03-02__09-00-00",
                n_tasks: int = 10, n_rep: int = 3, **kw: Any) -> JobBuilder:
    """A finished job every check passes: n_tasks × n_rep, all scored, half of them passes."""
    kw.setdefault("n_attempts", n_rep)
    job = JobBuilder(root, name, **kw)
    for a in range(n_rep):
        for i, task in enumerate(tasks(n_tasks)):
            job.add(task, float((i + a) % 2), started=T0 + timedelta(minutes=a * 100 + i))
    return job


def bump(path: Path, data: str | bytes, seconds: float = 5.0) -> None:
    """Rewrite a file and move its mtime back so (mtime, size) always changes, even where a key
    has whole seconds (SFTP), and the file is not one from the future (never settled)."""
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root (outside the quarantine) with its bytes, for exact comparisons."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".evaldesk-quarantine"]
        for f in filenames:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def scan(path: Path | str, policy: Any = None) -> Any:
    """One full scan of a local path with evaldesk's Harbor source; returns the Snapshot."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from services.harbor.source import HarborSource

    src = HarborSource(path, policy)
    try:
        return src.scan_sync()
    finally:
        # close on a loop of its own: callers may be sync tests or coroutines
        with ThreadPoolExecutor(1) as ex:
            ex.submit(asyncio.run, src.close()).result()


def scan_one(path: Path | str, policy: Any = None) -> Any:
    snap = scan(path, policy)
    assert len(snap.experiments) == 1, snap
    return snap.experiments[0]
