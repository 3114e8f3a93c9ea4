"""`aisbench_launch`: launch a task that was asked for (needs_input, blocked, pending, removed)
through the write path — preflight first; see services.aisbench.actions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from services.aisbench import actions
from services.core.config import Config
from services.core.models import Experiment
from services.core.source import Source
from services.remediations.inputs import InputField
from services.remediations.records import Plan
from services.remediations.steps import StepContext

ACTION = actions.LAUNCH


async def plan_for(exp: Experiment, source: Source, config: Config, now: datetime | None = None) -> Plan:
    return await actions.plan_launch(exp, source, config, now)


def context(source: Source, config: Config) -> StepContext:
    return actions.context(source, config)


async def inputs_for(exp: Experiment, source: Source, config: Config) -> list[InputField]:
    return await actions.inputs_for(exp, source, config)


async def provide_inputs(exp: Experiment, source: Source, config: Config, values: dict[str, Any]) -> None:
    await actions.provide_inputs(exp, source, config, values)
