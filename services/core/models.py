"""Domain objects every source yields and every screen, check and batch command consumes."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from services.core.plain import EXCLUDE

# the parse note of a trial that ended with neither a reward nor an exception: errored, but
# not "unreadable" (its result.json parsed fine)


# the state_raw of an experiment whose own summary (Harbor's job result.json) does not parse
AGGREGATE_UNREADABLE = "result.json unreadable"


class State(StrEnum):
    """The normalised state vocabulary; each source keeps its own word in `state_raw`."""

    pending = "pending"
    dispatched = "dispatched"
    running = "running"
    finished = "finished"
    failed = "failed"
    cancelled = "cancelled"
    needs_input = "needs_input"
    blocked = "blocked"
    removed = "removed"


class TrialStatus(StrEnum):
    valid = "valid"  # a finite reward
    errored = "errored"  # ended without a finite reward, or result.json unreadable
    running = "running"  # config.json without result.json


@dataclass(slots=True)
class Trial:
    """One trial attempt: one trial dir, as read from its files.

    A plain slotted dataclass, not a pydantic model: a 100k-trial job keeps 100k of them for as
    long as the console runs (~220 bytes each instead of ~1.8 KB), and the parser builds them
    from values it has already checked (services/harbor/parse.py)."""

    trial_name: str
    task_name: str
    path: str  # trial dir relative to the job dir, POSIX separators
    status: TrialStatus
    reward: float | None = None
    rewards: dict[str, float] = field(default_factory=dict)
    exception_type: str | None = None
    exception_message: str | None = None
    failure_class: str | None = None
    parse_error: str | None = None  # why result.json could not be read
    started_at: datetime | None = None
    finished_at: datetime | None = None
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None
    model_name: str | None = None
    agent_name: str | None = None
    source: str | None = None  # Harbor's dataset name for the trial
    mtime: float | None = None  # mtime of the file the trial's state was read from
    attempt: int = 1  # 1-based attempt number within its task, earliest first
    copy_of: str | None = None  # the original's path when this is a staged copy
    state_raw: str | None = None  # the source's own word for the attempt, e.g. Rock's dispatched

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            try:
                return (self.finished_at - self.started_at).total_seconds()
            except TypeError:  # one naive, one aware
                return None
        return None

    @property
    def is_copy(self) -> bool:
        return self.copy_of is not None

    def to_json(self) -> dict[str, Any]:
        """Every field, as JSON values (times in ISO 8601, the status as its word)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, datetime):
                v = v.isoformat()
            elif isinstance(v, StrEnum):
                v = v.value
            elif isinstance(v, dict):
                v = dict(v)
            out[f.name] = v
        return out


@dataclass(kw_only=True)
class TrialCounts:
    total: int = field(default=0, metadata={"description": "finished attempts (unique trial names)"})
    valid: int = 0
    errored: int = 0
    running: int = 0
    invalid_errors: int = 0
    expected: int | None = None
    n_rep: int | None = None
    max_attempts_per_task: int = 0
    copies: int = field(default=0, metadata={"description": "staged copies collapsed into their original"})


def _doc(text: str, **more: Any) -> dict[str, Any]:
    return {"description": text, **more}


@dataclass(kw_only=True)
class Experiment:
    """One eval run (a Harbor job dir, a rock experiment, a campaign …)."""

    id: str
    source: str = field(metadata=_doc("source kind: harbor, harbor+ssh, rock, …"))
    source_label: str = field(default="", metadata=_doc("where it was read from, for people"))
    path: str = ""
    state: State = State.pending
    state_raw: str = ""
    model: str | None = None
    model_hf_name: str | None = field(default=None, metadata=_doc("the real model name from the run's eval config"))
    benchmark: str | None = None
    benchmark_from_dir: str | None = field(default=None, metadata=_doc("leading segment of the run dir name"))
    benchmark_size: int | None = None
    n_rep: int | None = None
    n_rep_source: Literal["config", "default", "unknown"] = "unknown"
    planned_trials: int | None = field(default=None, metadata=_doc("n_total_trials from the job result"))
    score: float | None = None
    eval_key: str | None = None
    started_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    scheduler_job_id: str | None = None
    scheduler_state: str | None = field(default=None, metadata=_doc("SLURM's own word, e.g. COMPLETED"))
    inference_timeout_s: float | None = None
    run_config: dict[str, str | float | int | bool | None] = field(
        default_factory=dict, metadata=_doc("settings the score depends on (model, image, split, temperature …): "
                                            "what baseline alignment compares field by field"))
    counts: TrialCounts = field(default_factory=TrialCounts)
    n_input_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None
    problems: list[str] = field(default_factory=list, metadata=_doc("what could not be read, and where"))
    trials: list[Trial] = field(default_factory=list, repr=False, metadata=EXCLUDE)
    stale_since: datetime | None = field(default=None, metadata=_doc("set when this is the last good copy"))
    verified_at: datetime | None = field(default=None, metadata=_doc(
        "every finished trial was checked against its files at or after this time"))
    # the one-pass figures assemble took over `trials` (services.core.census.Census)
    _census: Any = field(default=None, init=False, repr=False, compare=False, metadata=EXCLUDE)
    # a source may hand over an Experiment whose trials are read on first use of `trials`
    # (a batch audit of an unchanged job needs its census, not 100k Trial objects)
    _trials_loader: Any = field(default=None, init=False, repr=False, compare=False, metadata=EXCLUDE)
    # set by a source that built this Experiment from the previous one: (previous, trials gone or
    # replaced, trials new or changed, trials whose copy mark may have moved), so a consumer of
    # every poll can do work in proportion to the change
    _delta: Any = field(default=None, init=False, repr=False, compare=False, metadata=EXCLUDE)

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            # only reached for an attribute not in __dict__: `trials` handed over to a loader
            if name == "trials":
                loader = self.__dict__.get("_trials_loader")
                if loader is not None:
                    trials = loader()
                    self.__dict__["trials"] = trials
                    return trials
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def expected(self) -> int | None:
        return self.counts.expected


def experiment_key(exp: Experiment) -> str:
    """How the console names an experiment across sources: `source label::experiment id`."""
    return f"{exp.source_label}::{exp.id}"


@dataclass(kw_only=True)
class SourceError:
    source: str
    where: str
    message: str
    unreadable: bool = field(default=False, metadata=_doc(
        "a path that exists but cannot be read (batch exit 2)"))
    root_failed: bool = field(default=False, metadata=_doc("the SOURCE path itself could not be read", exclude=True))


@dataclass(kw_only=True)
class Snapshot:
    """What one scan of one source saw."""

    source: str
    taken_at: datetime
    experiments: list[Experiment] = field(default_factory=list)
    errors: list[SourceError] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict, metadata=_doc("files read, bytes, round trips …"))


class CheckStatus(StrEnum):
    pass_ = "pass"
    warn = "warn"
    fail = "fail"
    skip = "skip"


# The ids of DESIGN 3's checks; backends and enrichments add their own (csbench's checklist,
# `alignment`, `partial_registered` …), so the field is an open string.
CORE_CHECK_IDS: tuple[str, ...] = (
    "finished", "score", "traces", "valid_count", "duplicates", "error_gate", "model_name", "benchmark_name",
    "stale_rows",
)
CheckId = str


@dataclass(kw_only=True)
class Check:
    id: CheckId
    title: str
    status: CheckStatus
    evidence: str
    action: str | None = None
    remediation: str | None = field(default=None, metadata=_doc("id of a remediation evaldesk can run for this row"))

# One word per thing a person does next (services.audit.verdict.decide picks it from the
# checks): "repair" — the experiment's own summary cannot be read, nothing else can be judged
# until it is rebuilt; "input" — the task needs values only a person can give; "investigate" —
# no fix evaldesk can run: the report's `ask` says what to decide; the others name a fix.
Verdict = Literal["finalize", "dedupe", "resume", "rerun", "wait", "investigate", "repair", "input", "launch",
                  "retry", "deregister", "register", "upload", "rename", "cleanup", "teardown", "fetch", "submit"]


def report_trials(c: TrialCounts, *, n_rep: int | None = None,
                  valid_after_dedupe: int | None = None) -> dict[str, int | None]:
    """The `trials` figures of an audit report (DESIGN 7), the same keys for every backend."""
    return {
        "total": c.total, "valid": c.valid, "errored": c.errored, "running": c.running, "expected": c.expected,
        "invalid_errors": c.invalid_errors, "n_rep": n_rep, "max_attempts_per_task": c.max_attempts_per_task,
        # what check 4 and the gate count when the job still needs dedupe; None when it does not
        "valid_after_dedupe": valid_after_dedupe,
    }


@dataclass(kw_only=True)
class AuditReport:
    id: str
    source: str
    path: str
    state: State
    state_raw: str
    model: str | None
    benchmark: str | None
    score: float | None
    trials: dict[str, int | None]
    valid_fraction: float | None
    error_fraction: float | None
    checks: list[Check]
    verdict: Verdict
    notes: list[str] = field(default_factory=list)
    # why the verdict, from the check that decided it (services.audit.verdict.decide)
    reason: str = ""
    decided_by: str | None = field(default=None, metadata=_doc("id of the check the verdict comes from"))
    fix: str | None = field(default=None, metadata=_doc("the remediation the verdict names, when it names one"))
    ask: str | None = field(default=None, metadata=_doc(
        "what a person must decide, with the commands, when no fix runs"))

    def check(self, check_id: str) -> Check:
        return next(c for c in self.checks if c.id == check_id)

    @property
    def needs_action(self) -> bool:
        return self.verdict != "finalize" or any(c.status == CheckStatus.fail for c in self.checks)


@dataclass(kw_only=True)
class JournalEntry:
    at: datetime
    user: str
    action: str
    target: str
    before: Any = None
    after: Any = None
    detail: dict[str, Any] = field(default_factory=dict)
