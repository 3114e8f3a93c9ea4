"""Tear a cloud campaign down: `csbench teardown CID --config C`, through the write path.

csbench's teardown is the runbook's backstop: it signals the controller to stop, deletes the
agent runtimes its OSS ledger still lists, and runs `terraform destroy` of the controller,
NAT gateway and EIP (in `infra/terraform/aliyun-iam` under the csbench checkout, hence the
working dir). It prints a Python dict, `{'destroyed': bool, 'residual_deleted': [...]}`, and
exits 0 even when terraform failed — so the marker is not the exit code: the applied record of
this action, whose output the source reads back; the reminder clears only when it says
destroyed True. A command cannot be undone.
"""

from __future__ import annotations

import os
from datetime import datetime

from services.core.config import Config
from services.core.models import Experiment, experiment_key
from services.core.source import Source
from services.csbench.actions import cloud_campaign, command_plan, need_settings
from services.csbench.actions import context as _context
from services.remediations.errors import WriteRefused
from services.remediations.records import Plan
from services.remediations.steps import StepContext

ACTION = "csbench_teardown"


async def plan_for(exp: Experiment, source: Source, config: Config, now: datetime | None = None) -> Plan:
    camp, cid = cloud_campaign(exp, "tear down")
    facts = camp.facts
    try:
        s = need_settings(config, "teardown")
    except WriteRefused as exc:
        # the audit's fix stays a plan of one step: the command, blocked until the config names csbench's
        s = None
        unset = str(exc)
    argv = s.argv("teardown", cid) if s is not None else ["csbench", "teardown", cid, "--config", "<csbench config>"]
    mark = facts.teardown
    read = {"done": facts.status.done if facts.status else None, "stale": facts.stale is not None,
            "marker": mark.record_id if mark else None, "over": facts.over}
    if mark is not None and mark.destroyed:
        return Plan(id=mark.record_id, action=ACTION, title=f"Tear down {cid}", target=exp.path,
                    experiment=experiment_key(exp), input_hash="", steps=[],
                    preview=[f"{cid} is already torn down (record {mark.record_id}: destroyed True); nothing to do."])
    state = {"DONE": "is DONE", "FAILED": "FAILED"}.get(facts.status.done or "", "") if facts.status else ""
    state = state or ("is stale" if facts.stale else ("was fetched" if facts.origin == "fetched" else "is running"))
    intro = [f"Tear down csbench campaign {cid} (it {state}): stop its controller, delete the agent runtimes its "
             "ledger lists, and terraform destroy the controller, NAT gateway and EIP — they bill by the hour."]
    if not facts.over:
        intro.append("It is still running: teardown stops it before it finishes.")
    blocked = None if s is not None else unset
    if s is not None and not os.path.isdir(s.workdir):
        blocked = (f"the working dir {s.workdir} does not exist (csbench teardown runs terraform in "
                   "infra/terraform/aliyun-iam under it; set [csbench] workdir)")
    after = [f"Its output is kept in the record under {exp.path}/.evaldesk-quarantine/ and in the journal; the "
             "audit reads the printed {'destroyed': …} back and the reminder clears when it is True.",
             "A command cannot be undone."]
    return command_plan(ACTION, f"Tear down {cid}", camp, argv, s.workdir if s is not None else None, intro, after,
                        read, now, blocked)


def context(source: Source, config: Config) -> StepContext:
    return _context(source, config)
