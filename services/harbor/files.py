"""Lenient mirrors of the JSON files Harbor (0.1.x – 0.26) writes into a job dir.

Unknown fields are ignored and nearly everything is optional, so a file from any Harbor
version — or one written by hand — still yields what can be read from it. `parse_trial`
turns one trial's files into a `Trial`; it never raises on bad content.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.core.failures import NO_REWARD_NOR_EXCEPTION, failure_class
from services.core.models import Trial, TrialStatus
from services.harbor.fast_record import task_from_trial_name

_LENIENT = ConfigDict(extra="ignore", populate_by_name=True)


class _Lenient(BaseModel):
    model_config = _LENIENT


class ModelInfo(_Lenient):
    name: str | None = None
    provider: str | None = None


class AgentInfo(_Lenient):
    name: str | None = None
    version: str | None = None
    model_info: ModelInfo | None = None


class AgentResult(_Lenient):
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


class VerifierResult(_Lenient):
    rewards: dict[str, Any] | None = None


class ExceptionInfo(_Lenient):
    exception_type: str | None = None
    exception_message: str | None = None
    exception_traceback: str | None = None
    occurred_at: datetime | None = None


class TimingInfo(_Lenient):
    started_at: datetime | None = None
    finished_at: datetime | None = None


class StepResult(_Lenient):
    step_name: str | None = None
    agent_result: AgentResult | None = None
    verifier_result: VerifierResult | None = None
    exception_info: ExceptionInfo | None = None


class TrialResultFile(_Lenient):
    schema_version: int | None = None
    id: str | None = None
    task_name: str | None = None
    trial_name: str | None = None
    trial_uri: str | None = None
    source: str | None = None
    agent_info: AgentInfo | None = None
    agent_result: AgentResult | None = None
    verifier_result: VerifierResult | None = None
    exception_info: ExceptionInfo | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    agent_execution: TimingInfo | None = None
    step_results: list[StepResult] | None = None
    reward_valid: bool | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _any_id(cls, v: Any) -> Any:
        return None if v is None else str(v)


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


class TaskRef(_Lenient):
    path: str | None = None
    name: str | None = None
    source: str | None = None


class TrialConfigFile(_Lenient):
    trial_name: str | None = None
    task: TaskRef | None = None
    agent: AgentConfig | None = None




# pydantic keeps a set of the explicitly set field names on every instance: ~2.2 KB per
# trial, half of a 100k-trial job's memory. Every scanned trial sets them all, so one shared
# set of all names says the same (model_copy copies it before changing it).
_ALL_TRIAL_FIELDS: set[str] = set(Trial.model_fields)


def _compact(trial: Trial) -> Trial:
    object.__setattr__(trial, "__pydantic_fields_set__", _ALL_TRIAL_FIELDS)
    return trial


def load_json(data: bytes) -> Any:
    return orjson.loads(data)


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def task_from_config(cfg: TrialConfigFile | None) -> str | None:
    if cfg is None or cfg.task is None:
        return None
    if cfg.task.name:
        return cfg.task.name.rsplit("/", 1)[-1]
    if cfg.task.path:
        return cfg.task.path.rstrip("/").rsplit("/", 1)[-1] or None
    return None


def parse_trial(
    rel_path: str,
    dir_name: str,
    result_bytes: bytes | None,
    config_bytes: bytes | None,
    mtime: float | None,
    result_error: str | None = None,
) -> Trial:
    """Build a Trial from the raw bytes of its files; bad content becomes an ERRORED trial."""
    cfg: TrialConfigFile | None = None
    if config_bytes:
        try:
            raw_cfg = load_json(config_bytes)
            if isinstance(raw_cfg, dict):
                cfg = TrialConfigFile.model_validate(raw_cfg)
        except (orjson.JSONDecodeError, ValidationError):
            cfg = None
    trial_name = (cfg.trial_name if cfg and cfg.trial_name else None) or dir_name
    task_name = task_from_config(cfg) or task_from_trial_name(trial_name)
    model_name = cfg.agent.model_name if cfg and cfg.agent else None

    if result_bytes is None and result_error is None:
        return _compact(Trial(
            trial_name=trial_name,
            task_name=task_name,
            path=rel_path,
            status=TrialStatus.running,
            mtime=mtime,
            model_name=model_name,
            agent_name=cfg.agent.name if cfg and cfg.agent else None,
        ))

    def errored(reason: str) -> Trial:
        return _compact(Trial(
            trial_name=trial_name,
            task_name=task_name,
            path=rel_path,
            status=TrialStatus.errored,
            parse_error=reason,
            mtime=mtime,
            model_name=model_name,
        ))

    if result_error is not None:
        return errored(result_error)
    assert result_bytes is not None
    if not result_bytes.strip():
        return errored("result.json is empty")
    try:
        raw = load_json(result_bytes)
    except orjson.JSONDecodeError as exc:
        return errored(f"result.json is not valid JSON (half-written?): {exc}")
    if not isinstance(raw, dict):
        return errored(f"result.json holds a JSON {type(raw).__name__}, not an object")
    field_problem: str | None = None
    try:
        res = TrialResultFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        field_problem = f"result.json field {where!r}: {first.get('msg')}"
        # A malformed side field (a timestamp, a token count) must not hide a finite reward:
        # validity is decided by the reward alone, so drop the bad fields and read the rest.
        bad = {e["loc"][0] for e in exc.errors() if e.get("loc")}
        try:
            res = TrialResultFile.model_validate({k: v for k, v in raw.items() if k not in bad})
        except ValidationError:
            return errored(field_problem)

    rewards: dict[str, float] = {}
    raw_rewards = res.verifier_result.rewards if res.verifier_result else None
    if not raw_rewards and res.step_results:
        for step in res.step_results:
            if step.verifier_result and step.verifier_result.rewards:
                raw_rewards = step.verifier_result.rewards
    for key, value in (raw_rewards or {}).items():
        f = _finite(value)
        if f is not None:
            rewards[str(key)] = f
    reward = rewards.get("reward")
    # A lone reward under another key counts, but a present, non-numeric "reward" never does.
    if reward is None and len(rewards) == 1 and "reward" not in (raw_rewards or {}):
        reward = next(iter(rewards.values()))

    exc_info = res.exception_info
    if exc_info is None and res.step_results:
        exc_info = next((s.exception_info for s in res.step_results if s.exception_info), None)
    exc_type = exc_info.exception_type if exc_info else None

    ar = res.agent_result
    if ar is None and res.step_results:
        ar = next((s.agent_result for s in res.step_results if s.agent_result), None)
    model = None
    if res.agent_info and res.agent_info.model_info:
        model = res.agent_info.model_info.name
    trial_name = res.trial_name or trial_name
    return _compact(Trial(
        trial_name=trial_name,
        task_name=res.task_name or task_name,
        path=rel_path,
        status=TrialStatus.valid if reward is not None else TrialStatus.errored,
        reward=reward,
        rewards=rewards,
        exception_type=exc_type,
        exception_message=(exc_info.exception_message if exc_info else None),
        failure_class=failure_class(exc_type),
        started_at=res.started_at,
        finished_at=res.finished_at,
        n_input_tokens=ar.n_input_tokens if ar else None,
        n_cache_tokens=ar.n_cache_tokens if ar else None,
        n_output_tokens=ar.n_output_tokens if ar else None,
        cost_usd=ar.cost_usd if ar else None,
        model_name=model or model_name,
        agent_name=res.agent_info.name if res.agent_info else None,
        source=res.source,
        mtime=mtime,
        parse_error=None if reward is not None or exc_type
        else field_problem or NO_REWARD_NOR_EXCEPTION,
    ))
