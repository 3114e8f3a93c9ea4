"""Actual vs expected: how a run compares with its baseline (services.core.baselines).

One computation for the live monitor (rule c, on the attempts finished so far) and the audit's
`alignment` check (on the finished run): the pass rate with its confidence interval, the
expected rate over the same attempts, the tasks furthest below expectation, and the config
fields that differ from the ones the baseline was obtained with.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from services.core.baselines import Baseline, ConfigValue
from services.core.models import Trial, TrialStatus

# the order drift is listed in: the fields the runbook cross-checks first, then the rest by name
DRIFT_ORDER: tuple[str, ...] = (
    "model", "image", "split", "temperature", "top_p", "thinking", "max_tokens",
    "agent_timeout_s", "verifier_timeout_s", "timeout_multiplier",
)


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval; fractional successes (partial rewards) are accepted."""
    if n <= 0:
        return None
    p = min(max(successes / n, 0.0), 1.0)
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def outcome(t: Trial) -> float:
    """A finished attempt's share of a pass: errors count as 0, like on the leaderboard."""
    if t.reward is None:
        return 0.0
    return min(max(t.reward, 0.0), 1.0)


def outcomes_by_task(trials: Iterable[Trial]) -> dict[str, list[float]]:
    """Finished attempts (copies and running ones left out) by task, as outcomes."""
    by_task: dict[str, list[float]] = {}
    for t in trials:
        if t.copy_of is not None or t.status == TrialStatus.running:
            continue
        by_task.setdefault(t.task_name, []).append(outcome(t))
    return by_task


@dataclass(kw_only=True)
class TaskGap:
    task: str
    expected: float
    actual: float
    attempts: int


@dataclass(kw_only=True)
class Alignment:
    """Actual vs expected, on the attempts that have finished."""

    baseline: str
    expected: float = field(metadata={"description": "expected rate over the compared attempts"})
    actual: float
    compared: int = field(metadata={"description": "finished attempts compared"})
    expected_overall: float | None = None
    gaps: list[TaskGap] = field(default_factory=list, metadata={"description": "tasks furthest below expectation"})

    @property
    def ci(self) -> tuple[float, float] | None:
        """95% Wilson interval of the actual rate over the compared attempts."""
        return wilson_interval(self.actual * self.compared, self.compared)


def align(
    baseline: Baseline, by_task: Mapping[str, list[float]], successes: float, finished: int,
    top: int = 10,
) -> Alignment | None:
    if baseline.tasks:
        exp_sum = act_sum = 0.0
        n = 0
        gaps: list[TaskGap] = []
        for task, outcomes in by_task.items():
            want = baseline.tasks.get(task)
            if want is None or not outcomes:
                continue
            exp_sum += want * len(outcomes)
            act_sum += sum(outcomes)
            n += len(outcomes)
            mean = sum(outcomes) / len(outcomes)
            if mean < want:
                gaps.append(TaskGap(task=task, expected=want, actual=mean, attempts=len(outcomes)))
        if n == 0:
            return None
        gaps.sort(key=lambda g: (g.actual - g.expected, g.task))
        return Alignment(
            baseline=baseline.name,
            expected=exp_sum / n,
            actual=act_sum / n,
            compared=n,
            expected_overall=baseline.aggregate,
            gaps=gaps[:top],
        )
    if baseline.pass_rate is None or finished == 0:
        return None
    return Alignment(
        baseline=baseline.name,
        expected=baseline.pass_rate,
        actual=successes / finished,
        compared=finished,
        expected_overall=baseline.pass_rate,
    )


def align_trials(baseline: Baseline, trials: Iterable[Trial], top: int = 10) -> Alignment | None:
    """`align` over a run's finished attempts."""
    by_task = outcomes_by_task(trials)
    finished = sum(len(v) for v in by_task.values())
    successes = sum(sum(v) for v in by_task.values())
    return align(baseline, by_task, successes, finished, top)


@dataclass(kw_only=True)
class Drift:
    """One config field compared: what the baseline was obtained with, what the run used."""

    field: str
    expected: ConfigValue
    actual: ConfigValue
    known: bool = True  # False when the run does not record this field

    @property
    def differs(self) -> bool:
        return self.known and not _same(self.expected, self.actual)


def _same(a: ConfigValue, b: ConfigValue) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return _truth(a) == _truth(b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, str) and isinstance(b, str):
        return a.strip() == b.strip()
    try:  # "0.6" in one file, 0.6 in the other
        return math.isclose(float(a), float(b))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return a == b


def _truth(v: ConfigValue) -> bool | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on", "enabled")
    return bool(v)


def config_drift(expected: Mapping[str, ConfigValue], actual: Mapping[str, ConfigValue]) -> list[Drift]:
    """Every field the baseline names, compared with the run's, in `DRIFT_ORDER` then by name."""
    order = {f: i for i, f in enumerate(DRIFT_ORDER)}
    fields = sorted(expected, key=lambda f: (order.get(f, len(order)), f))
    return [Drift(field=f, expected=expected[f], actual=actual.get(f), known=actual.get(f) is not None)
            for f in fields]


def fmt_value(v: ConfigValue) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)
