"""What the monitor shows for one experiment: samples over time, the reading of the latest
poll, the pass rate's confidence interval and the alignment against a baseline."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field

from services.core.baselines import Baseline
from services.core.models import State
from services.core.times import iso_z

COUNT_STATES: tuple[str, ...] = ("pending", "dispatched", "running", "valid", "errored")


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    pending: int
    dispatched: int
    running: int
    valid: int
    errored: int
    invalid_errors: int
    finished: int
    pass_rate: float | None
    tokens: int
    cost_usd: float | None

    def count(self, state: str) -> int:
        return int(getattr(self, state))


class RunningTrial(BaseModel):
    trial_name: str
    task_name: str
    path: str
    running_s: float
    idle_s: float
    dispatched: bool
    activity: str = ""


class Reading(BaseModel):
    """What the monitor shows for one experiment after one poll."""

    key: str
    id: str
    at: datetime
    state: State
    counts: dict[str, int]
    finished: int
    expected: int | None
    invalid_errors: int
    pass_rate: float | None
    pass_rate_ci: tuple[float, float] | None
    mean_reward_valid: float | None
    throughput_per_min: float | None
    eta_s: float | None
    tokens: int
    cost_usd: float | None
    inference_timeout_s: float
    alignment: Alignment | None = None
    running: list[RunningTrial] = Field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "type": "snapshot",
            "id": self.id,
            "at": iso_z(self.at),
            "state": self.state.value,
            "counts": dict(self.counts),
            "finished": self.finished,
            "expected": self.expected,
            "pass_rate": _round(self.pass_rate),
            "pass_rate_ci": [_round(v) for v in self.pass_rate_ci] if self.pass_rate_ci else None,
            "expected_pass_rate": _round(self.alignment.expected) if self.alignment else None,
            "eta_s": _round(self.eta_s, 1),
            "throughput_per_min": _round(self.throughput_per_min, 3),
            "tokens": self.tokens,
            "cost_usd": _round(self.cost_usd, 4),
        }


def _round(v: float | None, nd: int = 4) -> float | None:
    return None if v is None else round(v, nd)


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


class TaskGap(BaseModel):
    task: str
    expected: float
    actual: float
    attempts: int


class Alignment(BaseModel):
    """Actual vs expected, on the attempts that have finished."""

    baseline: str
    expected: float = Field(description="expected rate over the compared attempts")
    actual: float
    compared: int = Field(description="finished attempts compared")
    expected_overall: float | None = None
    gaps: list[TaskGap] = Field(default_factory=list, description="tasks furthest below expectation")


def align(
    baseline: Baseline, by_task: Mapping[str, list[float]], successes: float, finished: int
) -> Alignment | None:
    if baseline.tasks:
        exp_sum = act_sum = 0.0
        n = 0
        gaps: list[TaskGap] = []
        for task, outcomes in by_task.items():
            want = baseline.tasks.get(task)
            if want is None:
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
            gaps=gaps[:10],
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
