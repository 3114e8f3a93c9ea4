"""csbench campaigns as evaldesk Experiments, task runs as Trials.

The mapping:

- **Experiment = campaign.** A run-plan campaign file (`campaigns/<id>.json`), a cloud campaign
  known by id (`csbench status`), or — for records no campaign file claims, such as a
  `fetch --dest` dir — the results dir itself (id: its campaign id when the dir is named
  `camp-…`, else the dir name). Expected = the campaign's task count (the status counts for a
  cloud campaign, the records for a fetched dir).
- **Trial = task run.** One record (`<task>-run-<id>.json`, `<task>--<run>.json`) is one
  trial; repeats and warm-ups of a task are its attempts, earliest first. A task slot with no
  record yet is a trial only when something happened to it: running (from `.progress/`), or
  failed before csbench wrote a record (the campaign file's error). Pending slots are only
  counted.
- **States.** csbench's words are kept (`state_raw`, a trial's class column); they map onto
  evaldesk's: a run `completed`/`unsupported` → valid (reward = the headline measurement,
  `swe-bench.resolved`), `failed`/`invalid`/`interrupted` → errored, `running` → running. A
  campaign is pending, running, finished (every task completed; DONE), or failed (a task
  failed; FAILED; or stale: nothing is running any more though tasks are unfinished — the
  controller stopped heartbeating, or the run-plan process is gone).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from statistics import fmean

from services.core.models import State, TrialCounts, TrialStatus
from services.csbench.formats import OK_RECORD_STATUSES, CampaignFile, CampaignTask, Record, StatusLine
from services.csbench.layout import STALE_AFTER_S, ResultsDir
from services.csbench.model import CampaignExperiment, CampaignFacts, Inspection, RunFacts, RunTrial

KIND = "csbench"
VIEW_DIR = "@runs"  # where a trial's files appear to the console (services.csbench.view)
CLOUD_ID = re.compile(r"^camp-[0-9a-f]{6,}$")

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
                    instance_ids=seen.instance_ids)


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
        failure_class=("stale" if run.stale and rec is None else run.task_status),
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
        group.sort(key=lambda t: ((t.started_at.astimezone(UTC) if t.started_at else far), t.trial_name))
        for i, t in enumerate(group, 1):
            t.attempt = i


def join_names(values: list[str]) -> str | None:
    seen = list(dict.fromkeys(v for v in values if v))
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else ", ".join(seen[:3]) + (f" (+{len(seen) - 3})" if len(seen) > 3 else "")


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
        valid=len(valid),
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

def campaign_runs(camp: CampaignFile, rd: ResultsDir, artifacts: ArtifactsFn,
                  claimed: set[str]) -> list[tuple[RunFacts, str, CampaignTask]]:
    """The runs of each task slot, in slot order; `claimed` collects the record paths used."""
    by_plan: dict[str, list[tuple[str, Record]]] = {}
    by_run: dict[str, str] = {}
    for rf in rd.records:
        if rf.record is None:
            continue
        by_run[rf.record.run.run_id] = rf.rel
        plan_id = rf.record.run_plan.plan_id
        if plan_id:
            by_plan.setdefault(plan_id, []).append((rf.rel, rf.record))
    out: list[tuple[RunFacts, str, CampaignTask]] = []
    for i, slot in enumerate(camp.tasks, 1):
        placeholder = _safe_key(f"{camp.campaign_id}.task{i}")
        linked = by_plan.get(slot.plan_id or "", [])
        for rel, record in linked:
            claimed.add(rel)
            out.append((run_from_record(rel, record, artifacts), slot.task_id, slot))
        if linked:
            continue
        if slot.status == "running":
            live = [p for run_id, p in rd.progress.items()
                    if p.state.task_id == slot.task_id and p.state.status == "running" and run_id not in by_run
                    and (slot.started_at is None or p.state.started_at is None
                         or p.state.started_at >= slot.started_at.replace(microsecond=0))]
            for p in live:
                out.append((RunFacts(key=_safe_key(p.state.run_id), task_status="running", progress=p.state,
                                     progress_rel=p.rel, stale=p.stale), slot.task_id, slot))
            if not live:
                out.append((RunFacts(key=placeholder, task_status="running",
                                     note="running: csbench has not written its progress file yet"),
                            slot.task_id, slot))
        elif slot.status == "failed":
            out.append((RunFacts(key=placeholder, task_status="failed", task_error=slot.error,
                                 note="the task failed before csbench wrote a record"), slot.task_id, slot))
        elif slot.status == "completed":
            out.append((RunFacts(key=placeholder, task_status="completed",
                                 record_problem=f"no record of plan {slot.plan_id} in this results dir",
                                 note="completed, but its record is not in this results dir"), slot.task_id, slot))
    for run, _, _ in out:
        if run.record is not None and run.record.run.run_id in rd.progress:
            p = rd.progress[run.record.run.run_id]
            run.progress, run.progress_rel = p.state, p.rel
    return out


def campaign_state(camp: CampaignFile, runs: list[RunFacts], now: datetime) -> tuple[State, str, str | None]:
    """(state, csbench's word, why it is stale)."""
    statuses = [t.status for t in camp.tasks]
    if not statuses:
        return State.pending, "empty", None
    stale_runs = [r for r in runs if r.stale]
    if stale_runs:
        return State.failed, "stale", f"{stale_runs[0].key}: {stale_runs[0].stale}"
    failed = any(s == "failed" for s in statuses) or any(
        r.record is not None and not r.record.ok for r in runs) or any(
        r.task_status == "completed" and r.record is None for r in runs)
    if "running" in statuses:
        return State.running, "running", None
    if all(s == "pending" for s in statuses):
        return State.pending, "pending", None
    if "pending" in statuses:
        updated = camp.updated_at
        idle = (now - updated).total_seconds() if updated is not None else None
        if idle is not None and idle > STALE_AFTER_S:
            n = statuses.count("pending")
            return State.failed, "stale", (f"{n} task(s) still pending and none running; the campaign file has not "
                                           f"changed for {idle:.0f} s (the run-plan process ended)")
        return State.running, "running", None
    return (State.failed, "failed", None) if failed else (State.finished, "completed", None)


def run_plan_experiment(camp: CampaignFile, rel: str, rd: ResultsDir, label: str, artifacts: ArtifactsFn,
                        claimed: set[str], now: datetime) -> CampaignExperiment:
    triples = campaign_runs(camp, rd, artifacts, claimed)
    runs = [r for r, _, _ in triples]
    state, raw, stale = campaign_state(camp, runs, now)
    records = [r.record for r in runs if r.record is not None]
    facts = CampaignFacts(
        origin="run-plan", campaign_id=camp.campaign_id, results_dir=rd.path, platform=camp.platform,
        domain=camp.domain, plan_file=camp.plan_file, tasks=list(camp.tasks), stale=stale,
        cloud=False, expect_real=False if records and all(r.environment.mode == "local" for r in records) else None,
    )
    trials = [trial_of(r, task, slot) for r, task, slot in triples]
    ids = [t.task_id for t in camp.tasks]
    problems = [f"{rel}: task {tid} is listed {ids.count(tid)} times; csbench run-plan tracks a task by its id, so "
                "only its first slot changes (later ones stay pending, and earlier runs lose their slot)"
                for tid in dict.fromkeys(ids) if ids.count(tid) > 1]
    return _build(camp.campaign_id, label, rd.path, facts, trials, expected=len(camp.tasks), state=state,
                  state_raw=raw, started=camp.started_at, updated=camp.updated_at, problems=problems)


# ---- records no campaign file claims (a fetched dir, loose runs) ----------------------------

def dir_experiment(rd: ResultsDir, records: list[tuple[str, Record]], label: str, artifacts: ArtifactsFn,
                   *, campaign_id: str | None = None, problems: list[str] | None = None) -> CampaignExperiment:
    runs = [run_from_record(rel, rec, artifacts) for rel, rec in records]
    for run in runs:
        if run.record is not None and run.record.run.run_id in rd.progress:
            p = rd.progress[run.record.run.run_id]
            run.progress, run.progress_rel = p.state, p.rel
    trials = [trial_of(r, r.record.identity.task_id if r.record else "?") for r in runs]
    name = os.path.basename(rd.path.rstrip("/")) or rd.path
    cid = campaign_id or (name if CLOUD_ID.match(name) else None)
    cloud = rd.fetched and any(r.environment.mode == "cloud" for _, r in records)
    any_failed = any(not r.ok for _, r in records)
    facts = CampaignFacts(
        origin="fetched" if rd.fetched else "run-plan", campaign_id=cid, results_dir=rd.path,
        platform=join_names([r.identity.adapter for _, r in records]) or "",
        domain=join_names([r.identity.domain for _, r in records]) or "",
        cloud=cloud, expect_real=True if cloud else None,
    )
    raw = "fetched" if rd.fetched else ("failed" if any_failed else "completed")
    return _build(cid or name, label, rd.path, facts, trials, expected=len(runs),
                  state=State.failed if any_failed else State.finished, state_raw=raw, started=None, updated=None,
                  problems=problems)


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
            if rf.record is not None:
                run = run_from_record(rf.rel, rf.record, artifacts)
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
