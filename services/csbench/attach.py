"""Which task slot of which campaign each run in a results dir belongs to — the one matcher.

csbench ties runs to a plan by the plan id each record carries
(`extensions.core.run_plan.plan_id`, the key its own resume reads: ops/runplan.py
`_completed_slots`), but writes a task slot's `plan_id` into the campaign file only when the
task ends (core/campaign/manifest.py `mark_done`). So while a repeated task runs, or after its
run-plan was killed, its finished runs name a plan no slot names yet. Such a plan is adopted by
the slot that csbench itself was running it for: the same task id, started (`mark_running`)
before the plan's first run, the latest such slot when several campaigns ran the same task in
one results dir, and only one plan per slot (one `execute_plan` per task).

A run still in flight has no record yet, only `.progress/<run_id>/state.json`, which names its
task but no plan: it goes to the latest running slot of that task that started before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from services.csbench.formats import TERMINAL_TASK_STATES, CampaignFile, CampaignTask
from services.csbench.layout import ProgressDir, RecordFile, ResultsDir

# the campaign's timestamps have whole seconds, a record's too: a run may look up to a second
# older than the slot that started it
_SLACK = timedelta(seconds=1)


def utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass
class SlotRuns:
    campaign_rel: str
    campaign: CampaignFile
    index: int  # 1-based, in the campaign's task order
    slot: CampaignTask
    plan_id: str | None = None
    adopted: bool = False  # the plan id was read from its records, not from the campaign file
    records: list[RecordFile] = field(default_factory=list)
    progress: list[ProgressDir] = field(default_factory=list)  # runs in flight (no record yet)

    @property
    def started(self) -> datetime | None:
        return utc(self.slot.started_at)


@dataclass
class Attachment:
    slots: dict[str, list[SlotRuns]] = field(default_factory=dict)  # campaign file rel → its slots
    loose: list[RecordFile] = field(default_factory=list)  # records no slot claims
    loose_progress: list[ProgressDir] = field(default_factory=list)  # runs in flight no slot claims
    progress_of: dict[str, ProgressDir] = field(default_factory=dict)  # run id of a record → its progress


def _first_start(records: list[RecordFile]) -> datetime | None:
    starts = [s for rf in records if rf.record is not None and (s := utc(rf.record.run.started_at)) is not None]
    return min(starts, default=None)


def _latest_before(slots: list[SlotRuns], when: datetime | None) -> SlotRuns | None:
    fits = [s for s in slots if when is None or s.started is None or s.started <= when + _SLACK]
    far = datetime.min.replace(tzinfo=UTC)
    return max(fits, key=lambda s: s.started or far, default=None)


def attach(rd: ResultsDir) -> Attachment:
    out = Attachment()
    every: list[SlotRuns] = []
    for rel, camp in rd.campaigns:
        slots = [SlotRuns(rel, camp, i, slot, plan_id=slot.plan_id) for i, slot in enumerate(camp.tasks, 1)]
        out.slots[rel] = slots
        every += slots
    by_plan: dict[str, list[RecordFile]] = {}
    record_runs: set[str] = set()
    for rf in rd.records:
        if rf.record is None:
            continue
        record_runs.add(rf.record.run.run_id)
        plan_id = rf.record.run_plan.plan_id
        if plan_id:
            by_plan.setdefault(plan_id, []).append(rf)
        else:
            out.loose.append(rf)
    for s in every:
        if s.plan_id:
            s.records = by_plan.pop(s.plan_id, [])
    # plans no slot names yet, earliest first, each to the slot that was running it
    open_slots = [s for s in every if not s.plan_id and s.slot.status in ("running", *TERMINAL_TASK_STATES)
                  and s.slot.status != "completed"]
    for plan_id, records in sorted(by_plan.items(), key=lambda kv: (_first_start(kv[1]) or datetime.max.replace(
            tzinfo=UTC), kv[0])):
        task_ids = {rf.record.identity.task_id for rf in records if rf.record is not None}
        candidates = [s for s in open_slots if s.slot.task_id in task_ids and not s.adopted]
        slot = _latest_before(candidates, _first_start(records))
        if slot is None:
            out.loose += records
            continue
        slot.plan_id, slot.adopted, slot.records = plan_id, True, records
    # runs in flight: a progress dir with no record yet
    running = [s for s in every if s.slot.status == "running"]
    for run_id, p in rd.progress.items():
        if run_id in record_runs:
            out.progress_of[run_id] = p
            continue
        slot = _latest_before([s for s in running if s.slot.task_id == p.state.task_id], utc(p.state.started_at))
        if slot is None:
            out.loose_progress.append(p)
        else:
            slot.progress.append(p)
    return out
