"""What evaldesk's own records of csbench commands say, read back as facts of the campaign.

Every `csbench` command evaldesk runs goes through the write path, whose record is kept beside
the campaign (`<dir>/.evaldesk-quarantine/<record id>/`): its applied records are markers.

- `csbench_teardown`: csbench prints `{'destroyed': …}` and exits 0 even when terraform failed,
  so the marker is its printed dict, not the exit code;
- `csbench_fetch`: what `csbench status` said when the records were fetched — a fetched dir of
  a FAILED campaign holds only its completed tasks' records (the controller uploads no others).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from services.csbench.formats import StatusLine, parse_teardown
from services.csbench.model import FetchMark, TeardownMark
from services.remediations.records import QUARANTINE_DIR, Record, records_in
from services.transport.fs import LocalFS

TEARDOWN = "csbench_teardown"
FETCH = "csbench_fetch"


@dataclass
class Marks:
    teardown: TeardownMark | None = None
    teardown_problem: str | None = None
    fetch: FetchMark | None = None


def _command_result(rec: Record) -> dict[str, Any]:
    result = next((r for _, r in sorted(rec.results.items()) if "exit_code" in r), None)
    if result is None:
        step = next((s for s in rec.plan.steps if s.kind == "external"), None)
        result = dict(getattr(step, "result", {}) or {})
    return result


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
    return marks

