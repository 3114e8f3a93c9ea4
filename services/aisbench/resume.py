"""`aisbench_resume`: start a failed task's run.sh again with `--reuse <latest run>` through the
write path — preflight first; see services.aisbench.actions."""

from __future__ import annotations

from datetime import datetime

from services.aisbench import actions
from services.core.config import Config
from services.core.models import Experiment
from services.core.source import Source
from services.remediations.records import Plan
from services.remediations.steps import StepContext

ACTION = actions.RESUME


async def plan_for(exp: Experiment, source: Source, config: Config, now: datetime | None = None) -> Plan:
    return await actions.plan_resume(exp, source, config, now)


def context(source: Source, config: Config) -> StepContext:
    return actions.context(source, config)
