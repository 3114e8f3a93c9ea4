"""The write path's `job_command` step: the command that resumes or re-runs a job.

It runs like the plain `command` step (services/remediations/command.py does the running: argv,
streamed output, exit code, tails, the SLURM job id from `Submitted batch job N`), and differs
in what it means for the plan around it:

- a command that ran and failed (non-zero exit, a connection that dropped mid-run) does not
  roll the plan back: Harbor may already have re-run tasks, and putting set-aside trials back
  beside their re-runs would duplicate them. The record keeps what ran and how it ended; the
  caller offers the undo, which checks first.
- undo is allowed while the job shows no new trial dir since the command started (the step
  itself has nothing to take back), and while a SLURM job it submitted is not queued or
  running; otherwise it refuses and says why. After a connection dropped mid-run nobody can
  tell what started, so undo waits for `--force` (ctx.resources["force"]) from a person who
  looked on the host.
- a SLURM job id it prints is followed for the job dir (services/core/followed.py), so the
  monitor shows the new job's state.

    ExternalStep(handler="job_command", label=…, args={
        "argv": [...], "cwd": …, "env_from": {...}, "ok_codes": [0],   # as for `command`
        "kind": "resume" | "rerun",
        "job_dir": "/jobs/j",            # the job the plan is about
        "remaining": ["a__x", …],        # resume: what the job dir holds after the moves
        "aside": "/jobs/.evaldesk-quarantine/j/<record>",
        "follow": "/jobs/j",             # the job dir a submitted SLURM job works on
        "record": "<record id>",
    })
"""

from __future__ import annotations

import posixpath
from typing import Any, Literal

from services.core.followed import follow
from services.core.source import SourceUnavailable
from services.remediations.command import CommandFailed, CommandHandler
from services.remediations.steps import ExternalStep, StepContext, register_handler
from services.transport.process import LocalRunner, Runner
from services.transport.slurm import SlurmToolsMissing, parse_query_output, query_command

HANDLER = "job_command"


def command_failed(result: dict[str, Any] | None) -> str | None:
    """Why a job command's recorded result is a failure (None when it exited 0)."""
    if not result:
        return None
    code = result.get("exit_code")
    if code not in (0, None):
        return f"exit code {code}"
    if result.get("error"):
        return str(result["error"])
    return None


async def new_trial_dirs(step: ExternalStep, ctx: StepContext) -> list[str]:
    """Dirs in the job that were not there when the command started (hidden ones aside)."""
    job = str(step.args["job_dir"])
    remaining = set(step.args.get("remaining") or [])
    names = await ctx.fs.list_dir(job)
    out = []
    for name in sorted(names):
        if name in remaining or name.startswith("."):
            continue
        st = await ctx.fs.stat(posixpath.join(job, name))
        if st is not None and st.is_dir:
            out.append(name)
    return out


async def slurm_state(runner: Runner, job_id: str) -> str | None:
    """SLURM's word for `job_id` where `runner` runs (None: no record of it)."""
    res = await runner.run(["sh", "-c", query_command([job_id])], timeout_s=60)
    if res.error:
        raise SourceUnavailable(runner.host or "this machine", res.error)
    try:
        found = parse_query_output(res.stdout_tail).get(job_id)
    except SlurmToolsMissing:
        return None
    return found.state if found else None


class JobCommandHandler:
    async def state(self, step: ExternalStep, ctx: StepContext) -> Literal["done", "not_done", "conflict"]:
        return "done" if ("exit_code" in step.result or "error" in step.result) else "not_done"

    async def do(self, step: ExternalStep, ctx: StepContext) -> dict[str, Any]:
        try:
            result = await CommandHandler().do(step, ctx)
        except CommandFailed as exc:
            if not step.result:
                raise  # it never started (not found, a missing env var): the plan rolls back
            result = {**step.result, "error": str(exc)}
        runner: Runner = ctx.resources.get("runner") or LocalRunner()
        jid = result.get("slurm_job_id")
        if jid and step.args.get("follow"):
            follow(runner.host, str(step.args["follow"]), str(jid), step.args.get("record"))
        step.result = result
        return result

    async def undo_check(self, step: ExternalStep, ctx: StepContext) -> str | None:
        if step.args.get("kind") != "resume":
            where = step.args.get("follow") or "the new job"
            return (f"{step.label} started a fresh job ({where}); there is nothing to put back — keep or delete "
                    "that job dir yourself")
        aside = step.args.get("aside", "the quarantine")
        if step.result.get("exit_code") is None and step.result.get("error") and not ctx.resources.get("force"):
            where = step.result.get("host") or "this machine"
            return (f"{step.result['error']}: evaldesk cannot tell whether `{step.args['argv'][0]}` started anything "
                    f"(a SLURM job, Harbor itself), and putting the trials back under a running resume loses "
                    f"them. Look on {where} first (squeue, ps); when nothing runs, `evaldesk --batch undo "
                    f"{step.args.get('record', 'RECORD')} --force` puts them back")
        try:
            new = await new_trial_dirs(step, ctx)
        except FileNotFoundError:
            return f"the job dir {step.args['job_dir']} is gone"
        if new:
            shown = ", ".join(new[:3]) + (f" and {len(new) - 3} more" if len(new) > 3 else "")
            return (f"{len(new)} new trial dir(s) appeared in the job since the resume started ({shown}): Harbor "
                    "has re-run tasks, and putting the set-aside trials back would duplicate them; they stay in "
                    f"{aside}")
        jid = step.result.get("slurm_job_id")
        if jid:
            runner: Runner = ctx.resources.get("runner") or LocalRunner()
            try:
                state = await slurm_state(runner, str(jid))
            except (SourceUnavailable, OSError) as exc:
                return f"cannot ask SLURM about job {jid}: {exc}"
            if state and state.upper() in {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED",
                                           "SUSPENDED", "RESIZING"}:
                return (f"SLURM job {jid} is still {state}: cancel it (scancel {jid}) before putting the trials "
                        "back, or it re-runs them beside the originals")
        return None

    async def undo(self, step: ExternalStep, ctx: StepContext) -> None:
        # a command cannot be un-run; once undo_check has passed there is nothing of it left to
        # take back, and the moves before it put the trials back
        return None


register_handler(HANDLER, JobCommandHandler())
