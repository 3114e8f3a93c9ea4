"""Leaderboard rows as evaldesk reads them, and which of them belong to an experiment.

An experiment is matched to its rows by (model × benchmark), job name and created_at. Several
rows per pair are normal — reruns, resumes, sibling model ids, other users' rows — and every
one is kept and shown; the run's own row is the one whose `job_name` is the run's, else the
single row of the pair created after the run started. When that is not one row, the match
says why, and nothing is written on a guess.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from services.core.models import Experiment
from services.core.policy import HASH_BENCHMARK_RE, NUMERIC_MODEL_RE
from services.core.times import as_utc

FINISHED = "Finished"
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


class RunNames(BaseModel):
    """The names a run should be registered under, and the raw ones it may have been."""

    model: str | None = Field(description="the real model name (model_hf_name, else the model without provider)")
    benchmark: str | None = Field(description="the real benchmark name (the run dir's when the name is a hash)")
    raw_model: str | None = Field(description="the model name as the run reported it, bare")
    raw_benchmark: str | None


def _strip_provider(model: str) -> str:
    # litellm-style "hosted_vllm/org/name": the provider is not part of the model's name
    parts = model.split("/")
    return "/".join(parts[1:]) if len(parts) >= 3 else model


def run_names(exp: Experiment) -> RunNames:
    raw_model = exp.model.rsplit("/", 1)[-1] if exp.model else None
    model: str | None
    if exp.model_hf_name:
        model = exp.model_hf_name
    elif exp.model and not NUMERIC_MODEL_RE.fullmatch(raw_model or ""):
        model = _strip_provider(exp.model)
    else:
        model = None
    bench = exp.benchmark
    real_bench = exp.benchmark_from_dir if bench and HASH_BENCHMARK_RE.fullmatch(bench) else bench
    return RunNames(model=model, benchmark=real_bench, raw_model=raw_model, raw_benchmark=bench)


def is_bogus_model(name: str | None) -> bool:
    return bool(name) and bool(NUMERIC_MODEL_RE.fullmatch((name or "").rsplit("/", 1)[-1]))


def is_hash_benchmark(name: str | None) -> bool:
    return bool(name) and bool(HASH_BENCHMARK_RE.fullmatch(name or ""))


class RunMatch(BaseModel):
    names: RunNames
    run_rows: list[JobRow] = Field(default_factory=list, description="the rows of this run")
    pair_rows: list[JobRow] = Field(default_factory=list, description="every row of the pair, every user")
    how: Literal["job_name", "created_at", "none"] = "none"
    ambiguous: str | None = Field(None, description="why the run's row cannot be told apart")

    def own(self, usernames: list[str]) -> list[JobRow]:
        return [r for r in self.run_rows if r.username in usernames]

    @property
    def row(self) -> JobRow | None:
        """The run's one row, when there is exactly one and it is not ambiguous."""
        return self.run_rows[0] if len(self.run_rows) == 1 and not self.ambiguous else None

    def shown(self) -> list[JobRow]:
        seen: dict[str, JobRow] = {r.id: r for r in self.pair_rows}
        for r in self.run_rows:
            seen.setdefault(r.id, r)
        return sorted(seen.values(), key=lambda r: (r.created_at is None, r.created_at), reverse=True)


# a row created a little before the run's recorded start is still the run's (clock skew, a
# harvest that registers at launch)
START_SLACK = timedelta(hours=1)


def match(exp: Experiment, jobs: list[JobRow], models: dict[str, str], benchmarks: dict[str, str]) -> RunMatch:
    names = run_names(exp)
    model_names = {n for n in (names.model, names.raw_model) if n}
    if exp.model:
        model_names.add(exp.model)
    bench_names = {n for n in (names.benchmark, names.raw_benchmark) if n}
    model_ids = {i for i, n in models.items() if n in model_names}
    bench_ids = {i for i, n in benchmarks.items() if n in bench_names}
    pair = [r for r in jobs if r.model_id in model_ids and r.benchmark_id in bench_ids]
    by_name = [r for r in jobs if r.job_name and r.job_name == exp.id]
    pair_ids = {r.id for r in pair}
    pair += [r for r in by_name if r.id not in pair_ids]
    if by_name:
        m = RunMatch(names=names, run_rows=by_name, pair_rows=pair, how="job_name")
        if len(by_name) > 1:
            m.ambiguous = f"{len(by_name)} rows carry this run's job name: " + "; ".join(r.brief() for r in by_name)
        return m
    start = as_utc(exp.started_at)
    candidates = [r for r in pair if not r.job_name and r.created_at is not None
                  and (start is None or as_utc(r.created_at) >= start - START_SLACK)]  # type: ignore[operator]
    if len(candidates) == 1:
        return RunMatch(names=names, run_rows=candidates, pair_rows=pair, how="created_at")
    if len(candidates) > 1:
        return RunMatch(names=names, run_rows=candidates, pair_rows=pair, how="created_at",
                        ambiguous=f"{len(candidates)} rows without a job name were created after the run started: "
                        + "; ".join(r.brief() for r in candidates))
    return RunMatch(names=names, pair_rows=pair)


def view_match(exp: Experiment, view: LeaderboardView) -> RunMatch:
    return match(exp, view.jobs, view.models, view.benchmarks)


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
