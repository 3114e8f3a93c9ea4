"""The live monitor: a bounded time series per experiment and the fake-execution rules.

Each poll of a source yields Experiments; `MonitorState.feed` turns every one into a compact
`Sample`, recomputes the figures a person watches (throughput, ETA, pass rate with its
confidence interval, actual vs expected) and evaluates the four "fake execution" rules of the
Rock runbook on every poll:

(a) the dispatched count (started trials with no file activity for `idle_s`) has not
    decreased for `stuck_polls` consecutive polls while nothing finished;
(b) new invalid errors on `error_growth_polls` consecutive polls, making up more than the
    error gate's share of what finished meanwhile (a big healthy run produces a few errors on
    most polls; without the share test the rule would cry wolf there);
(c) after `pass_rate_min_finished` finished attempts the pass rate is below
    `pass_rate_ratio` × the expected rate (needs a baseline; without one there is no
    expectation to fall short of);
(d) one trial has run longer than `timeout_factor` × the inference timeout.

A rule yields a `MonitorWarning` when it starts to hold; it stays active (see `warnings_for`)
until its condition clears. Nothing here reads the clock or the disk by itself: time comes
from an injected clock and file activity from `probe_activity`, so the logic is
deterministic under test.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import posixpath
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from services.core.baselines import Baseline, pick_baseline
from services.core.models import Experiment, Snapshot, State, Trial, TrialStatus
from services.core.policy import Policy
from services.transport.fs import JobFS

Clock = Callable[[], datetime]
RuleId = Literal["a", "b", "c", "d"]

RULE_TITLES: dict[str, str] = {
    "a": "dispatched but not progressing",
    "b": "errors accumulating",
    "c": "pass rate far below expected",
    "d": "trial past its timeout",
}

COUNT_STATES: tuple[str, ...] = ("pending", "dispatched", "running", "valid", "errored")


def utc_now() -> datetime:
    return datetime.now(UTC)


def experiment_key(exp: Experiment) -> str:
    """How the console names an experiment across sources."""
    return f"{exp.source_label}::{exp.id}"


def fmt_duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s < 90:
        return f"{s} s"
    m = round(s / 60)
    if m < 90:
        return f"{m} min"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m:02d} min"
    return f"{h // 24} d {h % 24} h"


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval; fractional successes (partial rewards) are accepted."""
    if n <= 0:
        return None
    p = min(max(successes / n, 0.0), 1.0)
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


class MonitorWarning(BaseModel):
    """A fake-execution rule firing, with the evidence a person can check."""

    id: str = Field(description="the experiment id")
    key: str = Field("", description="source_label::experiment id")
    rule: RuleId
    at: datetime
    evidence: str
    trial: str | None = Field(None, description="rule d: the trial dir")

    @property
    def title(self) -> str:
        return RULE_TITLES[self.rule]

    def as_json(self) -> dict[str, object]:
        return {
            "type": "warning",
            "id": self.id,
            "at": _iso(self.at),
            "rule": self.rule,
            "evidence": self.evidence,
        }


Warning = MonitorWarning


@dataclass(frozen=True, slots=True)
class Activity:
    """The newest sign of life of a running trial: its log's mtime and last line."""

    mtime: float | None
    line: str = ""


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


class TaskGap(BaseModel):
    task: str
    expected: float
    actual: float
    attempts: int


class Alignment(BaseModel):
    """Actual vs expected, on the attempts that have finished."""

    baseline: str
    expected: float = Field(description="expected rate over the compared attempts")
    actual: float
    compared: int = Field(description="finished attempts compared")
    expected_overall: float | None = None
    gaps: list[TaskGap] = Field(default_factory=list, description="tasks furthest below expectation")


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
            "at": _iso(self.at),
            "state": self.state.value,
            "counts": dict(self.counts),
            "finished": self.finished,
            "expected": self.expected,
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


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _ts(dt: datetime | None) -> float | None:
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.astimezone(UTC)
    return dt.timestamp()


def _outcome(t: Trial) -> float:
    """A finished attempt's share of a pass: errors count as 0, like on the leaderboard."""
    if t.reward is None:
        return 0.0
    return min(max(t.reward, 0.0), 1.0)


@dataclass
class ExperimentSeries:
    key: str
    exp_id: str
    samples: deque[Sample]
    latest: Reading | None = None
    active: dict[str, MonitorWarning] = field(default_factory=dict)
    fired: deque[MonitorWarning] = field(default_factory=lambda: deque(maxlen=200))
    first_seen: dict[str, float] = field(default_factory=dict)
    # path -> (mtime, outcome, finished at, valid) of finished trials, reused across polls
    done: dict[str, tuple[float | None, float, float | None, bool]] = field(default_factory=dict)

    def values(self, state: str) -> list[int]:
        return [s.count(state) for s in self.samples]


class MonitorState:
    """Time series and rule state for every monitored experiment, fed one poll at a time."""

    def __init__(
        self,
        policy: Policy | None = None,
        baselines: Sequence[Baseline] = (),
        clock: Clock = utc_now,
        history: int = 720,
        window_s: float = 600.0,
    ) -> None:
        self.policy = policy or Policy()
        self.baselines = list(baselines)
        self.clock = clock
        self.history = max(2, history)
        self.window_s = window_s
        self._series: dict[str, ExperimentSeries] = {}
        # feed runs in a scan thread (100k trials cost ~0.1–0.8 s); readers on the UI thread take
        # the same lock so they never see a series half-updated
        self.lock = threading.RLock()

    # -- reading -----------------------------------------------------------------------
    def keys(self) -> list[str]:
        with self.lock:
            return list(self._series)

    def series(self, key: str) -> ExperimentSeries | None:
        return self._series.get(key) or self._by_id(key)

    def reading(self, key: str) -> Reading | None:
        s = self.series(key)
        return s.latest if s else None

    def warnings_for(self, exp_id: str) -> list[MonitorWarning]:
        """Active warnings of one experiment, by console key or bare experiment id."""
        with self.lock:
            s = self.series(exp_id)
            if s is None:
                return []
            return sorted(s.active.values(), key=lambda w: (w.rule, w.trial or ""))

    def all_warnings(self) -> list[MonitorWarning]:
        with self.lock:
            return [w for k in self._series for w in self.warnings_for(k)]

    def _by_id(self, exp_id: str) -> ExperimentSeries | None:
        found = [s for s in self._series.values() if s.exp_id == exp_id]
        return found[0] if len(found) == 1 else None

    # -- feeding -----------------------------------------------------------------------
    def feed(
        self, snapshot: Snapshot, activity: Mapping[str, Mapping[str, Activity]] | None = None
    ) -> list[MonitorWarning]:
        """Take one scan of one source; returns the warnings that started to hold on this poll."""
        new: list[MonitorWarning] = []
        with self.lock:
            for exp in snapshot.experiments:
                key = experiment_key(exp)
                new += self.feed_experiment(exp, (activity or {}).get(key))
        return new

    def feed_experiment(
        self, exp: Experiment, activity: Mapping[str, Activity] | None = None
    ) -> list[MonitorWarning]:
        key = experiment_key(exp)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = ExperimentSeries(key, exp.id, deque(maxlen=self.history))
        now_dt = self.clock()
        now = now_dt.timestamp()
        th = self.policy.monitor
        timeout = exp.inference_timeout_s or th.inference_timeout_s
        activity = activity or {}

        running: list[RunningTrial] = []
        live_paths: set[str] = set()
        successes = 0.0
        valid_sum = 0.0
        finished_in_window = 0
        window_start = now - self.window_s
        by_task: dict[str, list[float]] = {}
        baseline = pick_baseline(exp, self.baselines)
        per_task = baseline is not None and bool(baseline.tasks)
        done_cache = series.done
        done_now: dict[str, tuple[float | None, float, float | None, bool]] = {}
        for t in exp.trials:
            if t.copy_of is not None:
                continue
            if t.status == TrialStatus.running:
                live_paths.add(t.path)
                first = series.first_seen.setdefault(t.path, now)
                start = _ts(t.started_at) or t.mtime or first
                act = activity.get(t.path)
                last = max(x for x in (t.mtime, act.mtime if act else None, start) if x is not None)
                idle = max(0.0, now - last)
                running.append(
                    RunningTrial(
                        trial_name=t.trial_name,
                        task_name=t.task_name,
                        path=t.path,
                        running_s=max(0.0, now - start),
                        idle_s=idle,
                        dispatched=idle >= th.idle_s,
                        activity=act.line if act else "",
                    )
                )
                continue
            # a finished trial's figures only change when its files do: reuse them across polls
            d = done_cache.get(t.path)
            if d is None or d[0] != t.mtime:
                d = (t.mtime, _outcome(t), _ts(t.finished_at) or t.mtime, t.status == TrialStatus.valid)
            done_now[t.path] = d
            o = d[1]
            successes += o
            if d[3]:
                valid_sum += o
            if per_task:
                by_task.setdefault(t.task_name, []).append(o)
            if d[2] is not None and window_start < d[2] <= now:
                finished_in_window += 1
        series.done = done_now
        # trials that finished or vanished need no start time any more
        for gone in set(series.first_seen) - live_paths:
            del series.first_seen[gone]
        running.sort(key=lambda r: (-r.running_s, r.path))

        c = exp.counts
        finished = c.total
        n_dispatched = sum(1 for r in running if r.dispatched)
        n_running = len(running) - n_dispatched
        pending = max((c.expected or 0) - finished - len(running), 0) if c.expected else 0
        pass_rate = successes / finished if finished else None
        ci = wilson_interval(successes, finished)
        mean_valid = valid_sum / c.valid if c.valid else None

        throughput = self._throughput(exp, now, finished_in_window, finished, series)
        remaining = (c.expected - finished) if c.expected is not None else None
        if exp.state == State.finished or (remaining is not None and remaining <= 0):
            eta: float | None = 0.0
        elif remaining is not None and throughput:
            eta = remaining / throughput * 60.0
        else:
            eta = None

        tokens = (exp.n_input_tokens or 0) + (exp.n_output_tokens or 0)
        sample = Sample(
            at=now,
            pending=pending,
            dispatched=n_dispatched,
            running=n_running,
            valid=c.valid,
            errored=c.errored,
            invalid_errors=c.invalid_errors,
            finished=finished,
            pass_rate=pass_rate,
            tokens=tokens,
            cost_usd=exp.cost_usd,
        )
        series.samples.append(sample)
        alignment = _align(baseline, by_task, successes, finished) if baseline else None
        reading = Reading(
            key=key,
            id=exp.id,
            at=now_dt,
            state=exp.state,
            counts={s: sample.count(s) for s in COUNT_STATES},
            finished=finished,
            expected=c.expected,
            invalid_errors=c.invalid_errors,
            pass_rate=pass_rate,
            pass_rate_ci=ci,
            mean_reward_valid=mean_valid,
            throughput_per_min=throughput,
            eta_s=eta,
            tokens=tokens,
            cost_usd=exp.cost_usd,
            inference_timeout_s=timeout,
            alignment=alignment,
            running=running,
        )
        series.latest = reading
        return self._judge(series, exp, reading, now_dt)

    def _throughput(
        self, exp: Experiment, now: float, in_window: int, finished: int, series: ExperimentSeries
    ) -> float | None:
        """Attempts finished per minute over the window (shorter when the job is younger)."""
        began = _ts(exp.started_at)
        if began is None:
            starts = [_ts(t.started_at) for t in exp.trials if t.started_at is not None]
            began = min((s for s in starts if s is not None), default=None)
        span = self.window_s if began is None else min(self.window_s, now - began)
        if span >= 1.0 and in_window:
            return in_window / (span / 60.0)
        # No per-trial finish times (some sources): fall back to the growth of the series.
        old = next((s for s in series.samples if s.at >= now - self.window_s), None)
        if old is not None and now - old.at >= 1.0:
            return max(0, finished - old.finished) / ((now - old.at) / 60.0)
        return 0.0 if finished or exp.trials else None

    # -- the rules ---------------------------------------------------------------------
    def _judge(
        self, series: ExperimentSeries, exp: Experiment, reading: Reading, at: datetime
    ) -> list[MonitorWarning]:
        th = self.policy.monitor
        holding: dict[str, str] = {}
        samples = list(series.samples)

        # (a) dispatched count not decreasing while nothing finishes
        k = th.stuck_polls
        if exp.state != State.finished and len(samples) >= k:
            win = samples[-k:]
            if (
                all(s.dispatched > 0 for s in win)
                and all(b.dispatched >= a.dispatched for a, b in itertools.pairwise(win))
                and win[-1].finished == win[0].finished
            ):
                chain = " → ".join(str(s.dispatched) for s in win)
                holding["a"] = (
                    f"dispatched {chain} over {k} polls ({fmt_duration(win[-1].at - win[0].at)}), "
                    f"no trial finished (still {win[-1].finished}); idle ≥ {fmt_duration(th.idle_s)} "
                    "counts as dispatched"
                )

        # (b) new invalid errors on consecutive polls, beyond the error gate's share
        k = th.error_growth_polls
        if len(samples) > k:
            win = samples[-(k + 1) :]
            deltas = [b.invalid_errors - a.invalid_errors for a, b in itertools.pairwise(win)]
            new_err = win[-1].invalid_errors - win[0].invalid_errors
            new_fin = win[-1].finished - win[0].finished
            share = new_err / new_fin if new_fin > 0 else 1.0
            if all(d > 0 for d in deltas) and share > self.policy.error_fraction_max:
                chain = " → ".join(str(s.invalid_errors) for s in win)
                holding["b"] = (
                    f"invalid errors {chain}: new errors on {k} consecutive polls, "
                    f"{new_err} of {new_fin} finished attempts errored ({share:.0%} > "
                    f"{self.policy.error_fraction_max:.0%})"
                )

        # (c) pass rate far below the expected rate
        al = reading.alignment
        if (
            al is not None
            and al.compared >= th.pass_rate_min_finished
            and al.actual < th.pass_rate_ratio * al.expected
        ):
            ci = reading.pass_rate_ci
            ci_txt = f", 95% CI {ci[0]:.0%}–{ci[1]:.0%}" if ci else ""
            holding["c"] = (
                f"pass rate {al.actual:.0%} over {al.compared} finished attempts{ci_txt} vs expected "
                f"{al.expected:.0%} (baseline {al.baseline}): below {th.pass_rate_ratio:g} × expected"
            )

        # (d) a single trial past timeout_factor × the inference timeout
        limit = th.timeout_factor * reading.inference_timeout_s
        overdue_trial: str | None = None
        # in a finished job a trial without result.json is an orphan, which the audit reports
        overdue = [r for r in (reading.running if exp.state != State.finished else ()) if r.running_s > limit]
        if overdue:
            # one warning per experiment, naming the worst trial: a stuck sandbox pool makes many
            # trials overdue at once, and one line each would bury every other warning
            worst = max(overdue, key=lambda r: r.running_s)
            more = f" ({len(overdue)} trials past the limit)" if len(overdue) > 1 else ""
            overdue_trial = worst.path
            holding["d"] = (
                f"trial {worst.trial_name} running {fmt_duration(worst.running_s)}, "
                f"{th.timeout_factor:g} × the {fmt_duration(reading.inference_timeout_s)} timeout is "
                f"{fmt_duration(limit)}; idle {fmt_duration(worst.idle_s)}{more}"
            )

        new: list[MonitorWarning] = []
        for wkey, evidence in holding.items():
            if wkey in series.active:
                # keep the first firing time, refresh the evidence
                update: dict[str, object] = {"evidence": evidence}
                if wkey == "d":
                    update["trial"] = overdue_trial
                series.active[wkey] = series.active[wkey].model_copy(update=update)
                continue
            rule = wkey[0]
            w = MonitorWarning(
                id=exp.id,
                key=series.key,
                rule=rule,  # type: ignore[arg-type]
                at=at,
                evidence=evidence,
                trial=overdue_trial if rule == "d" else None,
            )
            series.active[wkey] = w
            series.fired.append(w)
            new.append(w)
        for wkey in set(series.active) - set(holding):
            del series.active[wkey]
        return new


def _align(
    baseline: Baseline, by_task: Mapping[str, list[float]], successes: float, finished: int
) -> Alignment | None:
    if baseline.tasks:
        exp_sum = act_sum = 0.0
        n = 0
        gaps: list[TaskGap] = []
        for task, outcomes in by_task.items():
            want = baseline.tasks.get(task)
            if want is None:
                continue
            exp_sum += want * len(outcomes)
            act_sum += sum(outcomes)
            n += len(outcomes)
            mean = sum(outcomes) / len(outcomes)
            if mean < want:
                gaps.append(TaskGap(task=task, expected=want, actual=mean, attempts=len(outcomes)))
        if n == 0:
            return None
        gaps.sort(key=lambda g: (g.actual - g.expected, g.task))
        return Alignment(
            baseline=baseline.name,
            expected=exp_sum / n,
            actual=act_sum / n,
            compared=n,
            expected_overall=baseline.aggregate,
            gaps=gaps[:10],
        )
    if baseline.pass_rate is None or finished == 0:
        return None
    return Alignment(
        baseline=baseline.name,
        expected=baseline.pass_rate,
        actual=successes / finished,
        compared=finished,
        expected_overall=baseline.pass_rate,
    )


_LOGGER = re.compile(r"^[A-Za-z_]\w*(?:\.\w+)+:\s+")  # "harbor.trial: " — the logger adds nothing
_LOG_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}[,.]?\d*\s+(?:[A-Z]+\s+)?")


def last_line(tail: bytes) -> str:
    for raw in reversed(tail.decode("utf-8", "replace").splitlines()):
        line = _LOGGER.sub("", _LOG_PREFIX.sub("", raw.strip()).strip())
        if line:
            return line[:160]
    return ""


async def probe_activity(
    exp: Experiment,
    fs: JobFS,
    *,
    log_name: str = "trial.log",
    max_trials: int = 256,
    tail_bytes: int = 2048,
) -> dict[str, Activity]:
    """Stat and tail the log of each running trial: its mtime is the trial's newest sign of life.

    A Harbor trial writes config.json once at start and result.json once at the end, so the
    log is where a live trial shows progress. Bounded by `max_trials` so a huge backlog of
    orphaned trial dirs cannot turn one poll into thousands of reads.
    """
    running = [t for t in exp.trials if t.status == TrialStatus.running and t.copy_of is None]
    running = running[:max_trials]
    sem = asyncio.Semaphore(16)

    async def one(t: Trial) -> tuple[str, Activity] | None:
        path = posixpath.join(exp.path, t.path, log_name)
        async with sem:
            try:
                st = await fs.stat(path)
                if st is None or st.is_dir:
                    return None
                data = await fs.read_bytes(path, max(0, st.size - tail_bytes), tail_bytes) if st.size else b""
            except (OSError, asyncio.TimeoutError):  # noqa: UP041 - asyncssh raises the old name
                return None
        return t.path, Activity(st.mtime, last_line(data))

    results = await asyncio.gather(*(one(t) for t in running))
    return dict(r for r in results if r is not None)


async def probe_snapshot(snapshot: Snapshot, fs: JobFS, **kw: int) -> dict[str, dict[str, Activity]]:
    out: dict[str, dict[str, Activity]] = {}
    for exp in snapshot.experiments:
        if exp.state != State.finished and exp.counts.running:
            out[experiment_key(exp)] = await probe_activity(exp, fs, **kw)  # type: ignore[arg-type]
    return out


def all_finished(readings: Iterable[Reading]) -> bool:
    rs = list(readings)
    return bool(rs) and all(r.state == State.finished for r in rs)
