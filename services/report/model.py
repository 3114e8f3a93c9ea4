"""What a report says, as data: the JSON output is this model, and the HTML page renders it.

One `RunReport` per experiment (any backend: it reads only the common Experiment model and
its audit); a `Comparison` when the runs share a benchmark (two models, or two attempts of
one), with per-task deltas.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from services.audit.alignment import AlignmentResult
from services.core.models import Check

# a pass is full marks: partial rewards (0 < r < 1) are shown apart, so the ring never calls
# a 0.33 a pass
PASS_REWARD = 1.0
HIST_BINS = 10


class Kpis(BaseModel):
    """The cards at the top: every figure comes from the audit when the audit has it."""

    score: float | None = Field(description="the run's own score (the audit's)")
    valid: int
    expected: int | None
    valid_fraction: float | None
    error_fraction: float | None = Field(description="the audit's error-gate figure")
    finished: int = Field(description="finished attempts")
    running: int
    errored: int = Field(0, description="finished attempts without a valid reward")
    invalid_errors: int = Field(0, description="what the error gate counts (DESIGN 3a), on disk")
    tokens: int | None = Field(description="input + output tokens")
    n_input_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None
    duration_s: float | None = Field(description="first start to finish (or to now while running)")


class Ring(BaseModel):
    """Attempts by outcome; the centre reads passed / finished."""

    passed: int = 0
    partial: int = 0
    failed: int = 0
    errored: int = 0
    running: int = 0

    @property
    def finished(self) -> int:
        return self.passed + self.partial + self.failed + self.errored

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.finished if self.finished else None


class Histogram(BaseModel):
    """Rewards of valid attempts in equal bins over [0, 1] (the last bin holds 1.0)."""

    edges: list[float]
    counts: list[int]
    outside: int = Field(0, description="rewards below 0 or above 1 (clipped into the end bins)")


class ExceptionExample(BaseModel):
    task: str
    trial: str
    path: str
    message: str | None = None


class ExceptionGroup(BaseModel):
    exception: str = Field(description="exception type, or 'no reward' / 'unreadable result'")
    count: int
    failure_class: str | None = None
    benign: bool = Field(False, description="a benign type: not an invalid error for the error gate")
    example: ExceptionExample


class TaskRow(BaseModel):
    task: str
    attempts: int
    valid: int
    errored: int
    running: int
    passed: int
    mean_reward: float | None = Field(description="mean reward of the valid attempts")
    outcome: float | None = Field(description="mean over finished attempts with errors as 0 (what compares)")
    exceptions: list[str] = Field(default_factory=list)
    mean_duration_s: float | None = None
    tokens: int | None = None
    cost_usd: float | None = None


class AuditSummary(BaseModel):
    verdict: str
    needs_action: bool
    checks: list[Check]
    notes: list[str] = Field(default_factory=list)
    reason: str = ""
    ask: str | None = None


class RunReport(BaseModel):
    id: str
    source: str
    source_label: str
    path: str
    benchmark: str | None
    model: str | None
    state: str
    state_raw: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    kpis: Kpis
    ring: Ring
    histogram: Histogram
    exceptions: list[ExceptionGroup]
    audit: AuditSummary
    alignment: AlignmentResult | None = None
    tasks: list[TaskRow]
    problems: list[str] = Field(default_factory=list)


class TaskDelta(BaseModel):
    task: str
    outcomes: list[float | None] = Field(description="per run, in the order of `runs`")
    delta: float | None = Field(description="last run − first run")


class Comparison(BaseModel):
    benchmark: str
    runs: list[str] = Field(description="experiment ids, in order")
    score_delta: float | None = None
    pass_rate_delta: float | None = None
    tasks: list[TaskDelta] = Field(default_factory=list, description="largest change first")
    only_in: dict[str, list[str]] = Field(default_factory=dict, description="tasks one run has and another lacks")


class Report(BaseModel):
    """The whole report: what `--batch report --format json` prints and the HTML page shows."""

    schema_version: int = 1
    generated_at: datetime
    title: str
    runs: list[RunReport]
    comparison: Comparison | None = None
    notes: list[str] = Field(default_factory=list)
