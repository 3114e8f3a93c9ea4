"""Trace remediations: upload a run's traces and link them from its row; free the local run dir.

Upload: a dataset of the last episode of each trial, streamed to a temporary JSONL file one
trial at a time (never all episodes in memory), committed to the run's dataset, then the run's
own row gets the dataset's URL as its trace URL — never a second row, never the score. The
upload has no inverse (a dataset commit stays); linking has one.

Free disk: once the traces are on the Hub and the row is registered (both re-checked when
planning and again under the lock), the run dir moves into `.evaldesk-quarantine/` beside it —
a move, never a delete — and undo moves it back.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from services.core.config import Config
from services.core.models import Experiment
from services.core.plain import dump
from services.core.source import Source, source_host
from services.core.xdg import state_dir
from services.leaderboard.enrichment import complete
from services.leaderboard.rows import FINISHED, repo_id_from_url
from services.leaderboard.safety import why_not
from services.leaderboard.traces import DATA_FILE, HubClient, TracesError, expected_repo, write_last_episodes
from services.remediations.leaderboard import (
    LeaderboardRemediation,
    Reading,
    make_plan,
    row_step,
    rows_hash,
)
from services.remediations.records import QUARANTINE_DIR, Plan
from services.remediations.steps import ExternalStep, MoveStep, Step, StepContext, register_handler

UPLOAD = "hf_upload"


class UploadHandler:
    """Build the last-episode dataset from the run dir and commit it (no inverse)."""

    def _hub(self, ctx: StepContext) -> HubClient:
        hub = ctx.resources.get("hub")
        if not isinstance(hub, HubClient):
            raise TracesError("no Hub client in this step's context")
        return hub

    async def state(self, step: ExternalStep, ctx: StepContext) -> Literal["done", "not_done", "conflict"]:
        files = await self._hub(ctx).files(step.args["repo_id"])
        return "done" if files is not None and step.args["path_in_repo"] in files else "not_done"

    async def do(self, step: ExternalStep, ctx: StepContext) -> dict[str, Any]:
        from services.remediations.registry import rescan

        source = ctx.resources.get("source")
        if source is None:
            raise TracesError("the run's source is not open: cannot read its trials")
        exp = await rescan(source, step.args["experiment"])
        hub = self._hub(ctx)
        folder = state_dir() / "uploads"
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="traces-", suffix=".jsonl", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                n = await write_last_episodes(ctx.fs, exp, out, ctx.resources.get("on_progress"))
            size = os.path.getsize(tmp)
            commit = await hub.upload(step.args["repo_id"], Path(tmp), step.args["path_in_repo"],
                                      f"evaldesk: last episode of each trial of {exp.id}")
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        step.result = {"repo_id": step.args["repo_id"], "file": step.args["path_in_repo"], "rows": n, "bytes": size,
                       "commit": commit}
        return step.result

    async def undo_check(self, step: ExternalStep, ctx: StepContext) -> str | None:
        return f"{step.label}: an upload stays on the Hub (it has no inverse)"

    async def undo(self, step: ExternalStep, ctx: StepContext) -> None:
        raise TracesError(f"{step.label} cannot be undone")


register_handler(UPLOAD, UploadHandler())


def source_meta(source: Source | None) -> dict[str, Any]:
    """Enough to open the run's source again for an undo from the journal."""
    if source is None:
        return {}
    return {"source_root": str(getattr(source, "root", "") or ""), "source_host": source_host(source)}


class UploadTraces(LeaderboardRemediation):
    ACTION = "upload_traces"

    async def build(self, exp: Experiment, source: Source | None, config: Config, r: Reading,
                    now: datetime | None) -> Plan:
        m = r.match
        row = m.row
        title = f"Upload and link the traces of {exp.id}"
        hub = HubClient.from_config(config)
        linked = repo_id_from_url(row.trace_url) if row else None
        repo = linked or expected_repo(exp, config)
        status = r.view.traces.get(repo) if repo else None
        inputs: list[Any] = [rows_hash(m.shown()), repo, status.model_dump() if status else None,
                             dump(exp.counts)]
        if row is not None and linked and status is not None and status.ok:
            return make_plan(self.ACTION, title, exp, r, [], [f"{exp.id}: traces are on {linked} and linked from "
                             f"row {row.id[:8]}; nothing to do."], inputs=inputs, now=now)
        blocked = None
        if row is None:
            blocked = m.ambiguous or (f"the run has no leaderboard row of yours ({m.looked()}): register it first "
                                      "(traces link onto its row)")
        else:
            blocked = why_not(row, r.usernames, m.pair_rows)
        if not blocked and row is not None and row.status != FINISHED:
            blocked = f"row {row.id[:8]} is {row.status}, not Finished"
        if not blocked and not complete(r.report):
            blocked = f"the run is not complete (verdict {r.report.verdict}): upload traces of a complete run only"
        if not blocked and repo is None:
            blocked = "no dataset to upload to: set [traces] org in the config"
        files = await hub.files(repo) if repo and not blocked else None
        have = files is not None and DATA_FILE in files
        if not blocked and not have and not hub.can_write:
            blocked = f"uploading needs a Hub token: export {config.traces.token_env}=… ([traces] token_env)"
        steps: list[Step] = []
        preview = [f"Traces of {exp.id} → {hub.url(repo) if repo else '?'}"]
        n = sum(1 for t in exp.trials if t.copy_of is None and t.status.value != "running")
        if repo and not have:
            steps.append(ExternalStep(handler=UPLOAD, label=f"upload {n} trial(s) to {repo}", inverse=False,
                                      args={"repo_id": repo, "path_in_repo": DATA_FILE, "experiment": exp.id,
                                            "trials": n}))
            preview.append(f"  upload {DATA_FILE}: the last episode of each of {n} trial(s), streamed one trial at a"
                           " time (the dataset is created if missing; an upload cannot be undone)")
        elif repo:
            preview.append(f"  {repo} already holds {DATA_FILE}: no upload")
        if row is not None and repo:
            url = hub.url(repo)
            if row.trace_url != url:
                steps.append(row_step("update", "jobs", {"id": row.id}, f"link the traces from row {row.id[:8]}",
                                      values={"trace_url": url}, expect={"trace_url": row.trace_url}))
                preview.append(f"  set row {row.id[:8]}'s trace URL: {row.trace_url or '(none)'} → {url} "
                               "(the score and every other field stay; no second row)")
        inputs.append(have)
        return make_plan(self.ACTION, title, exp, r, steps, preview, inputs=inputs, blocked=blocked, now=now,
                         meta={"row": row.id if row else None, "repo": repo, **source_meta(source)})


class FreeDisk(LeaderboardRemediation):
    ACTION = "free_disk"

    async def build(self, exp: Experiment, source: Source | None, config: Config, r: Reading,
                    now: datetime | None) -> Plan:
        m = r.match
        row = m.row
        title = f"Free the disk of {exp.id}"
        linked = repo_id_from_url(row.trace_url) if row else None
        hub = HubClient.from_config(config)
        status = await hub.status(linked) if linked else None
        inputs: list[Any] = [rows_hash(m.shown()), status.model_dump() if status else None, exp.path]
        blocked = None
        if row is None:
            blocked = m.ambiguous or (f"the run has no leaderboard row of yours ({m.looked()}): register it and "
                                      "upload its traces first")
        else:
            blocked = why_not(row, r.usernames, m.pair_rows)
        if not blocked and row is not None and row.status != FINISHED:
            blocked = f"row {row.id[:8]} is {row.status}, not Finished"
        if not blocked and (status is None or not status.ok):
            blocked = ("the traces are not verified on the Hub ("
                       + (status.error or f"{linked} is missing or empty" if status else "no trace URL") + ")")
        if not blocked and not complete(r.report):
            blocked = f"the run is not complete (verdict {r.report.verdict})"
        parent = posixpath.dirname(exp.path.rstrip("/"))
        name = posixpath.basename(exp.path.rstrip("/"))
        plan_id_probe = make_plan(self.ACTION, title, exp, r, [], [], inputs=inputs, now=now).id
        dst = posixpath.join(parent, QUARANTINE_DIR, plan_id_probe, name)
        steps: list[Step] = [MoveStep(src=exp.path, dst=dst, label=exp.id)]
        preview = [f"Move the run dir {exp.path}",
                   f"  into {posixpath.join(parent, QUARANTINE_DIR, plan_id_probe)}/ — a move on the same disk, "
                   "never a delete; undo moves it back. Delete the quarantine yourself when you are sure.",
                   f"  verified first: row {row.id[:8] if row else '?'} Finished, traces {linked or '?'} "
                   f"({status.n_files if status else 0} file(s))"]
        plan = make_plan(self.ACTION, title, exp, r, steps, preview, inputs=inputs, blocked=blocked, now=now,
                         meta={"row": row.id if row else None, **source_meta(source), "moved_to": dst})
        plan.lock_dir = parent
        plan.host = source_host(source) if source is not None else None
        plan.target = exp.path
        return plan


UPLOAD_TRACES = UploadTraces()
FREE_DISK = FreeDisk()

