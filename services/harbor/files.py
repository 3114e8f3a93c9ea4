"""Lenient mirrors of a Harbor job's own files (0.1.x – 0.26): its config.json and its aggregate
result.json. Unknown fields are ignored and nearly everything is optional, so a file from any
Harbor version — or one written by hand — still yields what can be read from it. A trial's
files are read by services/harbor/parse.py.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

_LENIENT = ConfigDict(extra="ignore", populate_by_name=True)


class _Lenient(BaseModel):
    model_config = _LENIENT


class EvalStats(_Lenient):
    n_trials: int | None = None
    n_errors: int | None = None
    metrics: list[dict[str, Any]] = Field(default_factory=list)
    exception_stats: dict[str, list[str]] = Field(default_factory=dict)

    @property
    def mean(self) -> float | None:
        for m in self.metrics:
            v = m.get("mean") if isinstance(m, dict) else None
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                return float(v)
        return None


class JobStats(_Lenient):
    n_completed_trials: int | None = None
    n_errored_trials: int | None = None
    n_running_trials: int | None = None
    n_pending_trials: int | None = None
    n_cancelled_trials: int | None = None
    n_retries: int | None = None
    # 0.1.x wrote these at the top of stats
    n_trials: int | None = None
    n_errors: int | None = None
    evals: dict[str, EvalStats] = Field(default_factory=dict)
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


class JobResultFile(_Lenient):
    id: str | None = None
    started_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    n_total_trials: int | None = None
    stats: JobStats = Field(default_factory=JobStats)

    @field_validator("id", mode="before")
    @classmethod
    def _any_id(cls, v: Any) -> Any:
        return None if v is None else str(v)


class AgentConfig(_Lenient):
    name: str | None = None
    import_path: str | None = None
    model_name: str | None = None
    override_timeout_sec: float | None = None
    max_timeout_sec: float | None = None


class DatasetConfig(_Lenient):
    path: str | None = None
    name: str | None = None
    version: str | None = None


class JobConfigFile(_Lenient):
    job_name: str | None = None
    n_attempts: int | None = None
    timeout_multiplier: float | None = None
    agents: list[AgentConfig] = Field(default_factory=list)
    datasets: list[DatasetConfig] = Field(default_factory=list)
    # where a site records the scheduler job and the real model name
    slurm_job_id: str | int | None = None
    model_hf_name: str | None = None
