"""Leaderboard rows as evaldesk reads them (`JobRow`, the `LeaderboardView` of one read).

Several rows per (model × benchmark) are normal — reruns, resumes, sibling model ids, other
users' rows — and every one is kept and shown. Which of them is a run's is decided in one
place, `services.leaderboard.match`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from services.core.policy import HASH_BENCHMARK_RE, NUMERIC_MODEL_RE

FINISHED = "Finished"
# a row in one of these states puts a score (or the promise of one) on the leaderboard
REGISTERED = (FINISHED, "Pending", "Started")
JOB_FIELDS = ("id", "username", "model_id", "benchmark_id", "status", "score", "n_trials", "n_errors", "trace_url",
              "job_name", "created_at", "updated_at")


class JobRow(BaseModel):
    """One row of the jobs table (`sandbox_jobs`), with its model and benchmark names resolved."""

    id: str
    username: str | None = None
    model_id: str | None = None
    benchmark_id: str | None = None
    status: str | None = None
    score: float | None = None
    n_trials: int | None = None
    n_errors: int | None = None
    trace_url: str | None = None
    job_name: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    model_name: str | None = Field(None, description="models.name of model_id")
    benchmark_name: str | None = Field(None, description="benchmarks.name of benchmark_id")

    def brief(self) -> str:
        when = f"{self.created_at:%Y-%m-%d %H:%M}" if self.created_at else "?"
        score = "-" if self.score is None else f"{self.score:.3f}"
        return (f"{self.id[:8]} {self.username or '?'} {self.status or '?'} score {score} created {when} "
                f"model {self.model_name or self.model_id} benchmark {self.benchmark_name or self.benchmark_id}"
                + (f" job {self.job_name}" if self.job_name else ""))

    def db(self) -> dict[str, Any]:
        """The row as the table holds it (for re-inserting exactly what was deleted)."""
        return self.model_dump(mode="json", include=set(JOB_FIELDS))


class TraceStatus(BaseModel):
    repo_id: str
    exists: bool | None = None
    n_files: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return bool(self.exists) and bool(self.n_files)


class LeaderboardView(BaseModel):
    """What one read of the leaderboard (and the trace datasets it links) saw."""

    fetched_at: datetime | None = None
    error: str | None = Field(None, description="why the last read failed: the data below is stale")
    jobs: list[JobRow] = Field(default_factory=list)
    models: dict[str, str] = Field(default_factory=dict, description="id → name")
    benchmarks: dict[str, str] = Field(default_factory=dict)
    traces: dict[str, TraceStatus] = Field(default_factory=dict, description="dataset id → status")
    usernames: list[str] = Field(default_factory=list)


def job_rows(raw: list[dict[str, Any]], models: dict[str, str], benchmarks: dict[str, str]) -> list[JobRow]:
    out = []
    for r in raw:
        row = JobRow.model_validate({k: r.get(k) for k in JOB_FIELDS})
        row.model_name = models.get(row.model_id or "")
        row.benchmark_name = benchmarks.get(row.benchmark_id or "")
        out.append(row)
    return out


def is_bogus_model(name: str | None) -> bool:
    return bool(name) and bool(NUMERIC_MODEL_RE.fullmatch((name or "").rsplit("/", 1)[-1]))


def is_hash_benchmark(name: str | None) -> bool:
    return bool(name) and bool(HASH_BENCHMARK_RE.fullmatch(name or ""))


def repo_id_from_url(url: str | None) -> str | None:
    """`https://host/datasets/org/name[/…]`, `hf://datasets/org/name` or `org/name` → `org/name`."""
    if not url:
        return None
    text = url.strip()
    for marker in ("/datasets/", "hf://datasets/"):
        if marker in text:
            tail = text.split(marker, 1)[1]
            parts = [p for p in tail.split("/") if p]
            return "/".join(parts[:2]) if len(parts) >= 2 else None
    parts = [p for p in text.split("/") if p]
    if "://" not in text and len(parts) == 2:
        return text
    return None
