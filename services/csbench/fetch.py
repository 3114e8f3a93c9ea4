"""Fetch a cloud campaign's records: `csbench fetch CID --config C --dest DIR`, through the
write path (it writes files on this disk).

The record keeps what `csbench status` said at that moment: a fetched dir holds only the
completed tasks' records, so without it a FAILED campaign would read as finished.

csbench writes one `<task_id>--<run_id>.json` per completed task (and a `.series.parquet`
beside the ones that have a time series) into DIR, which is the campaign's dir evaldesk reads:
`<[csbench] results_dir>/<campaign id>`, or the fetched dir the campaign was opened from. The
command runs in DIR's parent with `--dest` relative, so the preview is the exact command.
"""

from __future__ import annotations

import os
from datetime import datetime

from services.core.config import Config
from services.core.models import Experiment
from services.core.source import Source
from services.csbench.actions import cloud_campaign, command_plan, need_settings
from services.csbench.actions import context as _context
from services.csbench.model import RunTrial
from services.remediations.records import Plan
from services.remediations.steps import StepContext

ACTION = "csbench_fetch"


async def plan_for(exp: Experiment, source: Source, config: Config, now: datetime | None = None) -> Plan:
    camp, cid = cloud_campaign(exp, "fetch")
    s = need_settings(config, "fetch")
    dest = exp.path.rstrip("/")
    cwd, rel = os.path.dirname(dest), os.path.basename(dest)
    argv = s.argv("fetch", cid, "--dest", rel)
    facts = camp.facts
    have = sorted(t.trial_name for t in camp.trials if isinstance(t, RunTrial) and t.run.record is not None)
    completed = facts.status.counts.get("completed", 0) if facts.status else None
    intro = [f"Fetch the records of csbench campaign {cid} into {dest}"
             + (f" ({completed} task(s) completed, {len(have)} record(s) here now)." if completed is not None else ".")]
    after = ["csbench overwrites a record it fetches again with the same bytes; nothing else in the dir changes.",
             "A command cannot be undone."]
    if facts.status is not None and facts.status.done == "FAILED":
        after.insert(0, f"{cid} FAILED: only its completed tasks' records exist to fetch (the controller uploads no "
                        "others); evaldesk keeps what csbench status says now with this fetch, so the fetched dir "
                        "reads as failed, not finished.")
    read = {"have": have, "completed": completed, "done": facts.status.done if facts.status else None,
            "counts": facts.status.counts if facts.status else None}
    plan = command_plan(ACTION, f"Fetch {cid}", camp, argv, cwd, intro, after, read, now)
    if facts.status is not None:
        # read back from the record (services.csbench.marks): what the campaign was when fetched
        plan.meta["status"] = facts.status.model_dump(mode="json")
    return plan


def context(source: Source, config: Config) -> StepContext:
    return _context(source, config)
