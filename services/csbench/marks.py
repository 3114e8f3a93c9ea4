"""What evaldesk's own records of csbench commands say, read back as facts of the campaign.

Every `csbench` command evaldesk runs goes through the write path, whose record is kept beside
the campaign (`<dir>/.evaldesk-quarantine/<record id>/`): its applied records are markers.

- `csbench_teardown`: csbench prints `{'destroyed': …}` and exits 0 even when terraform failed,
  so the marker is its printed dict, not the exit code;
- `csbench_fetch`: what `csbench status` said when the records were fetched — a fetched dir of
  a FAILED campaign holds only its completed tasks' records (the controller uploads no others);
- `csbench_submit` (kept in the `[csbench]` results dir): the campaign id csbench printed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from services.csbench.formats import StatusLine, parse_teardown
from services.csbench.model import FetchMark, SubmitMark, TeardownMark
from services.remediations.records import QUARANTINE_DIR, Record, records_in
from services.transport.fs import LocalFS

TEARDOWN = "csbench_teardown"
FETCH = "csbench_fetch"
SUBMIT = "csbench_submit"
_CAMPAIGN_LINE = re.compile(r"^(camp-[0-9a-f]{6,})$")


@dataclass
class Marks:
    teardown: TeardownMark | None = None
    teardown_problem: str | None = None
    fetch: FetchMark | None = None
    submits: list[SubmitMark] = field(default_factory=list)  # newest first


def _command_result(rec: Record) -> dict[str, Any]:
    result = next((r for _, r in sorted(rec.results.items()) if "exit_code" in r), None)
    if result is None:
        step = next((s for s in rec.plan.steps if s.kind == "external"), None)
        result = dict(getattr(step, "result", {}) or {})
    return result


def campaign_printed(stdout: str) -> str | None:
    """`csbench submit` prints the new campaign id as its last line (cli/prod.py)."""
    for line in reversed(stdout.strip().splitlines()):
        m = _CAMPAIGN_LINE.match(line.strip())
        if m:
            return m.group(1)
    return None


async def read_marks(path: str) -> Marks:
    marks = Marks()
    if not os.path.isdir(os.path.join(path, QUARANTINE_DIR)):
        return marks
    for rec in await records_in(LocalFS(), path):  # newest first
        if rec.action == TEARDOWN and marks.teardown is None:
            result = _command_result(rec)
            if rec.status == "applied":
                out = str(result.get("stdout_tail", ""))
                parsed = parse_teardown(out)
                marks.teardown = TeardownMark(
                    record_id=rec.id, at=rec.finished_at or rec.created_at, exit_code=result.get("exit_code"),
                    destroyed=parsed.destroyed if parsed else None,
                    residual_deleted=parsed.residual_deleted if parsed else [], output=out[-2000:])
            elif marks.teardown_problem is None and rec.status in ("failed", "rolled_back"):
                marks.teardown_problem = f"teardown record {rec.id} {rec.status}: {rec.error or 'no error recorded'}"
        elif rec.action == FETCH and rec.status == "applied" and marks.fetch is None:
            said = rec.plan.meta.get("status")
            status = None
            if isinstance(said, dict):
                try:
                    status = StatusLine.model_validate(said)
                except ValueError:
                    status = None
            marks.fetch = FetchMark(record_id=rec.id, at=rec.finished_at or rec.created_at, status=status)
        elif rec.action == SUBMIT and rec.status == "applied":
            result = _command_result(rec)
            meta = rec.plan.meta
            marks.submits.append(SubmitMark(
                record_id=rec.id, at=rec.finished_at or rec.created_at, plan=str(meta.get("plan", "")),
                plan_sha256=str(meta.get("plan_sha256", "")), config_sha256=str(meta.get("config_sha256", "")),
                campaign_id=campaign_printed(str(result.get("stdout_tail", ""))), exit_code=result.get("exit_code")))
    return marks


def read_marks_now(path: str) -> Marks:
    """`read_marks` for a caller that is not a coroutine (opening sources): run on its own
    loop in a short-lived thread, so it works whether or not a loop runs here."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, read_marks(path)).result()
