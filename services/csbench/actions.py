"""What csbench's lifecycle actions have in common: one `csbench` command of a cloud campaign,
run as the write path's `command` step (argv, never a shell), previewed with the exact command
and where it runs, its output kept in the record beside the campaign's files and in the journal.

`teardown` (services.csbench.teardown) and `fetch` (services.csbench.fetch) are the two
remediations built on it.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from datetime import datetime
from typing import Any

from services.core.config import CAMPAIGN_ID, Config
from services.core.models import Experiment, experiment_key
from services.core.source import Source
from services.csbench.cli import Settings, settings
from services.csbench.model import CampaignExperiment
from services.remediations.command import command_step
from services.remediations.errors import WriteRefused
from services.remediations.records import QUARANTINE_DIR, Plan, new_record_id
from services.remediations.steps import StepContext
from services.transport.process import LocalRunner, display


def cloud_campaign(exp: Experiment, action: str) -> tuple[CampaignExperiment, str]:
    if not isinstance(exp, CampaignExperiment):
        raise WriteRefused(f"{exp.id} is not a csbench campaign: nothing to {action}")
    cid = exp.facts.campaign_id
    if not exp.facts.cloud or not cid:
        raise WriteRefused(f"{exp.id} is not a cloud campaign evaldesk knows the id of: nothing to {action}")
    if not CAMPAIGN_ID.match(cid):
        raise WriteRefused(f"{cid!r} is not a campaign id csbench could be given")
    return exp, cid


def need_settings(config: Config, action: str) -> Settings:
    s = settings(config)
    if s is None:
        raise WriteRefused(f"csbench {action} needs csbench's own config: add a [csbench] section to evaldesk's "
                           "config with config = \"<path to the csbench YAML with target.blob_bucket/region>\"")
    if not os.path.isfile(s.config):
        raise WriteRefused(f"csbench {action}: the csbench config {s.config} does not exist ([csbench] config)")
    return s


def command_plan(action: str, title: str, exp: CampaignExperiment, argv: list[str], cwd: str | None,
                 intro: list[str], after: list[str], read: dict[str, Any], now: datetime | None,
                 blocked: str | None = None) -> Plan:
    """One command step, previewed with its exact command line; the record lives in the
    campaign's dir (created by the write path if the campaign was never fetched)."""
    digest = hashlib.sha256(json.dumps([action, argv, cwd, read], sort_keys=True, default=str).encode()).hexdigest()
    record_id = new_record_id(action, now, digest)
    target = exp.path
    record_dir = posixpath.join(target, QUARANTINE_DIR, record_id)
    label = " ".join(argv[:3])
    preview = [*intro, "", "Runs this command (argv, no shell):", f"  {display(argv, cwd)}", "", *after]
    if blocked:
        preview += ["", f"Cannot run now: {blocked}."]
    return Plan(
        id=record_id,
        action=action,
        title=title,
        target=target,
        host=None,
        experiment=experiment_key(exp),
        input_hash=digest,
        steps=[command_step(argv, label, cwd=cwd)],
        preview=preview,
        lock_dir=target if os.path.isdir(target) else None,
        record_dir=record_dir,
        blocked=blocked,
        meta={"id": exp.id, "campaign": exp.facts.campaign_id, "command": argv, "cwd": cwd,
              "journal": {"campaign": exp.facts.campaign_id, "command": argv}},
    )


def context(source: Source, config: Config) -> StepContext:
    return StepContext(source.fs(), runner=LocalRunner())
