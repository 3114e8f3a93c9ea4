"""A run's whole life, rebuilt from its trials' own times.

Every trial records when it started and finished, so the counts by state and the pass rate at
any moment since the job began can be recomputed when the monitor first opens — the plots show
the run's history at once instead of filling from the first poll. Idle ("dispatched") trials
cannot be told from running ones after the fact; the rebuilt samples count them as running.
"""

from __future__ import annotations

import bisect
from datetime import datetime

from services.core.models import Experiment, TrialStatus
from services.core.policy import Policy
from services.core.times import as_utc
from services.monitor.figures import Sample


def _ts(dt: datetime | None) -> float | None:
    u = as_utc(dt)
    return u.timestamp() if u is not None else None


def history(exp: Experiment, now: datetime, policy: Policy | None = None, points: int = 120) -> list[Sample]:
    """Samples from the first trial's start to `now` (or the last finish of a finished job)."""
    policy = policy or Policy()
    starts: list[float] = []
    # (finished at, share of a pass, valid, invalid error)
    ends: list[tuple[float, float, bool, bool]] = []
    for t in exp.trials:
        if t.copy_of is not None:
            continue
        s = _ts(t.started_at)
        f = _ts(t.finished_at)
        if s is None and f is None:
            continue
        starts.append(s if s is not None else f)  # type: ignore[arg-type]
        if t.status != TrialStatus.running and f is not None:
            outcome = 0.0 if t.reward is None else min(max(t.reward, 0.0), 1.0)
            valid = t.status == TrialStatus.valid
            invalid = not valid and not policy.is_benign(t.exception_type)
            ends.append((f, outcome, valid, invalid))
    if not starts:
        return []
    starts.sort()
    ends.sort()
    first = starts[0]
    last = _ts(now) or first
    if ends and exp.finished_at is not None:
        last = max(ends[-1][0], starts[-1])
    if last <= first:
        last = first + 1.0
    # cumulative figures at each finish, so each sample is a bisect away
    end_times = [e[0] for e in ends]
    cum_pass, cum_valid, cum_invalid = [0.0], [0], [0]
    for _, outcome, valid, invalid in ends:
        cum_pass.append(cum_pass[-1] + outcome)
        cum_valid.append(cum_valid[-1] + int(valid))
        cum_invalid.append(cum_invalid[-1] + int(invalid))
    expected = exp.counts.expected or 0
    out: list[Sample] = []
    n = max(2, points)
    for k in range(n):
        at = first + (last - first) * k / (n - 1)
        started = bisect.bisect_right(starts, at)
        done = bisect.bisect_right(end_times, at)
        running = max(0, started - done)
        n_valid = cum_valid[done]
        out.append(Sample(
            at=at,
            pending=max(0, expected - started) if expected else 0,
            dispatched=0,
            running=running,
            valid=n_valid,
            errored=done - n_valid,
            invalid_errors=cum_invalid[done],
            finished=done,
            pass_rate=cum_pass[done] / done if done else None,
            tokens=0,
            cost_usd=None,
        ))
    return out


def joined(past: list[Sample], live: list[Sample]) -> list[Sample]:
    """The rebuilt history up to the first live sample, then what the polls saw."""
    if not live:
        return past
    cut = live[0].at
    return [s for s in past if s.at < cut] + live
