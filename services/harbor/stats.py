"""Rebuild a Harbor job result's `stats` block from trials, the way Harbor aggregates them.

Used after dedupe (the aggregate must describe only the kept trials) and by the demo writer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from services.core.models import Trial, TrialStatus


def eval_key(agent: str | None, model: str | None, source: str | None) -> str:
    agent = agent or "agent"
    dataset = source or "adhoc"
    return f"{agent}__{model}__{dataset}" if model else f"{agent}__{dataset}"


def job_stats(trials: Iterable[Trial], n_total_trials: int | None = None) -> dict[str, Any]:
    n_completed = n_errored = n_cancelled = n_running = 0
    evals: dict[str, dict[str, Any]] = {}
    rewards_for: dict[str, list[float]] = defaultdict(list)
    tokens = {"n_input_tokens": None, "n_cache_tokens": None, "n_output_tokens": None}
    cost: float | None = None
    for t in trials:
        if t.copy_of is not None:
            continue
        if t.status == TrialStatus.running:
            n_running += 1
            continue
        n_completed += 1
        key = eval_key(t.agent_name, t.model_name, t.source)
        ev = evals.setdefault(
            key,
            {"n_trials": 0, "n_errors": 0, "metrics": [], "pass_at_k": {}, "reward_stats": {},
             "exception_stats": {}},
        )
        if t.rewards:
            ev["n_trials"] += 1
            for rk, rv in t.rewards.items():
                ev["reward_stats"].setdefault(rk, {}).setdefault(str(rv), []).append(t.trial_name)
            if t.reward is not None:
                rewards_for[key].append(t.reward)
        if t.exception_type:
            ev["exception_stats"].setdefault(t.exception_type, []).append(t.trial_name)
            ev["n_errors"] += 1
            n_errored += 1
            if t.exception_type == "CancelledError":
                n_cancelled += 1
        for name in tokens:
            v = getattr(t, name)
            if v is not None:
                tokens[name] = (tokens[name] or 0) + v
        if t.cost_usd is not None:
            cost = (cost or 0.0) + t.cost_usd
    for key, ev in evals.items():
        vals = rewards_for.get(key, [])
        ev["metrics"] = [{"mean": (sum(vals) / len(vals)) if vals else 0.0}]
    stats: dict[str, Any] = {
        "n_completed_trials": n_completed,
        "n_errored_trials": n_errored,
        "n_running_trials": n_running,
        "n_pending_trials": max((n_total_trials or 0) - n_completed - n_running, 0),
        "n_cancelled_trials": n_cancelled,
        "n_retries": 0,
        "evals": evals,
        **tokens,
        "cost_usd": cost,
    }
    return stats
