"""csbench campaigns as evaldesk Experiments, measured runs as Trials.

The mapping:

- **Experiment = campaign.** A run-plan campaign file (`campaigns/<id>.json`), a cloud campaign
  known by id (`csbench status`), or — for records no campaign file claims, such as a
  `fetch --dest` dir or `csbench run` output — the results dir itself (id: its campaign id when
  the dir is named `camp-…`, else the dir name).
- **Trial = measured run.** One record (`<task>-run-<id>.json`, `<task>--<run>.json`) is one
  trial; a task's repeats are its attempts, earliest first. Warm-up runs are not measurements:
  csbench leaves them out of a plan's statistics and `status_counts` (ops/runplan.py), and so
  does evaldesk (they are kept in `facts.warmups`). A task slot with no record yet is a trial
  only when something happened to it: a run in flight (`.progress/`), a run whose process died,
  or a task that failed before csbench wrote a record.
- **Expected = the measured runs the plans ask for**: per task its `repeat`, from csbench's
  aggregate of the plan, else the run-plan context its records carry, else the campaign's own
  plan file, else its `status_counts`; 1 when nothing says more. Valid counts each measured slot
  of a plan once, so valid never exceeds expected. A cloud campaign's expected is its task count
  (the controller runs each task once).
- **States.** csbench's words are kept (`state_raw`, a trial's class column); they map onto
  evaldesk's: a run `completed`/`unsupported` → valid (reward = the headline measurement),
  `failed`/`invalid`/`interrupted` → errored, in flight → running. A campaign is pending,
  running, finished (every task completed; DONE), or failed: a task failed; FAILED; killed (its
  run-plan process is gone: a run whose pid is dead, or a later campaign started in the same
  results dir while this one still says running — csbench's next run reaps the dead run's
  `.progress/` dir); stale (nothing in flight and nothing written for a while).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from statistics import fmean

from services.core.models import State, TrialCounts, TrialStatus
from services.csbench.attach import SlotRuns, attach, utc
from services.csbench.find import KIND
from services.csbench.formats import (
    OK_RECORD_STATUSES,
    PROGRESS_TERMINAL,
    CampaignFile,
    CampaignTask,
    Record,
    StatusLine,
)
from services.csbench.layout import STALE_AFTER_S, ProgressDir, RecordFile, ResultsDir
from services.csbench.model import (
    CampaignExperiment,
    CampaignFacts,
    FetchMark,
    Inspection,
    RunFacts,
    RunTrial,
)
from services.csbench.plans import PlanTask, run_plan_tasks

VIEW_DIR = "@runs"  # where a trial's files appear to the console (services.csbench.view)
CLOUD_ID = re.compile(r"^camp-[0-9a-f]{6,}$")
NO_CAMPAIGNS = "no campaigns found under {dir} — has a run-plan started?"  # csbench progress (cli/run.py)

ArtifactsFn = Callable[[Record], Inspection]


def no_artifacts(record: Record) -> Inspection:
    return Inspection()


def _safe_key(text: str) -> str:
    """A view-folder name: a run id as csbench makes them, anything else made path-safe."""
    return re.sub(r"[^A-Za-z0-9_.:+=-]", "_", text)[:120] or "_"


def run_from_record(rel: str, record: Record, artifacts: ArtifactsFn) -> RunFacts:
    seen = artifacts(record)
    return RunFacts(key=_safe_key(record.run.run_id or os.path.basename(rel)), task_status=record.status,
                    record=record, record_rel=rel, artifacts=seen.checks, artifacts_local=seen.local,
                    instance_ids=seen.instance_ids, plan_id=record.run_plan.plan_id)


def _with_progress(run: RunFacts, p: ProgressDir | None) -> RunFacts:
    if p is not None:
        run.progress, run.progress_rel = p.state, p.rel
    return run


def trial_of(run: RunFacts, task_id: str, slot: CampaignTask | None = None) -> RunTrial:
    rec = run.record
    status: TrialStatus
    reward = None
    rewards: dict[str, float] = {}
    exc_type = exc_msg = None
    if rec is not None:
        status = TrialStatus.valid if rec.status in OK_RECORD_STATUSES else TrialStatus.errored
        primary = rec.primary()
        if primary is not None and status == TrialStatus.valid:
            reward = primary[1].value
        rewards = {k: m.value for k, m in rec.measurements.items() if m.value is not None and m.unit == "ratio"}
        if rec.errors:
            first = rec.errors[0]
            exc_type = first.type or first.code or "error"
            exc_msg = f"{first.stage} {first.code}: {first.message}".strip()
    elif run.task_status == "running" and not run.stale:
        status = TrialStatus.running
    else:
        status = TrialStatus.errored
        exc_msg = run.task_error or run.stale or run.note
    started = rec.run.started_at if rec is not None else None
    finished = rec.run.finished_at if rec is not None else None
    if run.progress is not None:
        started = started or run.progress.started_at
    if slot is not None:
        started = started or slot.started_at
        finished = finished or (slot.ended_at if slot.status in ("completed", "failed") else None)
    return RunTrial(
        trial_name=run.key,
        task_name=task_id,
        path=f"{VIEW_DIR}/{run.key}",
        status=status,
        reward=reward,
        rewards=rewards,
        exception_type=exc_type,
        exception_message=exc_msg,
        failure_class=("killed" if run.stale and rec is None else run.task_status),
        started_at=started,
        finished_at=finished,
        model_name=(rec.provenance.scaffold or None) if rec is not None else None,
        agent_name=(rec.provenance.scaffold or None) if rec is not None else None,
        source=rec.suite_id if rec is not None else task_id.removeprefix("suite:"),
        run=run,
    )


def _number_attempts(trials: list[RunTrial]) -> None:
    per_task: dict[str, list[RunTrial]] = {}
    for t in trials:
        per_task.setdefault(t.task_name, []).append(t)
    far = datetime.max.replace(tzinfo=UTC)
    for group in per_task.values():
        group.sort(key=lambda t: (utc(t.started_at) or far, t.trial_name))
        for i, t in enumerate(group, 1):
            t.attempt = i


def join_names(values: list[str]) -> str | None:
    seen = list(dict.fromkeys(v for v in values if v))
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else ", ".join(seen[:3]) + (f" (+{len(seen) - 3})" if len(seen) > 3 else "")


def _measured_slot(t: RunTrial) -> tuple[str, ...]:
    """What one valid run stands for: its plan's measured slot (a slot re-run after an
    interruption is still one measurement), or the run itself outside a plan."""
    rec = t.run.record
    ref = rec.run_plan if rec is not None else None
    if ref is not None and ref.plan_id and ref.index is not None:
        return ("plan", ref.plan_id, str(ref.index))
    return ("run", t.trial_name)


def _build(exp_id: str, label: str, path: str, facts: CampaignFacts, trials: list[RunTrial], *,
           expected: int, state: State, state_raw: str, started: datetime | None, updated: datetime | None,
           counts_override: TrialCounts | None = None, problems: list[str] | None = None) -> CampaignExperiment:
    _number_attempts(trials)
    records = [t.run.record for t in trials if t.run.record is not None]
    valid = [t for t in trials if t.status == TrialStatus.valid]
    names = {p[0] for r in records if r.ok and (p := r.primary()) is not None}
    score = None
    eval_key = None
    if len(names) == 1:
        eval_key = next(iter(names))
        values = [t.reward for t in valid if t.reward is not None]
        score = fmean(values) if values else None
    counts = counts_override or TrialCounts(
        total=sum(1 for t in trials if t.status != TrialStatus.running),
        valid=len({_measured_slot(t) for t in valid}),
        errored=sum(1 for t in trials if t.status == TrialStatus.errored),
        running=sum(1 for t in trials if t.status == TrialStatus.running),
        expected=expected,
    )
    counts.invalid_errors = counts.errored
    per_task: dict[str, int] = {}
    for t in trials:
        per_task[t.task_name] = per_task.get(t.task_name, 0) + 1
    counts.max_attempts_per_task = max(per_task.values(), default=0)
    finished_times = [t.finished_at for t in trials if t.finished_at]
    finished = max(finished_times, default=None) if state in (State.finished, State.failed) else None
    return CampaignExperiment(
        id=exp_id,
        source=KIND,
        source_label=label,
        path=path,
        state=state,
        state_raw=state_raw,
        model=join_names([r.provenance.scaffold for r in records]),
        benchmark=join_names([r.suite_id for r in records] or [t.task_name.removeprefix("suite:") for t in trials]
                        or [s.task_id.removeprefix("suite:") for s in facts.tasks]),
        score=score,
        eval_key=eval_key,
        started_at=started or min((t.started_at for t in trials if t.started_at), default=None),
        updated_at=updated or max((ts for t in trials if (ts := t.finished_at or t.started_at) is not None),
                                  default=None),
        finished_at=finished,
        counts=counts,
        problems=list(problems or []),
        trials=list(trials),
        facts=facts,
    )


# ---- run-plan campaigns ----------------------------------------------------------------------

@dataclass
class SlotView:
    """One task slot as evaldesk reads it: its measured runs and whether it is really running."""

    runs: RunsOf
    warmups: list[RunFacts] = field(default_factory=list)
    expected: int = 1
    killed: str | None = None  # why its run-plan process is known to be gone
    stale: str | None = None  # why it is taken as no longer running


RunsOf = list[tuple[RunFacts, str, CampaignTask]]


def _ago(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 600 else f"{seconds / 60:.0f} min"


def _expected(s: SlotRuns, rd: ResultsDir, plan_tasks: list[PlanTask] | None) -> int:
    agg = rd.aggregates.get(s.plan_id or "")
    if agg is not None and agg.repeat:
        return agg.repeat
    for rf in s.records:
        if rf.record is not None and rf.record.run_plan.repeat:
            return max(1, rf.record.run_plan.repeat)
    if plan_tasks is not None:
        return max(1, plan_tasks[s.index - 1].repeat)
    if s.slot.status_counts:
        return max(1, sum(s.slot.status_counts.values()))
    return 1


def _later_campaign(camp: CampaignFile, rd: ResultsDir, since: datetime | None) -> CampaignFile | None:
    """Another campaign in the same results dir that started after this one last wrote. csbench
    writes whole seconds, so a start in the second of the last write counts as after it."""
    if since is None:
        return None
    floor = since.replace(microsecond=0)
    later = [c for _, c in rd.campaigns if c.campaign_id != camp.campaign_id
             and (st := utc(c.started_at)) is not None and st >= floor]
    return min(later, key=lambda c: utc(c.started_at) or since, default=None)


def _slot_view(s: SlotRuns, rd: ResultsDir, progress_of: dict[str, ProgressDir], artifacts: ArtifactsFn,
               plan_tasks: list[PlanTask] | None, last_write: datetime | None, now: datetime) -> SlotView:
    slot = s.slot
    placeholder = _safe_key(f"{s.campaign.campaign_id}.task{s.index}")
    view = SlotView(runs=[], expected=_expected(s, rd, plan_tasks))
    for rf in s.records:
        assert rf.record is not None
        run = _with_progress(run_from_record(rf.rel, rf.record, artifacts), progress_of.get(rf.record.run.run_id))
        if rf.record.warmup:
            view.warmups.append(run)
        else:
            view.runs.append((run, slot.task_id, slot))
    measured = [r for r, _, _ in view.runs]
    if slot.status == "failed" and all(r.record is not None and r.record.ok for r in measured):
        why = "the task failed before csbench wrote a record" if not measured else (
            f"the task failed after {len(measured)} run(s) had completed")
        view.runs.append((RunFacts(key=placeholder, task_status="failed", task_error=slot.error, note=why,
                                   plan_id=s.plan_id), slot.task_id, slot))
    elif slot.status == "completed" and not s.records:
        view.runs.append((RunFacts(key=placeholder, task_status="completed", plan_id=s.plan_id,
                                   record_problem=f"no record of plan {slot.plan_id} in this results dir",
                                   note="completed, but its record is not in this results dir"), slot.task_id, slot))
    if slot.status != "running":
        return view
    inflight = [p for p in s.progress if p.state.status not in PROGRESS_TERMINAL]
    done = f"{len(measured)} of {view.expected} measured run(s) of {slot.task_id} had finished"
    for p in inflight:
        view.runs.append((RunFacts(key=_safe_key(p.state.run_id), task_status="killed" if p.stale else "running",
                                   progress=p.state, progress_rel=p.rel, stale=p.stale, plan_id=s.plan_id,
                                   note=None if p.stale else f"running ({p.state.stage or 'starting'})"),
                          slot.task_id, slot))
    live = [p for p in inflight if not p.stale]
    if live:
        return view
    later = _later_campaign(s.campaign, rd, last_write)
    dead = [p for p in inflight if p.stale]
    if dead:
        view.killed = f"{slot.task_id}: run {dead[0].state.run_id}: {dead[0].stale}; {done}"
        return view
    if later is not None:
        view.killed = (f"{slot.task_id} says running, but no run of it is in flight (its .progress/ dir is gone: "
                       f"csbench's next run in this results dir reaps a dead run's dir) and campaign "
                       f"{later.campaign_id} started here at {utc(later.started_at):%Y-%m-%d %H:%M:%S} UTC, after "
                       f"this campaign's last write ({last_write:%H:%M:%S}); {done}")
        return view
    idle = (now - last_write).total_seconds() if last_write is not None else None
    if idle is not None and idle > STALE_AFTER_S:
        view.stale = (f"{slot.task_id} says running, but no run of it is in flight (.progress/ has none) and "
                      f"nothing was written for {_ago(idle)}; {done}")
        return view
    view.runs.append((RunFacts(key=placeholder, task_status="running", plan_id=s.plan_id,
                               note="running: between two runs, or csbench has not written its progress file yet"),
                      slot.task_id, slot))
    return view


def _last_write(camp: CampaignFile, rel: str, rd: ResultsDir, slots: list[SlotRuns]) -> datetime | None:
    """When csbench last wrote anything of this campaign, by its own clocks: the campaign's
    `updated_at` (rewritten on every task transition), and within a running task — which does
    not rewrite it — its runs' end times and its runs in flight's `updated_at` (file times only
    where csbench wrote no time)."""
    times = [t for t in (utc(camp.updated_at),) if t is not None]
    if not times and rel in rd.campaign_mtimes:
        times.append(datetime.fromtimestamp(rd.campaign_mtimes[rel], UTC))
    for s in slots:
        if s.slot.status != "running":
            continue
        for rf in s.records:
            end = utc(rf.record.run.finished_at) if rf.record is not None else None
            times.append(end or datetime.fromtimestamp(rf.mtime, UTC))
        for p in s.progress:
            at = utc(p.state.updated_at) or (datetime.fromtimestamp(p.mtime, UTC) if p.mtime else None)
            if at is not None:
                times.append(at)
    return max(times, default=None)


def campaign_state(camp: CampaignFile, views: list[SlotView], rd: ResultsDir, last_write: datetime | None,
                   now: datetime) -> tuple[State, str, str | None]:
    """(state, csbench's word or evaldesk's, why it is killed or stale)."""
    statuses = [t.status for t in camp.tasks]
    if not statuses:
        return State.pending, "empty", None
    killed = [v.killed for v in views if v.killed]
    if killed:
        return State.failed, "killed", killed[0]
    stale = [v.stale for v in views if v.stale]
    if stale:
        return State.failed, "stale", stale[0]
    runs = [r for v in views for r, _, _ in v.runs]
    failed = any(s == "failed" for s in statuses) or any(
        r.record is not None and not r.record.ok for r in runs) or any(
        r.task_status == "completed" and r.record is None for r in runs)
    if "running" in statuses:
        return State.running, "running", None
    if "pending" in statuses:
        n = statuses.count("pending")
        later = _later_campaign(camp, rd, last_write)
        if later is not None:
            return State.failed, "killed", (f"{n} task(s) still pending and none running, and campaign "
                                            f"{later.campaign_id} started in this results dir after this one's "
                                            "last write: its run-plan process is gone")
        idle = (now - last_write).total_seconds() if last_write is not None else None
        if idle is not None and idle > STALE_AFTER_S:
            return State.failed, "stale", (f"{n} task(s) still pending and none running; the campaign file has "
                                           f"not changed for {_ago(idle)} (the run-plan process ended)")
        if all(s == "pending" for s in statuses):
            return State.pending, "pending", None
        return State.running, "running", None
    return (State.failed, "failed", None) if failed else (State.finished, "completed", None)


def run_plan_experiment(camp: CampaignFile, rel: str, slots: list[SlotRuns], rd: ResultsDir,
                        progress_of: dict[str, ProgressDir], label: str, artifacts: ArtifactsFn,
                        now: datetime) -> CampaignExperiment:
    ids = [t.task_id for t in camp.tasks]
    plan_tasks = run_plan_tasks(camp.plan_file, rd.path, ids)
    last_write = _last_write(camp, rel, rd, slots)
    views = [_slot_view(s, rd, progress_of, artifacts, plan_tasks, last_write, now) for s in slots]
    state, raw, stale = campaign_state(camp, views, rd, last_write, now)
    triples = [x for v in views for x in v.runs]
    records = [r.record for r, _, _ in triples if r.record is not None]
    facts = CampaignFacts(
        origin="run-plan", campaign_id=camp.campaign_id, results_dir=rd.path, platform=camp.platform,
        domain=camp.domain, plan_file=camp.plan_file, tasks=list(camp.tasks), stale=stale,
        expected_runs=[v.expected for v in views], warmups=[w for v in views for w in v.warmups],
        cloud=False, expect_real=False if records and all(r.environment.mode == "local" for r in records) else None,
    )
    if stale is not None and raw == "killed":
        for r, _, _ in triples:
            if r.record is None and r.task_status == "running":
                r.task_status, r.stale = "killed", stale
    trials = [trial_of(r, task, slot) for r, task, slot in triples]
    problems = [f"{rel}: task {tid} is listed {ids.count(tid)} times; csbench run-plan tracks a task by its id, so "
                "only its first slot changes (later ones stay pending, and earlier runs lose their slot)"
                for tid in dict.fromkeys(ids) if ids.count(tid) > 1]
    return _build(camp.campaign_id, label, rd.path, facts, trials, expected=sum(v.expected for v in views),
                  state=state, state_raw=raw, started=camp.started_at, updated=camp.updated_at, problems=problems)


# ---- records no campaign file claims (a fetched dir, `csbench run`, a lost campaign file) ------

def _loose_plans(rd: ResultsDir, records: list[RecordFile], now: datetime) -> tuple[int, list[str], str | None]:
    """(expected measured runs, what is known of their plans, why they look unfinished)."""
    by_plan: dict[str, list[Record]] = {}
    singles = 0
    for rf in records:
        if rf.record is None or rf.record.warmup:
            continue
        plan_id = rf.record.run_plan.plan_id
        if plan_id:
            by_plan.setdefault(plan_id, []).append(rf.record)
        else:
            singles += 1
    expected = singles
    notes: list[str] = []
    unfinished = None
    for plan_id, recs in sorted(by_plan.items()):
        agg = rd.aggregates.get(plan_id)
        repeat = (agg.repeat if agg is not None else None) or max(
            (r.run_plan.repeat for r in recs if r.run_plan.repeat), default=None) or len(recs)
        expected += repeat
        if agg is not None:
            notes.append(f"plan {plan_id}: csbench's aggregate says {repeat} measured run(s), status "
                         + (", ".join(f"{k} {v}" for k, v in sorted(agg.status_counts.items())) or "none"))
        elif unfinished is None:
            unfinished = (f"plan {plan_id} has {len(recs)} of {repeat} measured run(s) and no aggregate (csbench "
                          "writes it when the plan's last run ends)")
    return expected, notes, unfinished


def dir_experiment(rd: ResultsDir, records: list[RecordFile], label: str, artifacts: ArtifactsFn, now: datetime,
                   *, campaign_id: str | None = None, problems: list[str] | None = None,
                   fetch: FetchMark | None = None, progress_of: dict[str, ProgressDir] | None = None,
                   in_flight: list[ProgressDir] | None = None) -> CampaignExperiment:
    name = os.path.basename(rd.path.rstrip("/")) or rd.path
    cid = campaign_id or (name if CLOUD_ID.match(name) else None)
    problems = list(problems or [])
    if fetch is not None and fetch.status is not None and rd.fetched:
        return fetched_experiment(rd, label, artifacts, cid or name, fetch, problems)
    progress_of = progress_of or {}
    measured = [rf for rf in records if rf.record is not None and not rf.record.warmup]
    warm = [rf for rf in records if rf.record is not None and rf.record.warmup]
    runs = [_with_progress(run_from_record(rf.rel, rf.record, artifacts), progress_of.get(rf.record.run.run_id))
            for rf in measured if rf.record is not None]
    live = [p for p in in_flight or [] if p.state.status not in PROGRESS_TERMINAL and not p.stale]
    for p in live:
        runs.append(RunFacts(key=_safe_key(p.state.run_id), task_status="running", progress=p.state,
                             progress_rel=p.rel, note=f"running ({p.state.stage or 'starting'})"))
    trials = [trial_of(r, r.record.identity.task_id if r.record else (r.progress.task_id if r.progress else "?"))
              for r in runs]
    cloud = rd.fetched and any(rf.record.environment.mode == "cloud" for rf in measured if rf.record)
    any_failed = any(not rf.record.ok for rf in measured if rf.record)
    expected, plan_notes, unfinished = _loose_plans(rd, records, now)
    expected = max(expected, len(live))
    if not rd.fetched:
        said = NO_CAMPAIGNS.format(dir=rd.path)
        where = (f"no campaign file under {rd.path}/campaigns (csbench progress: \"{said}\")"
                 if not rd.campaigns else "no campaign file in campaigns/ lists them")
        problems.insert(0, f"{len(measured) + len(warm)} record(s) read without their campaign: {where}"
                        + (f"; {'; '.join(plan_notes)}" if plan_notes else ""))
    facts = CampaignFacts(
        origin="fetched" if rd.fetched else "run-plan", campaign_id=cid, results_dir=rd.path,
        platform=join_names([rf.record.identity.adapter for rf in measured if rf.record]) or "",
        domain=join_names([rf.record.identity.domain for rf in measured if rf.record]) or "",
        cloud=cloud, expect_real=True if cloud else None, fetch=fetch,
        warmups=[run_from_record(rf.rel, rf.record, artifacts) for rf in warm if rf.record is not None],
    )
    state, raw = (State.failed, "failed") if any_failed else (State.finished, "fetched" if rd.fetched else "completed")
    if live:
        state, raw = State.running, "running"
    elif unfinished and not rd.fetched and not any_failed:
        newest = max((rf.mtime for rf in records), default=None)
        idle = now.timestamp() - newest if newest is not None else None
        if idle is not None and idle > STALE_AFTER_S:
            state, raw = State.failed, "stale"
            facts.stale = f"{unfinished}, none is in flight, and nothing was written for {_ago(idle)}"
        else:
            state, raw = State.running, "running"
    return _build(cid or name, label, rd.path, facts, trials, expected=expected, state=state, state_raw=raw,
                  started=None, updated=None, problems=problems)


# ---- cloud campaigns known by id --------------------------------------------------------------

def cloud_state(status: StatusLine | None) -> tuple[State, str, str | None]:
    if status is None:
        return State.pending, "unknown", None
    if status.done == "DONE":
        return State.finished, "DONE", None
    if status.done == "FAILED":
        return State.failed, "FAILED", None
    if status.stale:
        age = f"{status.heartbeat_age_s:.0f} s" if status.heartbeat_age_s is not None else "?"
        return State.failed, "stale", (f"the controller's last heartbeat is {age} old (stale past 30 s): it "
                                       "stopped or hung before writing DONE/FAILED")
    c = status.counts
    if not c:
        return State.pending, "no manifest", None
    if c.get("running") or c.get("completed") or c.get("failed"):
        return State.running, "running", None
    return State.pending, "pending", None


def cloud_experiment(cid: str, path: str, label: str, facts: CampaignFacts, rd: ResultsDir | None,
                     artifacts: ArtifactsFn, problems: list[str]) -> CampaignExperiment:
    """A campaign by id: its counts from `csbench status`, its runs from the fetched records
    (the controller uploads records of completed tasks only), the running and failed tasks the
    records do not cover as rows without a record."""
    status = facts.status
    runs: list[RunFacts] = []
    task_of: dict[str, str] = {}
    if rd is not None:
        for rf in rd.records:
            if rf.record is None:
                continue
            run = run_from_record(rf.rel, rf.record, artifacts)
            if rf.record.warmup:
                facts.warmups.append(run)
                continue
            runs.append(run)
            task_of[run.key] = rf.record.identity.task_id
    c = status.counts if status is not None else {}
    n_failed_records = sum(1 for r in runs if r.record is not None and not r.record.ok)
    if status is not None and c.get("running") and not status.done and not status.stale:
        key = _safe_key(f"{cid}.running")
        runs.append(RunFacts(key=key, task_status="running",
                             note=f"running on the controller (current task {status.current_task or '?'})"))
        task_of[key] = status.current_task or "?"
    for i in range(max(0, c.get("failed", 0) - n_failed_records)):
        key = _safe_key(f"{cid}.failed{i + 1}")
        runs.append(RunFacts(key=key, task_status="failed",
                             note="failed on the controller; csbench uploads records of completed tasks only, so "
                                  "its error is in the campaign's manifest on OSS, not in a fetched file"))
        task_of[key] = "?"
    trials = [trial_of(r, task_of.get(r.key, "?")) for r in runs]
    state, raw, stale = cloud_state(status)
    if stale:
        facts.stale = stale
        for t in trials:
            if t.status == TrialStatus.running:
                t.status = TrialStatus.errored
    expected = status.total if status is not None and status.total else len(trials)
    override = None
    if status is not None and status.total:
        override = TrialCounts(
            total=c.get("completed", 0) + c.get("failed", 0), valid=c.get("completed", 0),
            errored=c.get("failed", 0), running=c.get("running", 0), expected=expected,
        )
    return _build(cid, label, path, facts, trials, expected=expected, state=state, state_raw=raw, started=None,
                  updated=None, counts_override=override, problems=problems)


def fetched_experiment(rd: ResultsDir, label: str, artifacts: ArtifactsFn, cid: str, fetch: FetchMark,
                       problems: list[str]) -> CampaignExperiment:
    """A `fetch --dest` dir evaldesk fetched: the campaign as `csbench status` said when it
    fetched (a FAILED campaign stays failed though its fetched records all completed: the
    controller uploads completed tasks only)."""
    when = f"{fetch.at:%Y-%m-%d %H:%M} UTC" if fetch.at else "?"
    facts = CampaignFacts(origin="fetched", campaign_id=cid, results_dir=rd.path, cloud=True, expect_real=True,
                          status=fetch.status, fetch=fetch)
    records = [rf.record for rf in rd.records if rf.record is not None]
    facts.platform = join_names([r.identity.adapter for r in records]) or ""
    facts.domain = join_names([r.identity.domain for r in records]) or ""
    problems = [f"csbench status as it was when evaldesk fetched these records ({when}, record {fetch.record_id})",
                *problems]
    return cloud_experiment(cid, rd.path, label, facts, rd, artifacts, problems)


def results_dir_experiments(rd: ResultsDir, label: str, artifacts: ArtifactsFn, now: datetime, *,
                            campaign_id: str | None = None, fetch: FetchMark | None = None) -> list[CampaignExperiment]:
    """Every experiment one results dir holds: its campaigns, and one for what they do not claim."""
    att = attach(rd)
    found = [run_plan_experiment(camp, rel, att.slots[rel], rd, att.progress_of, label, artifacts, now)
             for rel, camp in rd.campaigns]
    loose_live = [p for p in att.loose_progress if p.state.status not in PROGRESS_TERMINAL and not p.stale]
    if att.loose or loose_live or (not rd.campaigns and rd.problems):
        found.append(dir_experiment(rd, att.loose, label, artifacts, now, campaign_id=campaign_id,
                                    problems=rd.problems, fetch=fetch, progress_of=att.progress_of,
                                    in_flight=loose_live))
    elif rd.problems and found:
        found[-1].problems += rd.problems
    return found
