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
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from services.core.alignment import outcome as _outcome
from services.core.baselines import Baseline, pick_baseline
from services.core.models import Experiment, Snapshot, State, TrialStatus, experiment_key
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
                        # Rock says so itself; elsewhere a started trial silent for idle_s counts
                        dispatched=idle >= th.idle_s or t.state_raw == "dispatched",
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
