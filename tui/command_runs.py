"""What the console tells about a command a write runs (a resume, a re-run): the command line of
a plan, and how a run ended, from its write-ahead record."""

from __future__ import annotations

from services.remediations.job_step import command_failed
from services.remediations.records import Plan, Record
from services.remediations.steps import ExternalStep
from services.transport.process import display
from tui.context import CommandRun

COMMAND_HANDLERS = ("command", "job_command")


def command_of(payload: object) -> str | None:
    """The command a plan runs, as a person would type it, with where it runs; None if none."""
    if not isinstance(payload, Plan):
        return None
    for step in payload.steps:
        if isinstance(step, ExternalStep) and step.handler in COMMAND_HANDLERS:
            return display(step.args.get("argv") or [], step.args.get("cwd"), payload.host)
    return None


def close_run(run: CommandRun, exp_id: str, plan: Plan | None, record: Record | None, state: str | None = None,
              message: str = "") -> str | None:
    """Fill in how `run` ended; the summary for the console's log (None: keep the caller's)."""
    summary = None
    if record is not None:
        result = next((r for r in record.results.values() if "exit_code" in r or "error" in r), {})
        run.record = record.id
        run.exit_code = result.get("exit_code")
        run.slurm_job_id = result.get("slurm_job_id")
        failed = command_failed(result)
        where = plan.host if plan is not None and plan.host else "this machine"
        if failed:
            n = len(plan.meta.get("rerun", [])) if plan is not None else 0
            state = "failed"
            summary = (f"{run.action} of {exp_id}: the command failed ({failed}) on {where}"
                       + (f"; the {n} trial(s) set aside can be put back" if n else ""))
        elif run.slurm_job_id:
            state = "done"
            summary = f"{run.action} submitted SLURM job {run.slurm_job_id} on {where}; m monitors it"
        else:
            state = "done"
            summary = f"{run.action} finished on {where}: exit code {run.exit_code}, record {record.id}"
    run.state = state or "done"
    run.message = summary or message
    return summary
