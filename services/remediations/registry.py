"""Every remediation evaldesk can run, found by the id a check names (`Check.remediation`).

A remediation is a module that plans (`plan_for`) and says what its steps act on
(`context`); the write path (`services.remediations.base.WritePath`) does the rest. The
console and the batch commands go through `plan` and `apply` here, never through a
remediation module by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Any, Protocol, cast

from services.core.config import Config
from services.core.models import Experiment
from services.core.source import Source, SourceUnavailable
from services.remediations import command as _command  # noqa: F401  (registers the `command` step)
from services.remediations import job_step as _job_step  # noqa: F401  (registers the `job_command` step)
from services.remediations.base import Progress, WritePath
from services.remediations.errors import WriteRefused
from services.remediations.records import Plan, Record, aside_records, records_in
from services.remediations.steps import StepContext
from services.transport.fs import JobFS

REMEDIATIONS: dict[str, str] = {
    "dedupe": "services.remediations.dedupe",
    "rebuild_aggregate": "services.remediations.aggregate",
    "register": "services.remediations.leaderboard:REGISTER",
    "deregister": "services.remediations.leaderboard:DEREGISTER",
    "repoint_model": "services.remediations.leaderboard:REPOINT_MODEL",
    "repoint_benchmark": "services.remediations.leaderboard:REPOINT_BENCHMARK",
    "delete_stale": "services.remediations.leaderboard:DELETE_STALE",
    "upload_traces": "services.remediations.traces:UPLOAD_TRACES",
    "free_disk": "services.remediations.traces:FREE_DISK",
    "csbench_teardown": "services.csbench.teardown",
    "csbench_fetch": "services.csbench.fetch",
    "csbench_submit": "services.csbench.submit",
    "resume": "services.remediations.resume",
    "rerun": "services.remediations.rerun",
    "aisbench_launch": "services.aisbench.launch",
    "aisbench_resume": "services.aisbench.resume",
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
    # "module" is a remediation module; "module:NAME" one of several remediations a module holds
    module_name, _, attr = module.partition(":")
    loaded = importlib.import_module(module_name)
    return cast(Remediation, getattr(loaded, attr) if attr else loaded)


async def rescan(source: Source, exp_id: str) -> Experiment:
    """The experiment as it is now: a fresh scan of its source."""
    snap = await source.scan()
    for exp in snap.experiments:
        if exp.id == exp_id and exp.stale_since is None:
            return exp
    raise SourceUnavailable(source.label, f"{exp_id} cannot be read now")


async def plan(action: str, exp: Experiment, source: Source, config: Config, now: datetime | None = None,
               options: Mapping[str, Any] | None = None) -> Plan:
    """The dry run of `action`; `options` narrow what it does (a resume's exception types or
    trials) and travel in the plan, so the re-plan under the lock asks the same."""
    if options:
        made = await remediation(action).plan_for(exp, source, config, now, **options)  # type: ignore[call-arg]
    else:
        made = await remediation(action).plan_for(exp, source, config, now)
    # a target in a bucket: its record id then reopens that bucket, not a local path of that name
    store = getattr(source, "store", None)
    if made.store is None and isinstance(store, str):
        made.store = store
    return made


async def apply(action: str, plan_: Plan, exp_id: str, source: Source, config: Config, write_path: WritePath,
                progress: Progress | None = None, resources: Mapping[str, Any] | None = None) -> Record:
    """Carry out a previewed plan; under the lock it is re-made from a fresh scan and must match.
    `resources` reach the steps (e.g. `on_output` for a command's streamed output)."""
    rem = remediation(action)
    options = plan_.meta.get("options") or {}

    async def replan() -> Plan:
        fresh = await plan(action, await rescan(source, exp_id), source, config, None, options)
        if fresh.blocked and not plan_.blocked:
            # what stops it now (the job started again, the command went away) says it best
            raise WriteRefused(f"{fresh.blocked}; nothing was changed")
        return fresh

    ctx = rem.context(source, config)
    ctx.resources.update(resources or {})
    prepare = getattr(rem, "prepare", None)
    if prepare is not None and write_path.refusal(action) is None and not plan_.blocked and not plan_.nothing_to_do:
        await prepare(plan_, ctx)
    return await write_path.apply(plan_, ctx, replan=replan, progress=progress)


async def records_for(fs: JobFS, job_dir: str, problems: list[str] | None = None) -> list[Record]:
    """Every record of writes to a job, newest first: those in its quarantine and those kept
    beside it (a resume's: inside the job, Harbor's resume would delete them)."""
    found = await records_in(fs, job_dir, problems) + await aside_records(fs, job_dir)
    return sorted(found, key=lambda r: r.id, reverse=True)


def context(action: str, source: Source, config: Config) -> StepContext:
    return remediation(action).context(source, config)
