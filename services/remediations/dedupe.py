"""Score-blind dedupe of a Harbor job dir (DESIGN 3 and 3a), as a plan for the write path.

Collapse staged copies that share a trial_name, then per task keep the earliest attempts
with a numeric reward and the earliest no-reward attempts only as needed to reach n_rep
(`services.core.attempts.select_keep`). The reward's value never influences the choice, so
dedupe cannot cherry-pick passes. Surplus dirs are moved — never deleted — into
`.evaldesk-quarantine/<record id>/trials/`, the aggregate `result.json` (and Harbor's
`harbor_result.json`) are rebuilt from the kept trials with the originals kept beside them,
and the record in that dir is the manifest `undo` follows.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from datetime import datetime
from typing import Any

import orjson
from pydantic import BaseModel, Field

from services.core.attempts import select_keep
from services.core.config import Config
from services.core.models import Experiment, State, experiment_key
from services.core.paths import UnsafePath, inside, safe_rel
from services.core.policy import Policy
from services.core.source import Source, source_host
from services.harbor.stats import job_stats
from services.remediations.errors import WriteRefused
from services.remediations.records import QUARANTINE_DIR, Plan, new_record_id
from services.remediations.steps import MoveStep, Step, StepContext, WriteFileStep, describe_error
from services.transport.fs import READ_TIMEOUT_S, JobFS, NotRegularFile, TooLarge

ACTION = "dedupe"
AGGREGATES = ("result.json", "harbor_result.json")

# an aggregate is rebuilt in memory (parsed, then written back): one larger than this is left
# as it is, with a note, rather than read whole (Harbor's are a few MB for 100k trials)
MAX_AGGREGATE_BYTES = 32 * 1024 * 1024


class Removal(BaseModel):
    path: str
    trial_name: str
    task_name: str
    reason: str
    copy_of: str | None = None


class DedupePlan(BaseModel):
    """Which attempts stay and which go: the selection, before any file is looked at."""

    id: str
    job_path: str
    n_rep: int
    before: int = Field(description="attempts on disk (unique trial names)")
    after: int = Field(description="attempts kept")
    remove: list[str] = Field(default_factory=list, description="surplus trial dirs, relative")
    keep: list[str] = Field(default_factory=list)
    copies: list[str] = Field(default_factory=list, description="collapsed staged copies, relative")
    reasons: list[Removal] = Field(default_factory=list, exclude=True)

    @property
    def nothing_to_do(self) -> bool:
        return not self.remove and not self.copies


def plan_dedupe(exp: Experiment, policy: Policy | None = None) -> DedupePlan:
    """The selection over the experiment as scanned. Pure."""
    policy = policy or Policy()
    n_rep = exp.n_rep or policy.default_n_rep
    kept, surplus, copies = select_keep(exp.trials, n_rep)
    reasons = [Removal(path=t.path, trial_name=t.trial_name, task_name=t.task_name, reason=why)
               for t, why in surplus]
    reasons += [Removal(path=c.path, trial_name=c.trial_name, task_name=c.task_name,
                        reason=f"staged copy of {c.copy_of}", copy_of=c.copy_of) for c in copies]
    return DedupePlan(
        id=exp.id,
        job_path=exp.path,
        n_rep=n_rep,
        before=len(kept) + len(surplus),
        after=len(kept),
        remove=sorted(t.path for t, _ in surplus),
        keep=sorted(t.path for t in kept),
        copies=sorted(c.path for c in copies),
        reasons=reasons,
    )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def _read_aggregate(fs: JobFS, exp: Experiment, name: str, notes: list[str]) -> bytes | None:
    """An aggregate's bytes, or None (with a note) when it is absent or not safe to rewrite:
    a symlink, a fifo or device, a file over the size limit, one that cannot be read in time."""
    path = posixpath.join(exp.path, name)
    st = await fs.lstat(path)
    if st is None:
        return None
    if st.is_link:
        notes.append(f"{name} is not rebuilt: it is a symlink, and evaldesk never writes through one")
        return None
    try:
        return await fs.read_regular(path, MAX_AGGREGATE_BYTES)
    except (NotRegularFile, TooLarge) as exc:
        notes.append(f"{name} is not rebuilt: {exc}")
    except TimeoutError:
        notes.append(f"{name} is not rebuilt: it could not be read in {READ_TIMEOUT_S:.0f} s")
    except OSError as exc:
        notes.append(f"{name} is not rebuilt: {describe_error(exc)}")
    return None


def _rebuilt(original: bytes, kept: list[Any]) -> str:
    try:
        data = orjson.loads(original)
    except orjson.JSONDecodeError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    data["stats"] = job_stats(kept, data.get("n_total_trials"))
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


async def build_plan(exp: Experiment, fs: JobFS, policy: Policy | None = None, *,
                     host: str | None = None, experiment: str | None = None,
                     now: datetime | None = None) -> Plan:
    """The dedupe of one job dir as write-path steps: moves into the quarantine, then the
    aggregates rebuilt. Reads the aggregates (bounded); writes nothing."""
    blocked = None
    if exp.state in (State.running, State.pending, State.dispatched):
        blocked = f"{exp.id} is still {exp.state.value}; dedupe a job only after it finishes"
    sel = plan_dedupe(exp, policy)
    notes: list[str] = []
    originals: dict[str, bytes] = {}
    if not sel.nothing_to_do:
        for name in AGGREGATES:
            data = await _read_aggregate(fs, exp, name, notes)
            if data is not None:
                originals[name] = data
    digest = hashlib.sha256(json.dumps(
        [sel.n_rep, sel.remove, sel.copies, sel.keep, sorted((n, _sha(b)) for n, b in originals.items())],
        ensure_ascii=True).encode()).hexdigest()
    # the record id follows from the clock and what was read: the same plan previews the same way
    record_id = new_record_id(ACTION, now, digest)
    qdir = posixpath.join(exp.path, QUARANTINE_DIR, record_id)
    steps: list[Step] = []
    try:
        for r in sorted(sel.reasons, key=lambda r: r.path):
            rel = safe_rel(r.path)
            steps.append(MoveStep(src=inside(exp.path, rel), dst=inside(qdir, "trials", rel), label=rel))
    except UnsafePath as exc:
        raise WriteRefused(f"{exp.id}: {exc}") from None
    writes: list[WriteFileStep] = []
    if steps:
        removed = set(sel.remove) | set(sel.copies)
        kept = [t for t in exp.trials if t.path not in removed and t.copy_of is None]
        for name, original in originals.items():
            content = _rebuilt(original, kept)
            writes.append(WriteFileStep(
                path=posixpath.join(exp.path, name), content=content,
                new_sha256=_sha(content.encode("utf-8")), old_sha256=_sha(original),
                backup=posixpath.join(qdir, "files", f"{name}.orig"), label=name,
            ))
    steps += writes
    moved = sorted(set(sel.remove) | set(sel.copies))
    # a trial added after the dedupe shows up in one of these; undo then refuses, naming it
    watch = sorted({exp.path} | {posixpath.dirname(inside(exp.path, safe_rel(c))) for c in sel.copies}) if steps else []
    preview = _preview(sel, exp, record_id, notes, writes)
    if blocked and steps:
        preview += ["", f"Cannot apply now: {blocked}."]
    return Plan(
        id=record_id,
        action=ACTION,
        title=f"Dedupe {exp.id}",
        target=exp.path,
        host=host,
        experiment=experiment,
        input_hash=digest,
        steps=steps,
        preview=preview,
        lock_dir=exp.path,
        record_dir=qdir,
        blocked=blocked,
        watch=watch,
        meta={
            "id": exp.id, "before": sel.before, "after": sel.after, "remove": sel.remove, "keep": sel.keep,
            "copies": sel.copies, "n_rep": sel.n_rep, "quarantine": qdir,
            "journal": {
                "before": {"attempts": sel.before, "trial_dirs": moved,
                           "aggregates": {w.label: w.old_sha256 for w in writes}},
                "after": {"attempts": sel.after,
                          "trial_dirs": [f"{QUARANTINE_DIR}/{record_id}/trials/{rel}" for rel in moved],
                          "aggregates": {w.label: w.new_sha256 for w in writes}},
            },
        },
    )


def _preview(sel: DedupePlan, exp: Experiment, record_id: str, notes: list[str],
             writes: list[WriteFileStep]) -> list[str]:
    if sel.nothing_to_do:
        return [f"{exp.id}: nothing to dedupe — {sel.before} attempts, at most {sel.n_rep} per task."]
    rebuilt = ", ".join(w.label for w in writes) or "no aggregate"
    lines = [
        f"Job {exp.id}: keep {sel.after} of {sel.before} attempts (n_rep = {sel.n_rep}),"
        f" move {len(sel.remove)} surplus and {len(sel.copies)} staged copies",
        f"into {QUARANTINE_DIR}/{record_id}/ (nothing is deleted; undo puts it back);"
        f" rebuild {rebuilt} from the kept trials, originals kept beside them.",
        "",
    ]
    lines += [f"  move {r.path}  ({r.reason})" for r in sorted(sel.reasons, key=lambda r: r.path)]
    lines += [f"  note: {n}" for n in notes]
    return lines


def batch_json(plan: Plan, applied: bool) -> dict[str, Any]:
    """DESIGN 7's dedupe plan shape."""
    m = plan.meta
    return {
        "id": m.get("id"), "before": m.get("before"), "after": m.get("after"), "remove": m.get("remove", []),
        "keep": m.get("keep", []), "copies": m.get("copies", []), "applied": applied,
        "quarantine": m.get("quarantine") if applied else None, "record": plan.id if applied else None,
    }


async def plan_for(exp: Experiment, source: Source, config: Config, now: datetime | None = None) -> Plan:
    return await build_plan(exp, source.fs(), config.policy, host=source_host(source),
                            experiment=experiment_key(exp), now=now)


def context(source: Source, config: Config) -> StepContext:
    return StepContext(source.fs())
