"""One pass over an experiment's trials that yields every figure the audit needs.

The audit of a 100k-trial job must not walk the trials once per check; assemble takes the
census while it builds the Experiment, and the audit re-takes it only over the attempts
dedupe would keep.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from services.harbor_files import NO_REWARD_NOR_EXCEPTION
from services.models import Trial, TrialCounts, TrialStatus
from services.policy import Policy

_INFRA = ("sandbox_failed", "model_provider_failed")


def is_invalid_error(t: Trial, policy: Policy) -> bool:
    """The error gate's numerator (DESIGN 3a)."""
    if t.status == TrialStatus.running:
        return False
    if t.parse_error and t.exception_type is None:
        return True
    if t.exception_type is not None:
        return not policy.is_benign(t.exception_type)
    return t.reward is None


def invalid_kind(t: Trial) -> str:
    if t.exception_type:
        return t.exception_type
    if t.parse_error and t.parse_error != NO_REWARD_NOR_EXCEPTION:
        return "unreadable result.json"
    return "no reward"


@dataclass
class Census:
    counts: TrialCounts = field(default_factory=TrialCounts)
    per_task: Counter[str] = field(default_factory=Counter)
    invalid_kinds: Counter[str] = field(default_factory=Counter)
    no_verifier: int = 0  # no reward because the verifier never ran
    infra: Counter[str] = field(default_factory=Counter)  # no reward, failure uncorrelated with solvability
    timeout_scored: int = 0  # AgentTimeoutError with a reward: a valid 0
    reward_sum: float = 0.0
    n_input_tokens: int = 0
    n_output_tokens: int = 0
    cost_usd: float = 0.0
    benign: frozenset[str] = frozenset()  # the policy it was taken under
    models: Counter[str] = field(default_factory=Counter)  # model names the trials report
    sources: Counter[str] = field(default_factory=Counter)  # Harbor dataset names of the trials


def take_census(trials: Iterable[Trial], policy: Policy) -> Census:
    # Plain locals, not attribute updates: at 100k trials pydantic's __setattr__ on the
    # counts model alone costs more than the rest of the pass.
    benign = frozenset(policy.benign_exceptions)
    cen = Census(benign=benign)
    per_task = cen.per_task
    copies = running = total = valid = errored = invalid_errors = 0
    n_in = n_out = 0
    cost = reward_sum = 0.0
    no_verifier = timeout_scored = 0
    for t in trials:
        if t.copy_of is not None:
            copies += 1
            continue
        per_task[t.task_name] += 1
        if t.model_name:
            cen.models[t.model_name] += 1
        if t.source:
            cen.sources[t.source] += 1
        if t.n_input_tokens:
            n_in += t.n_input_tokens
        if t.n_output_tokens:
            n_out += t.n_output_tokens
        if t.cost_usd:
            cost += t.cost_usd
        status = t.status
        if status == TrialStatus.running:
            running += 1
            continue
        total += 1
        exc = t.exception_type
        reward = t.reward
        if status == TrialStatus.valid:
            valid += 1
        else:
            errored += 1
        if reward is not None:
            reward_sum += reward
            if exc == "AgentTimeoutError":
                timeout_scored += 1
        else:
            fc = t.failure_class
            if fc == "verifier_failed" or exc == "AgentTimeoutError":
                no_verifier += 1
            elif fc in _INFRA:
                cen.infra[exc or "?"] += 1
        invalid = (exc not in benign) if exc is not None else (bool(t.parse_error) or reward is None)
        if invalid:
            invalid_errors += 1
            cen.invalid_kinds[invalid_kind(t)] += 1
    cen.counts = TrialCounts(
        total=total, valid=valid, errored=errored, running=running, invalid_errors=invalid_errors,
        copies=copies, max_attempts_per_task=max(per_task.values(), default=0),
    )
    cen.n_input_tokens, cen.n_output_tokens, cen.cost_usd = n_in, n_out, cost
    cen.reward_sum, cen.no_verifier, cen.timeout_scored = reward_sum, no_verifier, timeout_scored
    return cen
