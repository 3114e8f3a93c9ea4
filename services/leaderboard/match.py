"""Which leaderboard row is a run's: the one rule every audit check and every write asks.

A run's row is a row of yours (the configured usernames) that carries the run's job name;
else a row of yours without a job name whose (model × benchmark) is the run's and whose
`created_at` lies within [run started − slack, run finished + slack]. A live run has not
finished: its row may be written at any moment until it ends, so its upper bound is now
(+ slack). A row that names another run is that run's. The slack is
`Policy.row_match_slack_hours`.

Other users' rows that carry the job name or fall in the window are listed beside the match
and never chosen: another user's row never blocks registering yours, and is never changed.
No row → register inserts a new row of yours. Two or more → nothing is written, and every
surface shows the candidates and why.

The run's identity is the one the harvest registers it under, so a register never mints a
sibling of a model the leaderboard already has: `model_hf_name` from the run's eval config
when there is one (the cleanup runbook's rule), else the model as the run reports it when
the models table has that name, else that name with the harvest's provider prefix stripped
(OpenThoughts-Agent `database/unified_db/utils.py` looks a model up as given, then without
`hosted_vllm/`). The benchmark is the run's, or the run dir's leading segment when the run's
is a dataset version hash.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from services.core.models import Experiment, State
from services.core.policy import HASH_BENCHMARK_RE, NUMERIC_MODEL_RE, Policy
from services.core.times import as_utc
from services.leaderboard.rows import REGISTERED, JobRow, LeaderboardView

# the prefixes the harvest strips before it looks a model up again
HARVEST_PROVIDER_PREFIXES = ("hosted_vllm/",)
# states in which a run may still write its row
LIVE = (State.pending, State.dispatched, State.running, State.needs_input)


class RunNames(BaseModel):
    """The names a run registers under, and every name its rows may already be filed under."""

    model: str | None = Field(description="the model to register under; None: unknown (a served id, no "
                              "model_hf_name)")
    benchmark: str | None = Field(description="the benchmark to register under")
    model_aliases: list[str] = Field(default_factory=list)
    benchmark_aliases: list[str] = Field(default_factory=list)


def harvest_name(model: str) -> str:
    """The model name without the provider prefix the harvest strips (and the stray slash of a
    `hosted_vllm//…` launch)."""
    for prefix in HARVEST_PROVIDER_PREFIXES:
        if model.startswith(prefix):
            return model[len(prefix):].lstrip("/")
    return model


def _unique(names: list[str | None]) -> list[str]:
    return list(dict.fromkeys(n for n in names if n))


def run_names(exp: Experiment, known_models: Collection[str] = ()) -> RunNames:
    reported = exp.model or None
    stripped = harvest_name(reported) if reported else None
    last = reported.rsplit("/", 1)[-1] if reported else None
    served_id = last if last and NUMERIC_MODEL_RE.fullmatch(last) else None
    model: str | None
    if exp.model_hf_name:
        model = exp.model_hf_name
    elif reported is None or served_id:
        model = None
    else:
        model = reported if reported in known_models else stripped
    bench = exp.benchmark
    real_bench = exp.benchmark_from_dir if bench and HASH_BENCHMARK_RE.fullmatch(bench) else bench
    return RunNames(model=model, benchmark=real_bench,
                    model_aliases=_unique([exp.model_hf_name, reported, stripped, served_id]),
                    benchmark_aliases=_unique([real_bench, bench]))


def window(exp: Experiment, slack: timedelta, now: datetime) -> tuple[datetime, datetime] | None:
    """When the run's row can have been created; None when the run's start is unknown."""
    start = as_utc(exp.started_at)
    if start is None:
        return None
    if exp.state in LIVE:
        end = max(as_utc(now) or start, as_utc(exp.updated_at) or start)
    else:
        end = as_utc(exp.finished_at) or as_utc(exp.updated_at) or start
    return start - slack, max(start, end) + slack


def _when(dt: datetime | None) -> str:
    return f"{as_utc(dt):%Y-%m-%d %H:%M} UTC" if dt else "?"


class RunMatch(BaseModel):
    run: str = Field(description="the run's job name (its id)")
    names: RunNames
    candidates: list[JobRow] = Field(default_factory=list, description="rows of yours the rule names")
    others: list[JobRow] = Field(default_factory=list, description="other users' rows the rule would name: "
                                 "shown, never chosen")
    pair_rows: list[JobRow] = Field(default_factory=list, description="every row of the pair, and every row "
                                    "carrying the run's job name, of every user")
    how: Literal["job_name", "created_at", "none"] = "none"
    since: datetime | None = None
    until: datetime | None = None

    @property
    def row(self) -> JobRow | None:
        """The run's row: there is exactly one."""
        return self.candidates[0] if len(self.candidates) == 1 else None

    def rule(self) -> str:
        """The window, as evidence."""
        return f"created {_when(self.since)} – {_when(self.until)}"

    @property
    def ambiguous(self) -> str | None:
        """Why the run's row cannot be told apart, naming every candidate; None when it can."""
        if len(self.candidates) < 2:
            return None
        why = ("rows of yours carry this run's job name" if self.how == "job_name"
               else f"rows of yours without a job name were {self.rule()}")
        return (f"unclear which row is this run's: {len(self.candidates)} {why}: "
                + "; ".join(r.brief() for r in self.candidates))

    def decide(self) -> str:
        """What a person decides when the rule names more than one row."""
        fix = ("remove the duplicate" if self.how == "job_name"
               else f"set its job_name to {self.run} (then the others no longer compete)")
        return (f"decide which row is this run's and {fix} on the leaderboard yourself; evaldesk writes nothing "
                "on a guess")

    def looked(self) -> str:
        """How the rule looked when it found no row of yours."""
        if self.since is None:
            return "no row of yours carries its job name, and the run's start is unknown"
        return f"no row of yours carries its job name or, without one, was {self.rule()}"

    def beside(self) -> str:
        """Other users' rows the rule would have named, as evidence ('' when none)."""
        if not self.others:
            return ""
        return "; not yours, never chosen: " + "; ".join(
            r.brief() + (" (carries this run's job name)" if r.job_name == self.run else "") for r in self.others)

    @property
    def theirs(self) -> list[JobRow]:
        """Other users' rows registering this run under its job name (never yours to change)."""
        return [r for r in self.others if r.job_name == self.run and r.status in REGISTERED]

    def shown(self) -> list[JobRow]:
        return sorted(self.pair_rows, key=lambda r: (r.created_at is None, r.created_at), reverse=True)


def match(exp: Experiment, view: LeaderboardView, policy: Policy, now: datetime) -> RunMatch:
    names = run_names(exp, view.models.values())
    model_ids = {i for i, n in view.models.items() if n in names.model_aliases}
    bench_ids = {i for i, n in view.benchmarks.items() if n in names.benchmark_aliases}
    bounds = window(exp, timedelta(hours=policy.row_match_slack_hours), now)
    mine = set(view.usernames)

    def named(r: JobRow) -> bool:
        return bool(r.job_name) and r.job_name == exp.id

    def paired(r: JobRow) -> bool:
        return r.model_id in model_ids and r.benchmark_id in bench_ids

    def timed(r: JobRow) -> bool:
        created = as_utc(r.created_at)
        return (not r.job_name and paired(r) and bounds is not None and created is not None
                and bounds[0] <= created <= bounds[1])

    rows = [r for r in view.jobs if paired(r) or named(r)]
    how: Literal["job_name", "created_at", "none"] = "job_name"
    candidates = [r for r in rows if r.username in mine and named(r)]
    if not candidates:
        candidates = [r for r in rows if r.username in mine and timed(r)]
        how = "created_at" if candidates else "none"
    others = [r for r in rows if r.username not in mine and (named(r) or timed(r))]
    return RunMatch(run=exp.id, names=names, candidates=candidates, others=others, pair_rows=rows, how=how,
                    since=bounds[0] if bounds else None, until=bounds[1] if bounds else None)
