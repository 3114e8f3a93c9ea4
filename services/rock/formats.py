"""What Rock writes, mirrored leniently (unknown fields ignored, nearly everything optional).

Two shapes:

1. `regression.py`'s local outputs, in the directory it was run from::

       results/<experiment-id>.json     the experiment: its settings and one record per task
       configs/<experiment-id>.json     the config snapshot (--save-config / --from-config JSON)
       logs/<experiment-id>/<task-id>.log

   A results file is ``{"experiment_id", "bench", "dataset", "split", "agent", "model",
   "status"?, "created_at", "updated_at", "finished_at"?, "tasks": [ {"task_id", "job_name",
   "status", "reward"|"score", "exception_type", "exception_message"|"error", "started_at",
   "finished_at", "sandbox_id", "n_input_tokens", "n_output_tokens", "cost_usd"} … ]}``;
   ``tasks`` may also be an object keyed by task id. Task statuses are regression.py's own
   words: pending, dispatched, running, completed, error/failed, cancelled, timeout.

2. The rl-rock CLI's run metadata: ``rock job run-list --output json`` (a list of RunMeta)
   and ``rock job run-status --run-id X --jobs --output json`` (RunMeta plus ``jobs``: a list
   of RunJobStatus). Run statuses running/completed/failed/partial; job statuses
   pending/running/completed/failed/cancelled/unknown (rl-rock 1.11, rock/sdk/job/meta.py).

Both are normalised here to evaldesk's vocabulary, keeping Rock's word beside it.
"""

from __future__ import annotations

import math
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from services.core.models import State, TrialStatus
from services.rock.find import results_files


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


# ---- regression.py -------------------------------------------------------------------------


class RegressionTask(_Lenient):
    task_id: str = Field(validation_alias=AliasChoices("task_id", "task", "task_name", "id"))
    job_name: str | None = None
    status: str = "unknown"
    reward: float | None = Field(None, validation_alias=AliasChoices("reward", "score"))
    exception_type: str | None = Field(None, validation_alias=AliasChoices("exception_type", "exception",
                                                                           "error_type"))
    exception_message: str | None = Field(None, validation_alias=AliasChoices("exception_message", "error",
                                                                              "message"))
    started_at: datetime | None = None
    finished_at: datetime | None = None
    sandbox_id: str | None = None
    n_input_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None

    @field_validator("reward", mode="before")
    @classmethod
    def _reward(cls, v: Any) -> float | None:
        return _finite(v)

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, v: Any) -> str:
        return str(v or "unknown").strip().lower()


class RegressionResults(_Lenient):
    experiment_id: str | None = Field(None, validation_alias=AliasChoices("experiment_id", "id", "experiment"))
    bench: str | None = Field(None, validation_alias=AliasChoices("bench", "benchmark"))
    dataset: str | None = None
    split: str | None = None
    agent: str | None = None
    model: str | None = None
    status: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    tasks: list[RegressionTask] = Field(default_factory=list)

    @field_validator("tasks", mode="before")
    @classmethod
    def _tasks(cls, v: Any) -> Any:
        if isinstance(v, dict):  # {task_id: {...}}
            return [{"task_id": k, **(r if isinstance(r, dict) else {"status": r})} for k, r in v.items()]
        return v or []


# the config keys a score depends on, and where regression.py's JSON may hold them
_CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "model": ("model",),
    "image": ("image",),
    "split": ("split",),
    "temperature": ("temperature",),
    "top_p": ("top_p",),
    "thinking": ("thinking", "enable_thinking"),
    "max_tokens": ("max_tokens", "max_output_tokens"),
    "agent_timeout_s": ("agent_timeout_s", "agent_timeout", "inference_timeout", "timeout"),
    "verifier_timeout_s": ("verifier_timeout_s", "verifier_timeout"),
}


def _scalar(v: Any) -> str | float | int | bool | None:
    if v is None or isinstance(v, bool | int | float):
        return v
    s = str(v).strip()
    low = s.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(s)
    except ValueError:
        pass
    f = _finite(s)
    return f if f is not None else s


def run_config(saved: dict[str, Any] | None, results: RegressionResults | None = None) -> dict[str, Any]:
    """The fields baseline alignment compares, from the saved config (top-level keys, `--set
    path=value` entries by their last segment, `--ee KEY=VALUE` env entries) and the results."""
    flat: dict[str, Any] = {}
    if results is not None:
        flat.update({k: v for k, v in (("model", results.model), ("split", results.split)) if v})
    saved = saved or {}
    pairs: list[tuple[str, Any]] = []
    for entry_key in ("set", "ee", "env"):
        entries = saved.get(entry_key) or []
        if isinstance(entries, dict):
            entries = [f"{k}={v}" for k, v in entries.items()]
        for e in entries if isinstance(entries, list) else []:
            name, sep, value = str(e).partition("=")
            if sep:
                pairs.append((name.rsplit(".", 1)[-1].strip().lower(), value))
    pairs += [(k.lower(), v) for k, v in saved.items() if not isinstance(v, dict | list)]
    for want, names in _CONFIG_KEYS.items():
        for name, value in pairs:
            if name in names and value not in (None, ""):
                flat[want] = _scalar(value)
    return {k: _scalar(v) for k, v in flat.items()}


# ---- the rl-rock CLI -----------------------------------------------------------------------


class RockRunSummary(_Lenient):
    completed: int = 0
    failed: int = 0
    skipped: int = 0
    avg_score: float | None = None
    total_score: float | None = None
    pass_rate: float | None = None


class RockRunJob(_Lenient):
    task_id: str
    job_name: str
    status: str = "unknown"
    sandbox_id: str | None = None
    score: float | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None

    @field_validator("score", mode="before")
    @classmethod
    def _score(cls, v: Any) -> float | None:
        return _finite(v)

    @field_validator("started_at", "finished_at", mode="before")
    @classmethod
    def _time(cls, v: Any) -> Any:
        return v or None


class RockRun(_Lenient):
    run_id: str
    mode: str | None = None
    status: str = "unknown"
    dataset: str | None = None
    split: str | None = None
    total_tasks: int | None = None
    pending_tasks: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    status_reason: str | None = None
    task_job_map: dict[str, str] = Field(default_factory=dict)
    summary: RockRunSummary | None = None
    jobs: list[RockRunJob] = Field(default_factory=list)

    @field_validator("created_at", "updated_at", "started_at", "finished_at", mode="before")
    @classmethod
    def _time(cls, v: Any) -> Any:
        return v or None


# ---- states --------------------------------------------------------------------------------

# task status -> None (not started: counts toward expected only) or the trial status; rock says
# "unknown" for a job that left no record yet (an errored attempt once the run has ended)
_NOT_STARTED = frozenset({"pending", "queued", "waiting", "created", "unknown"})
_LIVE = frozenset({"dispatched", "submitted", "running", "started"})


def task_status(status: str, reward: float | None) -> TrialStatus | None:
    """A task record's trial status: None while it has not started; a finite reward is valid
    whatever the word (Harbor's rule: a reward with an exception is still a measurement)."""
    s = status.lower()
    if s in _NOT_STARTED:
        return None
    if s in _LIVE:
        return TrialStatus.running
    return TrialStatus.valid if reward is not None else TrialStatus.errored


RUN_STATES: dict[str, State] = {
    "pending": State.pending, "queued": State.pending, "dispatched": State.dispatched, "running": State.running,
    "completed": State.finished, "finished": State.finished, "done": State.finished, "partial": State.finished,
    "failed": State.failed, "error": State.failed, "cancelled": State.cancelled, "canceled": State.cancelled,
}


def run_state(raw: str | None, statuses: list[str]) -> State:
    """An experiment's state: Rock's run status when it gives one, else what its tasks say."""
    if raw and raw.lower() in RUN_STATES:
        return RUN_STATES[raw.lower()]
    s = [x.lower() for x in statuses]
    if not s:
        return State.pending
    if any(x in ("running", "started") for x in s):
        return State.running
    if any(x in ("dispatched", "submitted") for x in s):
        return State.dispatched
    if all(x in _NOT_STARTED for x in s):
        return State.pending
    if any(x in _NOT_STARTED for x in s):
        return State.running
    return State.finished


# ---- experiment ids: regression.py's resolution ---------------------------------------------


class NoSuchExperiment(LookupError):
    pass


def resolve_experiment(workdir: str | Path, spec: str | None) -> Path:
    """regression.py's rule: omitted (or "newest") → the most recently modified results file;
    an id → results/<id>.json, else the one results/<id>*.json; a path → that file."""
    files = results_files(workdir)
    if spec is None or spec in ("", "newest", "latest"):
        if not files:
            raise NoSuchExperiment(f"{workdir}: no results/*.json yet")
        return max(files, key=lambda p: (p.stat().st_mtime, p.name))
    if os.sep in spec or spec.endswith(".json"):
        p = Path(spec).expanduser()
        if not p.is_absolute():
            p = Path(workdir) / p
        if not p.is_file():
            raise NoSuchExperiment(f"{spec}: no such results file")
        return p
    exact = Path(workdir) / "results" / f"{spec}.json"
    if exact.is_file():
        return exact
    hits = [p for p in files if p.stem.startswith(spec)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise NoSuchExperiment(f"{workdir}: no experiment {spec!r} in results/")
    names = ", ".join(p.stem for p in hits[:5])
    raise NoSuchExperiment(f"{workdir}: {spec!r} matches {len(hits)} experiments ({names}): give more of the id")
