"""From experiments and their audits to a `Report`. Pure: no IO, the same input gives the same report."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from services.audit.alignment import AlignmentResult
from services.core.alignment import outcome
from services.core.failures import NO_REWARD_NOR_EXCEPTION
from services.core.models import AuditReport, Experiment, State, Trial, TrialStatus
from services.core.policy import HASH_BENCHMARK_RE, Policy
from services.core.times import as_utc
from services.report.model import (
    HIST_BINS,
    PASS_REWARD,
    AuditSummary,
    Comparison,
    ExceptionExample,
    ExceptionGroup,
    Histogram,
    Kpis,
    Report,
    Ring,
    RunReport,
    TaskDelta,
    TaskRow,
)

EXAMPLE_MESSAGE_CHARS = 400


def _attempts(exp: Experiment) -> list[Trial]:
    # staged copies are the same attempt as their original: counted once, like the audit does
    return [t for t in exp.trials if t.copy_of is None]


def exception_label(t: Trial) -> str | None:
    """What groups an attempt that did not end with a valid reward."""
    if t.exception_type:
        return t.exception_type
    if t.status != TrialStatus.errored:
        return None
    if t.parse_error and t.parse_error != NO_REWARD_NOR_EXCEPTION:
        return "unreadable result"
    return "no reward"


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _fsum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _duration(exp: Experiment, trials: list[Trial], now: datetime) -> float | None:
    starts = [s for s in (as_utc(x) for x in [exp.started_at, *(t.started_at for t in trials)]) if s is not None]
    ends = [e for e in (as_utc(x) for x in [exp.finished_at, *(t.finished_at for t in trials)]) if e is not None]
    if not starts:
        return None
    running = exp.state in (State.running, State.dispatched, State.pending)
    end = as_utc(now) if running else (max(ends) if ends else None)
    return max(0.0, (end - min(starts)).total_seconds()) if end else None


def kpis(exp: Experiment, report: AuditReport, trials: list[Trial], now: datetime) -> Kpis:
    t = report.trials
    n_in = exp.n_input_tokens if exp.n_input_tokens is not None else _sum([x.n_input_tokens for x in trials])
    n_out = exp.n_output_tokens if exp.n_output_tokens is not None else _sum([x.n_output_tokens for x in trials])
    tokens = None if n_in is None and n_out is None else (n_in or 0) + (n_out or 0)
    cost = exp.cost_usd if exp.cost_usd is not None else _fsum([x.cost_usd for x in trials])
    return Kpis(
        score=report.score,
        valid=int(t.get("valid") or 0),
        expected=t.get("expected"),
        valid_fraction=report.valid_fraction,
        error_fraction=report.error_fraction,
        finished=int(t.get("total") or 0),
        running=int(t.get("running") or 0),
        errored=int(t.get("errored") or 0),
        invalid_errors=int(t.get("invalid_errors") or 0),
        tokens=tokens,
        n_input_tokens=n_in,
        n_output_tokens=n_out,
        cost_usd=cost,
        duration_s=_duration(exp, trials, now),
    )


def ring(trials: list[Trial]) -> Ring:
    r = Ring()
    for t in trials:
        if t.status == TrialStatus.running:
            r.running += 1
        elif t.status == TrialStatus.errored or t.reward is None:
            r.errored += 1
        elif t.reward >= PASS_REWARD:
            r.passed += 1
        elif t.reward > 0:
            r.partial += 1
        else:
            r.failed += 1
    return r


def histogram(trials: list[Trial], bins: int = HIST_BINS) -> Histogram:
    counts = [0] * bins
    outside = 0
    for t in trials:
        if t.status != TrialStatus.valid or t.reward is None:
            continue
        r = t.reward
        if r < 0 or r > 1:
            outside += 1
        i = min(bins - 1, max(0, int(min(max(r, 0.0), 1.0) * bins)))
        counts[i] += 1
    return Histogram(edges=[round(i / bins, 6) for i in range(bins + 1)], counts=counts, outside=outside)


def exception_groups(trials: list[Trial], policy: Policy) -> list[ExceptionGroup]:
    benign = set(policy.benign_exceptions)
    groups: dict[str, list[Trial]] = {}
    for t in trials:
        if t.status == TrialStatus.running:
            continue
        label = exception_label(t)
        if label is None:
            continue
        groups.setdefault(label, []).append(t)
    out: list[ExceptionGroup] = []
    for label, members in groups.items():
        # the example is the earliest attempt, so the same run always shows the same one
        ex = min(members, key=lambda t: (as_utc(t.started_at) is None, as_utc(t.started_at) or 0, t.trial_name))
        msg = ex.exception_message
        if msg is None and label == "no reward" and ex.state_raw:
            msg = f"ended {ex.state_raw} without a reward"  # the source's own word says more
        elif msg is None and label in ("unreadable result", "no reward"):
            msg = ex.parse_error
        out.append(ExceptionGroup(
            exception=label,
            count=len(members),
            failure_class=ex.failure_class,
            benign=label in benign,
            example=ExceptionExample(task=ex.task_name, trial=ex.trial_name, path=ex.path,
                                     message=(msg or "")[:EXAMPLE_MESSAGE_CHARS] or None),
        ))
    out.sort(key=lambda g: (-g.count, g.exception))
    return out


class _TaskAcc:
    """One task's figures, summed in one pass (a 100k-attempt run has ~33k tasks)."""

    __slots__ = ("attempts", "cost", "dur_n", "dur_sum", "errored", "exceptions", "finished", "outcome_sum",
                 "passed", "reward_sum", "running", "tokens", "valid")

    def __init__(self) -> None:
        self.attempts = self.valid = self.errored = self.running = self.passed = self.finished = self.dur_n = 0
        self.reward_sum = self.outcome_sum = self.dur_sum = 0.0
        self.tokens: int | None = None
        self.cost: float | None = None
        self.exceptions: set[str] = set()


def task_rows(trials: list[Trial]) -> list[TaskRow]:
    accs: dict[str, _TaskAcc] = {}
    for t in trials:
        a = accs.get(t.task_name)
        if a is None:
            a = accs[t.task_name] = _TaskAcc()
        a.attempts += 1
        status = t.status
        if status == TrialStatus.running:
            a.running += 1
        else:
            a.finished += 1
            a.outcome_sum += outcome(t)
            d = t.duration_s
            if d is not None:
                a.dur_sum += d
                a.dur_n += 1
            if status == TrialStatus.errored:
                a.errored += 1
            if status == TrialStatus.valid and t.reward is not None:
                a.valid += 1
                a.reward_sum += t.reward
                if t.reward >= PASS_REWARD:
                    a.passed += 1
        label = exception_label(t)
        if label:
            a.exceptions.add(label)
        if t.n_input_tokens is not None or t.n_output_tokens is not None:
            a.tokens = (a.tokens or 0) + (t.n_input_tokens or 0) + (t.n_output_tokens or 0)
        if t.cost_usd is not None:
            a.cost = (a.cost or 0.0) + t.cost_usd
    # model_construct: these figures were just computed here, validating 33k rows again costs seconds
    return [
        TaskRow.model_construct(
            task=task, attempts=a.attempts, valid=a.valid, errored=a.errored, running=a.running, passed=a.passed,
            mean_reward=a.reward_sum / a.valid if a.valid else None,
            outcome=a.outcome_sum / a.finished if a.finished else None,
            exceptions=sorted(a.exceptions),
            mean_duration_s=a.dur_sum / a.dur_n if a.dur_n else None,
            tokens=a.tokens, cost_usd=a.cost,
        )
        for task, a in sorted(accs.items())
    ]


def run_report(exp: Experiment, report: AuditReport, policy: Policy, now: datetime,
               alignment: AlignmentResult | None = None) -> RunReport:
    trials = _attempts(exp)
    return RunReport(
        id=exp.id,
        source=exp.source,
        source_label=exp.source_label,
        path=exp.path,
        benchmark=exp.benchmark,
        model=exp.model,
        state=exp.state.value,
        state_raw=exp.state_raw,
        started_at=exp.started_at,
        finished_at=exp.finished_at,
        kpis=kpis(exp, report, trials, now),
        ring=ring(trials),
        histogram=histogram(trials),
        exceptions=exception_groups(trials, policy),
        audit=AuditSummary(verdict=report.verdict, needs_action=report.needs_action, checks=report.checks,
                           notes=report.notes, reason=report.reason, ask=report.ask),
        alignment=alignment,
        tasks=task_rows(trials),
        problems=list(exp.problems),
    )


def benchmark_of(exp: Experiment) -> str:
    """The benchmark runs are compared under: the run dir's name when the benchmark is a version hash."""
    if exp.benchmark and HASH_BENCHMARK_RE.fullmatch(exp.benchmark):
        return exp.benchmark_from_dir or exp.benchmark
    return exp.benchmark or exp.benchmark_from_dir or ""


def compare(runs: Sequence[RunReport], benchmark: str) -> Comparison:
    """Runs of one benchmark side by side: per task, each run's outcome and the change from the first."""
    ids = [r.id for r in runs]
    per_run = [{t.task: t.outcome for t in r.tasks} for r in runs]
    all_tasks = sorted(set().union(*per_run))
    deltas: list[TaskDelta] = []
    for task in all_tasks:
        outs = [m.get(task) for m in per_run]
        first, last = outs[0], outs[-1]
        deltas.append(TaskDelta(task=task, outcomes=outs,
                                delta=None if first is None or last is None else last - first))
    deltas.sort(key=lambda d: (d.delta is None, -abs(d.delta or 0.0), d.task))
    only_in = {r.id: sorted(set(m) - set().union(*(o for o in per_run if o is not m)))
               for r, m in zip(runs, per_run, strict=True)}
    first_k, last_k = runs[0].kpis, runs[-1].kpis
    pr_first, pr_last = runs[0].ring.pass_rate, runs[-1].ring.pass_rate
    return Comparison(
        benchmark=benchmark,
        runs=ids,
        score_delta=None if first_k.score is None or last_k.score is None else last_k.score - first_k.score,
        pass_rate_delta=None if pr_first is None or pr_last is None else pr_last - pr_first,
        tasks=deltas,
        only_in={k: v for k, v in only_in.items() if v},
    )


def build_report(items: Sequence[tuple[Experiment, AuditReport, AlignmentResult | None]], policy: Policy,
                 now: datetime) -> Report:
    """One report over one or more experiments; two or more of one benchmark are compared."""
    runs = [run_report(exp, rep, policy, now, al) for exp, rep, al in items]
    notes: list[str] = []
    comparison = None
    if len(runs) >= 2:
        benches = {benchmark_of(exp) for exp, _, _ in items}
        if len(benches) == 1 and "" not in benches:
            comparison = compare(runs, benches.pop())
        else:
            notes.append("not compared: the runs are of different benchmarks ("
                         + ", ".join(sorted(b or "?" for b in benches)) + ")")
    if len(runs) == 1:
        title = f"{runs[0].id}"
    elif comparison is not None:
        title = f"{comparison.benchmark}: {len(runs)} runs compared"
    else:
        title = f"{len(runs)} runs"
    return Report(generated_at=now, title=title, runs=runs, comparison=comparison, notes=notes)
