"""Deterministic demo data: a folder of Harbor job dirs showing every situation evaldesk handles.

Written by evaldesk's own code, not copied from anywhere, so it is reproducible byte for byte
(given the same `now`) and the tests can rely on its figures.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from services.core.times import DEMO_NOW
from services.harbor.parse import parse_trial
from services.harbor.stats import eval_key, job_stats

_VERBS = ["fix", "build", "configure", "debug", "migrate", "optimize", "recover", "secure", "port", "profile"]
_NOUNS = [
    "git-history", "cython-ext", "kv-store-grpc", "nginx-proxy", "sqlite-wal", "rust-cli", "pandas-etl",
    "cron-backup", "tls-certs", "docker-compose", "pytorch-ckpt", "raft-log", "redis-cluster", "latex-build",
    "openssl-fips", "django-admin", "sympy-simplify", "regex-engine", "png-decoder", "make-deps",
]

_EXCEPTIONS: dict[str, tuple[str, str]] = {
    "DaytonaError": ("sandbox_failed", "Failed to create sandbox: 503 Service Unavailable (region capacity)"),
    "EnvironmentStartTimeoutError": ("sandbox_failed", "Environment did not become healthy within 600s"),
    "AgentTimeoutError": ("agent_exhausted_budget", "Agent execution timed out after 1500.0 seconds"),
    "ContextLengthExceededError": ("agent_exhausted_budget", "prompt is 131204 tokens, limit 131072"),
    "VerifierOutputParseError": ("verifier_failed", "Could not parse reward from /logs/verifier/reward.txt"),
    "VerificationNotCompletedError": ("verifier_failed", "Verifier did not complete: agent budget exhausted"),
    "ApiRateLimitError": ("model_provider_failed", "429 Too Many Requests: rate limit for org exceeded"),
    "ModelNotFoundError": (
        "model_provider_failed",
        "hosted_vllm//1774950145766573 not found: the model is not served at http://10.0.3.17:8000/v1",
    ),
    "NonZeroAgentExitCodeError": ("agent_exhausted_budget", "Agent exited with code 137 (OOM killed)"),
    "CancelledError": ("cancelled", ""),
}


@dataclass
class DemoTrial:
    task: str
    reward: float | None
    exception: str | None = None
    running: bool = False
    started: datetime = DEMO_NOW
    duration_s: float = 600.0
    subdir: str | None = None  # staged copy location
    trial_name: str | None = None
    broken: str | None = None  # raw result.json text to write instead


@dataclass
class DemoJob:
    name: str
    agent: str
    model: str
    dataset: str
    n_attempts: int
    trials: list[DemoTrial]
    planned: int
    finished: bool
    model_hf_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _tasks(rng: random.Random, n: int) -> list[str]:
    names: list[str] = []
    while len(names) < n:
        name = f"{rng.choice(_VERBS)}-{rng.choice(_NOUNS)}"
        if name in names:
            name = f"{name}-{len(names)}"
        names.append(name)
    return names


def _suffix(rng: random.Random) -> str:
    return "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789") for _ in range(7))


def _outcome(rng: random.Random, p_pass: float, errors: dict[str, float]) -> tuple[float | None, str | None]:
    roll = rng.random()
    acc = 0.0
    for exc, p in errors.items():
        acc += p
        if roll < acc:
            if exc in ("AgentTimeoutError", "ContextLengthExceededError", "NonZeroAgentExitCodeError"):
                return (1.0 if rng.random() < p_pass * 0.3 else 0.0), exc
            return None, exc
    return (1.0 if rng.random() < p_pass else 0.0), None


def build_jobs(now: datetime = DEMO_NOW, seed: int = 7) -> list[DemoJob]:
    rng = random.Random(seed)
    jobs: list[DemoJob] = []
    t0 = now - timedelta(hours=30)

    def run(tasks: list[str], n_att: int, p_pass: float, errors: dict[str, float], start: datetime,
            spread_h: float = 6.0) -> list[DemoTrial]:
        out = []
        for a in range(n_att):
            for task in tasks:
                reward, exc = _outcome(rng, p_pass, errors)
                st = start + timedelta(seconds=rng.uniform(0, spread_h * 3600) + a * 60)
                out.append(DemoTrial(task, reward, exc, started=st, duration_s=rng.uniform(120, 1400)))
        return out

    # 1. healthy and finished: terminal_bench_2 × 3
    tb2 = _tasks(rng, 89)
    trials = run(tb2, 3, 0.42, {"AgentTimeoutError": 0.05, "DaytonaError": 0.02}, t0)
    jobs.append(DemoJob("terminal_bench_2_laion-OpenThinker-Agent-8B_2026-11-19__12-00-00", "terminus-2",
                        "hosted_vllm/laion/OpenThinker-Agent-8B", "terminal_bench_2", 3, trials, 267, True))

    # 2. running: swebench-verified-random-100 × 1, two thirds through
    swe = [f"{repo}-{rng.randint(10000, 29999)}" for repo in
           ["django__django", "sympy__sympy", "pytest-dev__pytest", "astropy__astropy", "sphinx-doc__sphinx",
            "matplotlib__matplotlib", "scikit-learn__scikit-learn", "pydata__xarray", "psf__requests",
            "pylint-dev__pylint"] for _ in range(10)]
    start = now - timedelta(hours=2)
    trials = []
    for i, task in enumerate(swe[:70]):
        st = start + timedelta(minutes=i * 1.6)
        if i == 62:  # one trial far past the 25 min inference timeout
            st = now - timedelta(minutes=45)
        if i >= 62:
            trials.append(DemoTrial(task, None, running=True, started=st))
            continue
        reward, exc = _outcome(rng, 0.55, {"ApiRateLimitError": 0.03})
        trials.append(DemoTrial(task, reward, exc, started=st, duration_s=rng.uniform(200, 900)))
    jobs.append(DemoJob("swebench-verified-random-100_claude-sonnet-4-5_2026-11-20__16-00-00", "claude-code",
                        "anthropic/claude-sonnet-4-5", "swebench-verified-random-100", 1, trials, 100, False,
                        extra={"override_timeout_sec": 1500}))

    # 3. duplicates from a resume: dev_set_v2 × 3, some tasks re-run, plus a staged copy folder
    dev = _tasks(rng, 100)
    trials = run(dev, 3, 0.35, {"DaytonaError": 0.04, "AgentTimeoutError": 0.04}, t0)
    resumed = rng.sample(dev, 14)
    for task in resumed:
        trials.append(DemoTrial(task, 1.0 if rng.random() < 0.5 else 0.0, None,
                                started=t0 + timedelta(hours=9, minutes=rng.uniform(0, 60))))
    for t in rng.sample(trials[:300], 6):
        t.trial_name = t.trial_name or f"{t.task[:32].rstrip('_-')}__{_suffix(rng)}"
        trials.append(DemoTrial(t.task, t.reward, t.exception, started=t.started, duration_s=t.duration_s,
                                subdir="restored", trial_name=t.trial_name))
    # an unreadable result the resume left behind
    trials.append(DemoTrial(dev[0], None, started=t0 + timedelta(hours=8), broken='{"task_name": "' + dev[0]))
    jobs.append(DemoJob("dev_set_v2_gpt-5-mini_2026-11-19__08-30-00", "terminus-2", "openai/gpt-5-mini",
                        "dev_set_v2", 3, trials, 300, True))

    # 4. short of valid trials: sandbox outages
    trials = run(tb2, 3, 0.38, {"DaytonaError": 0.22, "EnvironmentStartTimeoutError": 0.08}, t0)
    jobs.append(DemoJob("terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00", "terminus-2",
                        "hosted_vllm/laion/Qwen3-32B-agentic", "terminal_bench_2", 3, trials, 267, True))

    # 5. passes the valid count, fails the error gate (agent crashes the verifier still scored)
    trials = run(tb2, 3, 0.40, {"NonZeroAgentExitCodeError": 0.10, "VerifierOutputParseError": 0.06}, t0)
    jobs.append(DemoJob("terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00", "terminus-2",
                        "hosted_vllm/laion/SERA-14B", "terminal_bench_2", 3, trials, 267, True))

    # 6. never reached the model: vLLM numeric served id, dataset keyed by its version hash
    trials = run(tb2[:40], 1, 0.0, {"ModelNotFoundError": 0.97}, t0, spread_h=0.3)
    jobs.append(DemoJob("terminal_bench_2_1774950145766573_2026-11-19__11-20-00", "terminus-2",
                        "hosted_vllm/1774950145766573", "34ab93c4e1d2f0a9b8c7d6e5f4a3b2c1d0e9f8a7", 1,
                        trials, 89, True, model_hf_name="laion/OpenThinker-Agent-32B"))
    return jobs


def _iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def _log_lines(rng: random.Random, t: DemoTrial) -> list[str]:
    at = t.started
    lines = []

    def log(level: str, msg: str) -> None:
        nonlocal at
        at += timedelta(seconds=rng.uniform(0.5, 20))
        lines.append(f"{at.strftime('%Y-%m-%d %H:%M:%S,%f')[:-3]} {level:<7} harbor.trial: {msg}")

    log("INFO", f"Starting trial for task {t.task}")
    log("INFO", "Building environment (docker compose, image cache hit)")
    log("INFO", "Environment healthy after 14.2s")
    log("INFO", "Agent setup complete (terminus-2 2.0.0)")
    for step in range(rng.randint(6, 24)):
        cmd = rng.choice(["ls -la", "cat README.md", "python -m pytest -x -q", "git diff", "make -j4",
                          "grep -rn TODO src/", "pip install -e .", "sed -n 1,80p main.py"])
        log("DEBUG", f"episode {step}: keystrokes={cmd!r} duration_sec={rng.uniform(0.1, 30):.1f}")
        log("INFO", f"episode {step}: tokens in={rng.randint(2000, 40000)} out={rng.randint(50, 1500)}")
    if t.running:
        return lines
    if t.exception:
        log("ERROR", f"{t.exception}: {_EXCEPTIONS.get(t.exception, ('', 'failed'))[1]}")
    log("INFO", "Running verifier: bash /tests/test.sh")
    if t.reward is not None:
        log("INFO", f"Verifier finished, reward={t.reward}")
    log("INFO", "Trial finished")
    return lines


def _traceback(exc: str, msg: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/opt/harbor/src/harbor/trial/trial.py", line 412, in run\n'
        "    await self._execute_agent()\n"
        '  File "/opt/harbor/src/harbor/trial/trial.py", line 288, in _execute_agent\n'
        "    await asyncio.wait_for(self._agent.run(instruction, env, ctx), timeout=self._agent_timeout)\n"
        '  File "/opt/harbor/src/harbor/agents/terminus_2/terminus_2.py", line 731, in run\n'
        "    response = await self._llm.call(prompt=prompt, message_history=history)\n"
        f"harbor.errors.{exc}: {msg}\n"
    )


def write_demo(root: str | Path, now: datetime = DEMO_NOW, seed: int = 7) -> list[Path]:
    """Write the demo job dirs under `root`; returns their paths. Existing demo jobs are replaced."""
    import shutil

    rng = random.Random(seed + 1)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for job in build_jobs(now, seed):
        job_dir = root / job.name
        if job_dir.exists():
            shutil.rmtree(job_dir)
        job_dir.mkdir()
        agent_cfg: dict[str, Any] = {"name": job.agent, "model_name": job.model, "kwargs": {}}
        agent_cfg.update(job.extra)
        job_config = {
            "job_name": job.name,
            "jobs_dir": str(root),
            "n_attempts": job.n_attempts,
            "timeout_multiplier": 1.0,
            "n_concurrent_trials": 32,
            "retry": {"max_retries": 0, "include_exceptions": None, "exclude_exceptions": ["CancelledError"]},
            "environment": {"type": "daytona", "force_build": False, "delete": True},
            "agents": [agent_cfg],
            "datasets": [{"name": job.dataset, "version": "head", "registry_url": None}],
        }
        if job.model_hf_name:
            job_config["model_hf_name"] = job.model_hf_name
        (job_dir / "config.json").write_text(json.dumps(job_config, indent=4))
        parsed = []
        names_seen: set[str] = set()
        for t in job.trials:
            name = t.trial_name or f"{t.task[:32].rstrip('_-')}__{_suffix(rng)}"
            while name in names_seen and t.subdir is None:
                name = f"{t.task[:32].rstrip('_-')}__{_suffix(rng)}"
            names_seen.add(name)
            t.trial_name = name
            tdir = job_dir / (f"{t.subdir}/{name}" if t.subdir else name)
            tdir.mkdir(parents=True)
            trial_cfg = {
                "task": {"path": f"datasets/{job.dataset}/{t.task}", "source": job.dataset},
                "trial_name": name,
                "trials_dir": str(job_dir),
                "timeout_multiplier": 1.0,
                "agent": agent_cfg,
                "environment": job_config["environment"],
                "verifier": {"disable": False},
                "job_id": str(uuid.UUID(int=rng.getrandbits(128))),
            }
            (tdir / "config.json").write_text(json.dumps(trial_cfg, indent=4))
            log_lines = _log_lines(rng, t)
            (tdir / "trial.log").write_text("\n".join(log_lines) + "\n")
            (tdir / "agent").mkdir()
            (tdir / "agent" / "trajectory.json").write_text(json.dumps({
                "schema_version": "ATIF-v1.2", "session_id": str(uuid.UUID(int=rng.getrandbits(128))),
                "agent": {"name": job.agent, "model_name": job.model},
                "steps": [{"step_id": i, "source": "agent", "message": f"step {i}"} for i in range(3)],
            }, indent=2))
            if t.running:
                # files carry the times a live trial would have left on them, so idle and
                # running-time figures read true
                t_start = t.started.timestamp()
                last = min(now.timestamp(), t_start + 20 * len(log_lines))
                os.utime(tdir / "config.json", (t_start, t_start))
                os.utime(tdir / "trial.log", (last, last))
                continue
            (tdir / "verifier").mkdir()
            if t.broken is not None:
                (tdir / "result.json").write_text(t.broken)
                continue
            finished = t.started + timedelta(seconds=t.duration_s)
            exc_info = None
            if t.exception:
                msg = _EXCEPTIONS.get(t.exception, ("", "failed"))[1]
                tb = _traceback(t.exception, msg)
                exc_info = {"exception_type": t.exception, "exception_message": msg,
                            "exception_traceback": tb, "occurred_at": _iso(finished)}
                (tdir / "exception.txt").write_text(tb)
            if t.reward is not None:
                (tdir / "verifier" / "reward.txt").write_text(f"{t.reward:g}\n")
                passed = t.reward > 0
                (tdir / "verifier" / "test-stdout.txt").write_text(
                    "============================= test session starts ==============================\n"
                    f"collected 6 items\n\ntests/test_outputs.py {'......' if passed else '..F.F.'}"
                    f"                                      [100%]\n\n"
                    + ("" if passed else "FAILED tests/test_outputs.py::test_service_responds - "
                       "AssertionError: expected 200, got 502\n")
                    + f"========================= {'6 passed' if passed else '2 failed, 4 passed'} in 3.21s "
                      "=========================\n")
                (tdir / "verifier" / "test-stderr.txt").write_text("")
            n_in = rng.randint(40_000, 900_000)
            result = {
                "id": str(uuid.UUID(int=rng.getrandbits(128))),
                "task_name": t.task,
                "trial_name": name,
                "trial_uri": f"file://{tdir}",
                "task_id": {"path": f"datasets/{job.dataset}/{t.task}"},
                "source": job.dataset,
                "task_checksum": f"{rng.getrandbits(64):016x}",
                "config": trial_cfg,
                "agent_info": {"name": job.agent, "version": "2.0.0",
                               "model_info": {"name": job.model.split("/", 1)[-1], "provider": "hosted_vllm"}},
                "agent_result": {"n_input_tokens": n_in, "n_cache_tokens": n_in // 3,
                                 "n_output_tokens": rng.randint(2_000, 40_000),
                                 "cost_usd": round(n_in * 1.1e-6, 4), "rollout_details": None, "metadata": None},
                "verifier_result": {"rewards": {"reward": t.reward}} if t.reward is not None else None,
                "exception_info": exc_info,
                "started_at": _iso(t.started),
                "finished_at": _iso(finished),
                "environment_setup": {"started_at": _iso(t.started),
                                      "finished_at": _iso(t.started + timedelta(seconds=14))},
                "agent_setup": {"started_at": _iso(t.started + timedelta(seconds=14)),
                                "finished_at": _iso(t.started + timedelta(seconds=30))},
                "agent_execution": {"started_at": _iso(t.started + timedelta(seconds=30)),
                                    "finished_at": _iso(finished - timedelta(seconds=20))},
                "verifier": {"started_at": _iso(finished - timedelta(seconds=20)), "finished_at": _iso(finished)},
            }
            (tdir / "result.json").write_text(json.dumps(result, indent=4))
            mt = finished.timestamp()
            os.utime(tdir / "result.json", (mt, mt))
        for t in job.trials:
            if t.subdir is None:
                rel = t.trial_name or ""
                tdir = job_dir / rel
                rb = (tdir / "result.json").read_bytes() if (tdir / "result.json").exists() else None
                parsed.append(parse_trial(rel, rel, rb, (tdir / "config.json").read_bytes(), None))
        stats = job_stats(parsed, job.planned)
        started = min(t.started for t in job.trials)
        ended = max(t.started + timedelta(seconds=t.duration_s) for t in job.trials)
        job_result = {
            "id": str(uuid.UUID(int=rng.getrandbits(128))),
            # Harbor writes job times naive, in local time
            "started_at": started.astimezone().replace(tzinfo=None).isoformat(),
            "updated_at": (ended if job.finished else now).astimezone().replace(tzinfo=None).isoformat(),
            "finished_at": ended.astimezone().replace(tzinfo=None).isoformat() if job.finished else None,
            "n_total_trials": job.planned,
            "stats": stats,
        }
        (job_dir / "result.json").write_text(json.dumps(job_result, indent=4))
        (job_dir / "job.log").write_text(
            f"{started:%Y-%m-%d %H:%M:%S} INFO harbor.job: Starting job {job.name} "
            f"({job.planned} trials, {job.n_attempts} attempts per task)\n")
        out.append(job_dir)
    return out


__all__ = ["DEMO_NOW", "build_jobs", "eval_key", "write_demo"]
