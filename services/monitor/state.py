"""The live monitor's state: a bounded time series per experiment, fed one poll at a time.

Each poll of a source yields Experiments; `MonitorState.feed` turns every one into a compact
`Sample`, recomputes the figures a person watches (throughput, ETA, pass rate with its
confidence interval, actual vs expected) and asks `services.monitor.rules` which of the four
"fake execution" rules hold. A rule yields a `MonitorWarning` when it starts to hold; it stays
active (see `warnings_for`) until its condition clears. Nothing here reads the clock or the
disk by itself: time comes from an injected clock and file activity from
`services.monitor.activity`, so the logic is deterministic under test.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from services.core.alignment import outcome as _outcome
from services.core.baselines import Baseline, pick_baseline
from services.core.models import Experiment, Snapshot, State, Trial, TrialStatus, experiment_key
from services.core.policy import Policy
from services.core.times import utc_now
from services.monitor.activity import Activity
from services.monitor.figures import COUNT_STATES, Reading, RunningTrial, Sample, align, wilson_interval
from services.monitor.rules import MonitorWarning, rules_holding

Clock = Callable[[], datetime]


def _ts(dt: datetime | None) -> float | None:
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.astimezone(UTC)
    return dt.timestamp()




@dataclass
class ExperimentSeries:
    key: str
    exp_id: str
    samples: deque[Sample]
    latest: Reading | None = None
    active: dict[str, MonitorWarning] = field(default_factory=dict)
    fired: deque[MonitorWarning] = field(default_factory=lambda: deque(maxlen=200))
    first_seen: dict[str, float] = field(default_factory=dict)
    # what the last poll's trials added up to, kept current by the source's delta (see _tally)
    fed: Experiment | None = None
    successes: float = 0.0
    valid_sum: float = 0.0
    finish_times: array[float] = field(default_factory=lambda: array("d"))  # sorted
    running_trials: dict[str, Trial] = field(default_factory=dict)
    copies: set[str] = field(default_factory=set)  # staged copies, left out of the sums

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

        baseline = pick_baseline(exp, self.baselines)
        per_task = baseline is not None and bool(baseline.tasks)
        by_task: dict[str, list[float]] = {}
        if per_task:
            by_task = {}
            for t in exp.trials:
                if t.copy_of is None and t.status != TrialStatus.running:
                    by_task.setdefault(t.task_name, []).append(_outcome(t))
        self._tally(series, exp)
        successes, valid_sum = series.successes, series.valid_sum
        window_start = now - self.window_s
        finish = series.finish_times
        finished_in_window = bisect_right(finish, now) - bisect_right(finish, window_start)
        running: list[RunningTrial] = []
        live_paths: set[str] = set()
        for t in series.running_trials.values():
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
                    # Rock says so itself; elsewhere a started trial silent for idle_s counts
                    dispatched=idle >= th.idle_s or t.state_raw == "dispatched",
                    activity=act.line if act else "",
                )
            )
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
        alignment = align(baseline, by_task, successes, finished) if baseline else None
        reading = Reading(
            key=key,
            id=exp.id,
            at=now_dt,
            state=exp.state,
            counts={s: sample.count(s) for s in COUNT_STATES},
            finished=finished,
            expected=c.expected,
            invalid_errors=c.invalid_errors,
            score=exp.score,
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

    def _tally(self, series: ExperimentSeries, exp: Experiment) -> None:
        """Bring the series' sums up to `exp`: from the source's delta when it extends the last
        poll (work in proportion to the change), else with one pass over the trials."""
        delta = exp._delta
        if exp is series.fed:
            return
        if delta is not None and delta[0] is series.fed and series.fed is not None:
            # (previous, trials gone or replaced, trials new or changed, trials whose copy mark may
            # have moved): what was counted comes out as it was counted, then goes back in as it is
            _, gone, changed, touched = delta
            fresh = {id(t) for t in changed}
            for t in gone:
                self._uncount(series, t)
            for t in touched:
                if id(t) not in fresh:
                    self._uncount(series, t)
                    self._count(series, t)
            for t in changed:
                self._count(series, t)
        else:
            series.successes = series.valid_sum = 0.0
            series.running_trials, series.copies = {}, set()
            times: list[float] = []
            for t in exp.trials:
                self._count(series, t, times)
            times.sort()
            series.finish_times = array("d", times)
        series.fed = exp

    @staticmethod
    def _uncount(series: ExperimentSeries, t: Trial) -> None:
        """Take out what `t` added when it was counted (Trials never change their figures in
        place; only the copy mark moves, and the copies set remembers it)."""
        path = t.path
        if series.running_trials.get(path) is t:
            del series.running_trials[path]
            return
        if path in series.copies:
            series.copies.discard(path)
            return
        if t.status == TrialStatus.running:
            return
        o = _outcome(t)
        series.successes -= o
        if t.status == TrialStatus.valid:
            series.valid_sum -= o
        at = _ts(t.finished_at) or t.mtime
        if at is not None:
            i = bisect_left(series.finish_times, at)
            if i < len(series.finish_times) and series.finish_times[i] == at:
                del series.finish_times[i]

    @staticmethod
    def _count(series: ExperimentSeries, t: Trial, times: list[float] | None = None) -> None:
        if t.copy_of is not None:
            series.copies.add(t.path)
            return
        status = t.status
        if status == TrialStatus.running:
            series.running_trials[t.path] = t
            return
        o = _outcome(t)
        series.successes += o
        if status == TrialStatus.valid:
            series.valid_sum += o
        at = _ts(t.finished_at) or t.mtime
        if at is not None:
            if times is not None:
                times.append(at)  # a full pass sorts them once at its end
            else:
                insort(series.finish_times, at)

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
        holding, overdue_trial = rules_holding(list(series.samples), exp, reading, self.policy)
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


def all_finished(readings: Iterable[Reading]) -> bool:
    rs = list(readings)
    return bool(rs) and all(r.state == State.finished for r in rs)
