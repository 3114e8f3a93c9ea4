"""Every remediation evaldesk can run, found by the id a check names (`Check.remediation`).

A remediation is a module that plans (`plan_for`) and says what its steps act on
(`context`); the write path (`services.remediations.base.WritePath`) does the rest. The
console and the batch commands go through `plan` and `apply` here, never through a
remediation module by name.
"""

from __future__ import annotations

import importlib
from datetime import datetime
from functools import cache
from typing import Protocol, cast

from services.core.config import Config
from services.core.models import Experiment
from services.core.source import Source, SourceUnavailable
from services.remediations import command as _command  # noqa: F401  (registers the `command` step)
from services.remediations.base import Progress, WritePath
from services.remediations.errors import WriteRefused
from services.remediations.records import Plan, Record
from services.remediations.steps import StepContext

REMEDIATIONS: dict[str, str] = {
    "dedupe": "services.remediations.dedupe",
    "retry": "services.remediations.rock_retry",
}


class Remediation(Protocol):
    ACTION: str

    async def plan_for(self, exp: Experiment, source: Source, config: Config,
                       now: datetime | None = None) -> Plan: ...

    def context(self, source: Source, config: Config) -> StepContext: ...


@cache
def remediation(action: str) -> Remediation:
    try:
        module = REMEDIATIONS[action]
    except KeyError:
        raise WriteRefused(f"evaldesk has no remediation called {action!r}") from None
    return cast(Remediation, importlib.import_module(module))


async def rescan(source: Source, exp_id: str) -> Experiment:
    """The experiment as it is now: a fresh scan of its source."""
    snap = await source.scan()
    for exp in snap.experiments:
        if exp.id == exp_id and exp.stale_since is None:
            return exp
    raise SourceUnavailable(source.label, f"{exp_id} cannot be read now")


async def plan(action: str, exp: Experiment, source: Source, config: Config, now: datetime | None = None) -> Plan:
    return await remediation(action).plan_for(exp, source, config, now)


async def apply(action: str, plan_: Plan, exp_id: str, source: Source, config: Config, write_path: WritePath,
                progress: Progress | None = None) -> Record:
    """Carry out a previewed plan; under the lock it is re-made from a fresh scan and must match."""
    rem = remediation(action)

    async def replan() -> Plan:
        return await rem.plan_for(await rescan(source, exp_id), source, config)

    return await write_path.apply(plan_, rem.context(source, config), replan=replan, progress=progress)


def context(action: str, source: Source, config: Config) -> StepContext:
    return remediation(action).context(source, config)
