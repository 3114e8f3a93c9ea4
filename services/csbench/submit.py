"""`csbench submit PLAN --config C --watchdog-timeout S`, through the write path, after the
runbook's preflight (services.csbench.preflight).

The submit plan is an experiment of its own (`PlanExperiment`, from `[csbench] plans` or the
plan given to `--batch submit`): its audit is the preflight, and its fix is this command. The
command runs in the csbench checkout (terraform runs in `infra/terraform/aliyun-iam` under it)
with the paths absolute, and its record — holding the campaign id csbench printed — lives in
the `[csbench]` results dir, where the campaign source finds the campaigns evaldesk submitted.

A failing preflight item blocks the plan. One may be accepted on purpose: suite tasks on a
config that is not `target.mode: real` (a mock run on cloud infra, which csbench itself only
warns about) go ahead only when the word `mock` was typed in the console's dialog
(`confirm_word`); `--batch submit` never accepts it. A command cannot be undone: the preview
names the teardown that ends the campaign.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import posixpath
from collections.abc import Mapping
from datetime import datetime

from services.core.config import Config
from services.core.models import Experiment, State, TrialCounts, experiment_key
from services.core.source import Source
from services.csbench.actions import context as _context
from services.csbench.actions import need_settings
from services.csbench.assemble import join_names
from services.csbench.cli import Settings
from services.csbench.find import KIND
from services.csbench.marks import SUBMIT, read_marks
from services.csbench.model import PlanExperiment, PreflightItem, SubmitFacts, SubmitMark
from services.csbench.plans import LocalConfig, PlanFile, read_config, read_plan
from services.csbench.preflight import blocking, run_preflight
from services.remediations.command import command_step
from services.remediations.errors import WriteRefused
from services.remediations.records import QUARANTINE_DIR, Plan, new_record_id
from services.remediations.steps import StepContext
from services.transport.process import display

ACTION = SUBMIT
ICONS = {"pass": "✓", "warn": "!", "fail": "✗", "skip": "-"}


async def torn_down(s: Settings, marks: list[SubmitMark]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for m in marks:
        if m.campaign_id and m.campaign_id not in out:
            mark = (await read_marks(s.campaign_dir(m.campaign_id))).teardown
            out[m.campaign_id] = bool(mark is not None and mark.destroyed)
    return out


async def check(s: Settings, plan_path: str, env: Mapping[str, str] | None = None
                ) -> tuple[PlanFile, LocalConfig, list[PreflightItem], list[SubmitMark], dict[str, bool]]:
    """The plan, the local config, the preflight, and the earlier submits it weighed."""
    submits = (await read_marks(s.results_dir)).submits
    down = await torn_down(s, submits)

    def read() -> tuple[PlanFile, LocalConfig, list[PreflightItem]]:
        plan, cfg = read_plan(plan_path), read_config(s.config)
        return plan, cfg, run_preflight(s, plan, cfg, submits, down, env)

    plan, cfg, items = await asyncio.to_thread(read)
    return plan, cfg, items, submits, down


async def plan_experiment(s: Settings, plan_path: str, label: str,
                          env: Mapping[str, str] | None = None) -> PlanExperiment:
    plan, _, items, submits, down = await check(s, plan_path, env)
    mine = [m for m in submits if m.plan == plan_path and m.campaign_id]
    live = [m for m in mine if not down.get(m.campaign_id or "")]
    hard = [i for i in items if i.status == "fail" and not i.word]
    if live:
        state, raw = State.dispatched, f"submitted {live[0].campaign_id}"
    elif hard:
        state, raw = State.blocked, f"blocked: {hard[0].id}"
    else:
        state, raw = State.pending, "not submitted"
    return PlanExperiment(
        id=os.path.basename(plan_path), source=KIND, source_label=label, path=plan_path, state=state, state_raw=raw,
        benchmark=join_names([t.task_id.removeprefix("suite:") for t in plan.tasks]),
        model=join_names([t.agent_kind for t in plan.tasks]),
        started_at=live[0].at if live else None, updated_at=mine[0].at if mine else None,
        counts=TrialCounts(expected=len(plan.tasks) or None),
        plan=SubmitFacts(plan_path=plan_path, config_path=s.config, results_dir=s.results_dir, preflight=items,
                         submitted=mine, torn_down=down),
    )


def _preview(s: Settings, plan: PlanFile, items: list[PreflightItem], argv: list[str], blocked: str | None,
             asked: PreflightItem | None = None) -> list[str]:
    tasks = ", ".join(f"{t.task_id}" + (f" ({t.agent_kind})" if t.agent_kind else "") for t in plan.tasks[:4])
    lines = []
    if asked is not None:
        # what the word accepts comes first: it is what the person is about to pay for
        lines += [f"✗ {asked.title}: {asked.evidence}.", f"  Type {asked.word} only to pay for that on purpose; "
                  f"else {asked.fix.split(';')[0] if asked.fix else 'fix it'} and submit again.", ""]
    lines += [f"Submit {plan.path} as a new csbench cloud campaign: csbench writes the launch spec to the OSS bucket, "
             "then terraform apply brings up a controller ECS, a NAT gateway and an EIP — they bill by the hour "
             "until the campaign is torn down.",
             f"{len(plan.tasks)} task(s): {tasks}" + (" …" if len(plan.tasks) > 4 else "")
             + (f"; cost_budget ${plan.cost_budget:g}" if plan.cost_budget is not None else ""),
             "", "Preflight (the runbook's checks before paying):"]
    for item in items:
        lines.append(f"  {ICONS[item.status]} {item.title}: {item.evidence}")
        if item.status in ("fail", "warn") and item.fix:
            lines.append(f"      → {item.fix}")
    lines += ["", "Runs this command (argv, no shell):", f"  {display(argv, s.workdir)}", "",
              f"csbench prints the new campaign id; it is kept in the record under {s.results_dir}/{QUARANTINE_DIR}/ "
              "and in the journal, and evaldesk follows the campaign from then on (status, logs, fetch, teardown).",
              "A command cannot be undone: when the campaign is over, fetch it and tear it down "
              "(csbench teardown CAMPAIGN_ID)."]
    if blocked:
        lines += ["", f"Cannot run now: {blocked}."]
    return lines


async def plan_for(exp: Experiment, source: Source, config: Config, now: datetime | None = None,
                   confirm_word: str | None = None) -> Plan:
    if not isinstance(exp, PlanExperiment):
        raise WriteRefused(f"{exp.id} is not a csbench submit plan: nothing to submit")
    s = need_settings(config, "submit")
    plan_path = exp.plan.plan_path
    plan, cfg, items, _, _ = await check(s, plan_path)
    argv = s.submit_argv(plan_path)
    stop = blocking(items, confirm_word)
    blocked = None
    asked: PreflightItem | None = None
    if stop is not None:
        blocked = f"{stop.title} — {stop.evidence}"
        if stop.word:
            asked = stop
            blocked += f" (type {stop.word} in the console's dialog to submit it anyway)"
    accepted = [i.id for i in items if i.status == "fail" and i.word and i.word == confirm_word]
    read = {"plan": plan.sha256, "config": cfg.sha256, "preflight": [(i.id, i.status) for i in items],
            "accepted": accepted}
    digest = hashlib.sha256(json.dumps([ACTION, argv, s.workdir, read], sort_keys=True).encode()).hexdigest()
    record_id = new_record_id(ACTION, now, digest)
    target = s.results_dir
    preview = _preview(s, plan, items, argv, None if asked else blocked, asked)
    if accepted:
        preview.insert(0, f"You typed {confirm_word}: this submit goes ahead although "
                       + ", ".join(accepted) + " failed.")
    return Plan(
        id=record_id, action=ACTION, title=f"Submit {os.path.basename(plan_path)}", target=target, host=None,
        experiment=experiment_key(exp), input_hash=digest,
        steps=[command_step(argv, " ".join(argv[:3]), cwd=s.workdir)],
        preview=preview, lock_dir=target if os.path.isdir(target) else None,
        record_dir=posixpath.join(target, QUARANTINE_DIR, record_id), blocked=blocked,
        meta={"id": exp.id, "plan": plan_path, "plan_sha256": plan.sha256, "config_sha256": cfg.sha256,
              "command": argv, "cwd": s.workdir, "preflight": [i.model_dump() for i in items],
              "confirm_word": asked.word if asked else None,
              "options": {"confirm_word": confirm_word} if confirm_word else {},
              "verbatim": True, "journal": {"plan": plan_path, "command": argv}},
    )


def context(source: Source, config: Config) -> StepContext:
    return _context(source, config)
