"""What the monitor shows for one experiment: samples over time, the reading of the latest
poll, the pass rate's confidence interval and the alignment against a baseline."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field

from services.core.alignment import Alignment, TaskGap, align, wilson_interval
from services.core.models import State
from services.core.times import iso_z

# the alignment math lives in services.core.alignment (the audit uses it too); the monitor
# modules import it from here
__all__ = ["COUNT_STATES", "Alignment", "Reading", "RunningTrial", "Sample", "TaskGap", "align", "wilson_interval"]

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
    score: float | None = Field(None, description="the run's own score, as every other surface shows it")
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
            "valid": self.counts.get("valid", 0),
            "errored": self.counts.get("errored", 0),
            "invalid_errors": self.invalid_errors,
            "score": _round(self.score),
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
