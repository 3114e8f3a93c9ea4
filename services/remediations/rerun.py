"""Re-run a job from its own config as a fresh job (verdict `rerun`: the eval never reached the
model, so no trial of it is worth keeping or resuming).

Nothing in the job is moved: the plan is one command, by default
`harbor jobs start -c {job_dir}/config.json --job-name {new_job_name} -o {jobs_dir}` — without
`--job-name`, Harbor would take the name in the config and resume the old job instead. The new
job's name follows the old one with a fresh timestamp, the way Harbor names jobs.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from datetime import UTC, datetime
from typing import Any

from services.core.config import Config
from services.core.models import Experiment, experiment_key
from services.core.source import Source, SourceUnavailable, source_host
from services.remediations.errors import WriteRefused
from services.remediations.job_commands import TemplateError, commands_for, expand, program_missing, runner_of
from services.remediations.job_step import HANDLER, env_problem
from services.remediations.records import Plan, Record, new_record_id
from services.remediations.resume import running_reason
from services.remediations.steps import MAX_READ_BYTES, ExternalStep, StepContext
from services.transport.fs import NotRegularFile, TooLarge
from services.transport.process import display

ACTION = "rerun"
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}__\d{2}-\d{2}-\d{2}$")


def new_job_name(old: str, now: datetime) -> str:
    """The old name with a fresh Harbor timestamp (local time, like Harbor's default)."""
    stamp = now.astimezone().strftime("%Y-%m-%d__%H-%M-%S")
    m = _STAMP.search(old)
    if m and m.start() > 0:
        return old[: m.start()] + stamp
    if m:
        return stamp
    return f"{old}__rerun-{stamp}"


async def plan_for(exp: Experiment, source: Source, config: Config, now: datetime | None = None) -> Plan:
    fs = source.fs()
    host = source_host(source)
    now = now or datetime.now(UTC)
    job = exp.path.rstrip("/")
    jobs_dir, old_name = posixpath.dirname(job), posixpath.basename(job)
    name = new_job_name(old_name, now)
    new_dir = posixpath.join(jobs_dir, name)
    cfg_path = posixpath.join(job, "config.json")
    blocked = running_reason(exp)
    cfg_sha = None
    try:
        cfg_sha = hashlib.sha256(await fs.read_regular(cfg_path, MAX_READ_BYTES)).hexdigest()
    except FileNotFoundError:
        blocked = blocked or f"{exp.id} has no config.json to start a fresh job from"
    except (NotRegularFile, TooLarge, OSError) as exc:
        blocked = blocked or f"{cfg_path} cannot be read: {exc}"
    if not blocked and await fs.stat(new_dir) is not None:
        blocked = f"{new_dir} already exists; try again in a second"
    cmds = commands_for(source, config)
    values = {"job_dir": job, "job_name": old_name, "jobs_dir": jobs_dir, "new_job_name": name,
              "new_job_dir": new_dir}
    try:
        argv = expand(cmds.rerun, values, (), where="the re-run command")
    except TemplateError as exc:
        raise WriteRefused(str(exc)) from None
    blocked = blocked or env_problem(dict(cmds.env_from), "the re-run command")
    if not blocked:
        try:
            blocked = await program_missing(runner_of(source), argv[0], cmds.cwd)
        except SourceUnavailable as exc:
            blocked = f"cannot reach {exc.where}: {exc.message}"
    # the new name follows the clock: what must not change between preview and apply is the rest
    digest = hashlib.sha256(repr([ACTION, job, host, cfg_sha, cmds.rerun, cmds.cwd]).encode()).hexdigest()
    record_id = new_record_id(ACTION, now, digest)
    where = host or "this machine"
    # job_step.py says why a re-run cannot be undone (there is nothing of the old job to put back)
    step = ExternalStep(handler=HANDLER, label=f"{ACTION}: {argv[0]}", inverse=True, args={
        "argv": argv, "cwd": cmds.cwd, "env_from": dict(cmds.env_from), "ok_codes": [0], "kind": "rerun",
        "job_dir": job, "follow": new_dir, "record": record_id,
    })
    preview = [
        f"Re-run {exp.id} as a fresh job from its config: {name}",
        f"Nothing in {exp.id} is moved or changed; the new job writes to {new_dir}.",
        "",
        f"Command, on {where}:",
        f"  {display(argv, cmds.cwd, host)}",
    ]
    if cmds.env_from:
        preview.append(f"  environment: {', '.join(f'{k} from ${v}' for k, v in sorted(cmds.env_from.items()))}")
    if blocked:
        preview += ["", f"Cannot apply now: {blocked}."]
    return Plan(id=record_id, action=ACTION, title=f"Re-run {exp.id}", target=job, host=host,
                experiment=experiment_key(exp), input_hash=digest, steps=[step], preview=preview, lock_dir=job,
                record_dir=None, blocked=blocked,
                meta={"id": exp.id, "argv": argv, "cwd": cmds.cwd, "new_job_name": name, "new_job_dir": new_dir,
                      "preview_paths": "absolute", "journal": {"new_job": new_dir}})


def context(source: Source, config: Config) -> StepContext:
    return StepContext(source.fs(), runner=runner_of(source))


def batch_json(plan: Plan, record: Record | None) -> dict[str, Any]:
    result: dict[str, Any] = next(iter(record.results.values()), {}) if record is not None else {}
    m = plan.meta
    return {"id": m.get("id"), "command": m.get("argv", []), "host": plan.host, "cwd": m.get("cwd"),
            "new_job": m.get("new_job_dir"), "blocked": plan.blocked, "applied": record is not None,
            "record": record.id if record is not None else None, "exit_code": result.get("exit_code"),
            "slurm_job_id": result.get("slurm_job_id"), "error": result.get("error")}
