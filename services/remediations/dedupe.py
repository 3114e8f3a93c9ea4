"""Score-blind dedupe of a Harbor job dir (DESIGN 3 and 3a).

Collapse staged copies that share a trial_name, then per task keep the earliest attempts
with a numeric reward and the earliest no-reward attempts only as needed to reach n_rep.
The reward's value never influences the choice, so dedupe cannot cherry-pick passes.
Surplus dirs are moved — never deleted — into `.evaldesk-quarantine/<timestamp>/`, with a
manifest that `undo_dedupe` reads to put everything back.
"""

from __future__ import annotations

import hashlib
import posixpath
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import BaseModel, Field

from services.core.attempts import select_keep
from services.core.journal import Journal, current_user
from services.core.models import Experiment, State
from services.core.policy import Policy
from services.harbor.stats import job_stats
from services.transport.fs import JobFS

QUARANTINE_DIR = ".evaldesk-quarantine"
MANIFEST = "dedupe_manifest.json"
AGGREGATES = ("result.json", "harbor_result.json")


class DedupeError(Exception):
    pass


class Removal(BaseModel):
    path: str
    trial_name: str
    task_name: str
    reason: str
    copy_of: str | None = None


class DedupePlan(BaseModel):
    id: str
    job_path: str
    n_rep: int
    before: int = Field(description="attempts on disk (unique trial names)")
    after: int = Field(description="attempts kept")
    remove: list[str] = Field(default_factory=list, description="surplus trial dirs, relative")
    keep: list[str] = Field(default_factory=list)
    copies: list[str] = Field(default_factory=list, description="collapsed staged copies, relative")
    reasons: list[Removal] = Field(default_factory=list, exclude=True)
    plan_hash: str = ""
    applied: bool = False
    quarantine: str | None = None

    @property
    def nothing_to_do(self) -> bool:
        return not self.remove and not self.copies

    def preview_lines(self) -> list[str]:
        if self.nothing_to_do:
            return [f"{self.id}: nothing to dedupe — {self.before} attempts, at most {self.n_rep} per task."]
        lines = [
            f"Job {self.id}: keep {self.after} of {self.before} attempts (n_rep = {self.n_rep}),"
            f" move {len(self.remove)} surplus and {len(self.copies)} staged copies",
            f"into {posixpath.join(self.job_path, QUARANTINE_DIR)}/<timestamp>/ with a manifest;"
            " the aggregate result.json is rebuilt from the kept trials (original kept).",
            "",
        ]
        for r in self.reasons:
            lines.append(f"  move {r.path}  ({r.reason})")
        return lines

    def to_batch_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "before": self.before, "after": self.after, "remove": self.remove,
            "keep": self.keep, "copies": self.copies, "applied": self.applied, "quarantine": self.quarantine,
        }


def plan_dedupe(exp: Experiment, policy: Policy | None = None) -> DedupePlan:
    policy = policy or Policy()
    n_rep = exp.n_rep or policy.default_n_rep
    kept, surplus, copies = select_keep(exp.trials, n_rep)
    reasons = [Removal(path=t.path, trial_name=t.trial_name, task_name=t.task_name, reason=why)
               for t, why in surplus]
    reasons += [Removal(path=c.path, trial_name=c.trial_name, task_name=c.task_name,
                        reason=f"staged copy of {c.copy_of}", copy_of=c.copy_of) for c in copies]
    remove = sorted(t.path for t, _ in surplus)
    plan_hash = hashlib.sha256(orjson.dumps([remove, sorted(c.path for c in copies)])).hexdigest()[:16]
    return DedupePlan(
        id=exp.id,
        job_path=exp.path,
        n_rep=n_rep,
        before=len(kept) + len(surplus),
        after=len(kept),
        remove=remove,
        keep=sorted(t.path for t in kept),
        copies=sorted(c.path for c in copies),
        reasons=reasons,
        plan_hash=plan_hash,
    )


def _safe_rel(rel: str) -> str:
    norm = posixpath.normpath(rel)
    if norm.startswith("/") or norm == ".." or norm.startswith("../") or norm in ("", "."):
        raise DedupeError(f"refusing a path outside the job dir: {rel!r}")
    return norm


async def apply_dedupe(
    plan: DedupePlan,
    exp: Experiment,
    fs: JobFS,
    journal: Journal,
    *,
    read_only: bool = False,
    now: datetime | None = None,
) -> DedupePlan:
    """Move the plan's surplus dirs into a quarantine and rebuild the aggregate; idempotent."""
    if read_only:
        raise DedupeError("read-only mode: dedupe --apply is disabled")
    if plan.nothing_to_do:
        return plan.model_copy(update={"applied": False})
    if exp.state in (State.running, State.pending, State.dispatched):
        raise DedupeError(f"{exp.id} is still {exp.state.value}; dedupe a job only after it finishes")
    # What was previewed is what runs: if the job changed since the plan was made (a rescan in
    # between, another tool), the person confirmed something else — stop and re-plan.
    current = plan_dedupe(exp.model_copy(update={"n_rep": plan.n_rep}))
    if current.plan_hash != plan.plan_hash:
        raise DedupeError(f"{exp.id} changed since this dedupe was previewed; nothing moved — "
                          "review the new preview and confirm again")
    now = now or datetime.now(UTC)
    stamp = now.strftime("%Y%m%dT%H%M%S%fZ")
    job = exp.path
    qdir = posixpath.join(job, QUARANTINE_DIR, stamp)
    await fs.makedirs(qdir)
    moves = [(_safe_rel(r.path), r) for r in plan.reasons]
    manifest: dict[str, Any] = {
        "version": 1,
        "tool": "evaldesk",
        "status": "in_progress",
        "plan_hash": plan.plan_hash,
        "created_at": now.isoformat(),
        "user": current_user(),
        "job_dir": job,
        "n_rep": plan.n_rep,
        "before": plan.before,
        "after": plan.after,
        "moved": [
            {"from": rel, "to": posixpath.join(QUARANTINE_DIR, stamp, "trials", rel), "reason": r.reason,
             "trial_name": r.trial_name, "task_name": r.task_name, "copy_of": r.copy_of}
            for rel, r in moves
        ],
        "aggregates": [],
    }
    manifest_path = posixpath.join(qdir, MANIFEST)
    # The manifest goes first so a crash mid-move still leaves a record undo can follow.
    await fs.write_bytes_atomic(manifest_path, orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    moved = 0
    for item in manifest["moved"]:
        src = posixpath.join(job, item["from"])
        dst = posixpath.join(job, item["to"])
        if await fs.stat(src) is None:
            item["skipped"] = "already gone"
            continue
        await fs.makedirs(posixpath.dirname(dst))
        await fs.rename(src, dst)
        moved += 1
    removed = set(plan.remove) | set(plan.copies)
    kept = [t for t in exp.trials if t.path not in removed and t.copy_of is None]
    for name in AGGREGATES:
        path = posixpath.join(job, name)
        if await fs.stat(path) is None:
            continue
        original = await fs.read_bytes(path)
        backup = posixpath.join(qdir, f"{name}.orig")
        await fs.write_bytes_atomic(backup, original)
        try:
            data = orjson.loads(original)
        except orjson.JSONDecodeError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        data["stats"] = job_stats(kept, data.get("n_total_trials"))
        await fs.write_bytes_atomic(path, orjson.dumps(data, option=orjson.OPT_INDENT_2))
        manifest["aggregates"].append({"file": name, "backup": posixpath.join(QUARANTINE_DIR, stamp, f"{name}.orig")})
    manifest["status"] = "applied"
    await fs.write_bytes_atomic(manifest_path, orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    journal.append(
        "dedupe",
        job,
        before={"attempts": plan.before, "paths": sorted(removed)},
        after={"attempts": plan.after, "quarantine": qdir},
        plan_hash=plan.plan_hash,
        moved=moved,
    )
    return plan.model_copy(update={"applied": True, "quarantine": qdir})


class UndoResult(BaseModel):
    job_path: str
    quarantine: str | None
    restored: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    message: str


async def latest_manifest(job: str, fs: JobFS) -> tuple[str, dict[str, Any]] | None:
    root = posixpath.join(job, QUARANTINE_DIR)
    if await fs.stat(root) is None:
        return None
    for stamp in sorted(await fs.list_dir(root), reverse=True):
        path = posixpath.join(root, stamp, MANIFEST)
        if await fs.stat(path) is None:
            continue
        try:
            data = orjson.loads(await fs.read_bytes(path))
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict) and data.get("status") in ("applied", "in_progress"):
            return posixpath.join(root, stamp), data
    return None


async def undo_dedupe(job: str, fs: JobFS, journal: Journal, *, read_only: bool = False) -> UndoResult:
    """Put back what the last dedupe moved, from its manifest; a second call finds nothing."""
    if read_only:
        raise DedupeError("read-only mode: undo is disabled")
    found = await latest_manifest(job, fs)
    if found is None:
        return UndoResult(job_path=job, quarantine=None, message="nothing to undo: no applied dedupe manifest")
    qdir, manifest = found
    restored, skipped = [], []
    for item in manifest.get("moved", []):
        rel = _safe_rel(str(item.get("from", "")))
        src = posixpath.join(job, _safe_rel(str(item.get("to", ""))))
        dst = posixpath.join(job, rel)
        if await fs.stat(src) is None:
            skipped.append(f"{rel}: not in the quarantine")
            continue
        if await fs.stat(dst) is not None:
            skipped.append(f"{rel}: something is already there; left in the quarantine")
            continue
        await fs.makedirs(posixpath.dirname(dst))
        await fs.rename(src, dst)
        restored.append(rel)
    for agg in manifest.get("aggregates", []):
        backup = posixpath.join(job, _safe_rel(str(agg["backup"])))
        if await fs.stat(backup) is not None:
            await fs.write_bytes_atomic(posixpath.join(job, _safe_rel(str(agg["file"]))), await fs.read_bytes(backup))
    manifest["status"] = "undone"
    manifest["undone_at"] = datetime.now(UTC).isoformat()
    await fs.write_bytes_atomic(posixpath.join(qdir, MANIFEST), orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    journal.append("undo-dedupe", job, before={"quarantine": qdir}, after={"restored": restored},
                   skipped=skipped)
    return UndoResult(job_path=job, quarantine=qdir, restored=restored, skipped=skipped,
                      message=f"restored {len(restored)} trial dir(s) from {qdir}")
