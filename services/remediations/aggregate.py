"""Rebuild a Harbor job's `result.json` from its trials when the file does not parse.

Harbor rewrites the aggregate on every trial start and end; a kill at the wrong moment or a
full disk leaves it truncated, and then nothing can say whether the job is over or what it
scored. The trials still hold every figure: the rebuilt file carries `stats` computed from
them (as Harbor computes them), the planned count from the job config, and start/finish times
from the trials. The unreadable original is kept in the quarantine; undo puts it back.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from datetime import datetime
from typing import Any

from services.core.config import Config
from services.core.models import AGGREGATE_UNREADABLE, Experiment, TrialStatus, experiment_key
from services.core.source import Source, source_host
from services.harbor.stats import job_stats
from services.remediations.records import QUARANTINE_DIR, Plan, new_record_id
from services.remediations.steps import MAX_READ_BYTES, StepContext, WriteFileStep

ACTION = "rebuild_aggregate"


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt is not None else None


def rebuilt(exp: Experiment) -> dict[str, Any]:
    trials = [t for t in exp.trials if t.copy_of is None]
    starts = [t.started_at for t in trials if t.started_at is not None]
    ends = [t.finished_at for t in trials if t.finished_at is not None]
    running = any(t.status == TrialStatus.running for t in trials)
    return {
        "started_at": _iso(min(starts, default=None)),
        "updated_at": _iso(max(ends, default=None)),
        "finished_at": None if running else _iso(max(ends, default=None)),
        # the planned count is the job's own figure; a guess from the benchmark size is not written down
        "n_total_trials": exp.planned_trials,
        "stats": job_stats(trials, exp.counts.expected),
        "rebuilt_by": "evaldesk, from the trial dirs: the original did not parse",
    }


async def plan_for(exp: Experiment, source: Source, config: Config, now: datetime | None = None) -> Plan:
    fs = source.fs()
    path = posixpath.join(exp.path, "result.json")
    old = await fs.sha256(path, MAX_READ_BYTES)
    content = json.dumps(rebuilt(exp), indent=2, ensure_ascii=False) + "\n"
    new = hashlib.sha256(content.encode("utf-8")).hexdigest()
    digest = hashlib.sha256(f"{old}:{new}".encode()).hexdigest()
    record_id = new_record_id(ACTION, now, digest)
    qdir = posixpath.join(exp.path, QUARANTINE_DIR, record_id)
    blocked = None
    if exp.state_raw != AGGREGATE_UNREADABLE:
        blocked = f"{exp.id}'s result.json is readable: nothing to rebuild"
    steps = [] if blocked and old is not None else [WriteFileStep(
        path=path, content=content, new_sha256=new, old_sha256=old,
        backup=posixpath.join(qdir, "files", "result.json.orig"), label="result.json")]
    c = exp.counts
    preview = [
        f"Job {exp.id}: its result.json does not parse. Rebuild it from the {c.total + c.running} trial dirs:",
        f"  stats from the trials ({c.valid} valid, {c.errored} errored), start and finish times from the"
        " trials; n_total_trials is left unset (only Harbor knows what it planned).",
        f"The unreadable original is kept at {QUARANTINE_DIR}/{record_id}/files/result.json.orig; undo puts it back.",
    ]
    return Plan(
        id=record_id, action=ACTION, title=f"Rebuild result.json of {exp.id}", target=exp.path,
        host=source_host(source), experiment=experiment_key(exp), input_hash=digest, steps=list(steps),
        preview=preview, lock_dir=exp.path, record_dir=qdir, blocked=blocked,
        meta={"id": exp.id, "journal": {"file": "result.json"}},
    )


def context(source: Source, config: Config) -> StepContext:
    return StepContext(source.fs())
