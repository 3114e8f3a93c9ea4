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

import asyncio
import contextlib
import os
import posixpath
from datetime import UTC, datetime
from typing import Any, Literal

from services.core.followed import follow
from services.core.source import SourceUnavailable
from services.remediations.command import SBATCH_ID, CommandFailed
from services.remediations.command_process import (
    MARK,
    MarkFilter,
    bad_env_values,
    describe,
    liveness,
    new_tag,
    parse_mark,
    release,
    stop_hint,
    wrapped,
)
from services.remediations.steps import ExternalStep, StepContext, StepState, register_handler
from services.transport.process import CommandNotFound, LocalRunner, OutputFn, Runner
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
    if result.get("ended_unseen"):
        return "it ended while evaldesk was not watching: its exit code is unknown"
    return None


def env_values(env_from: dict[str, str], label: str) -> dict[str, str]:
    """The values a command gets, read here when it starts (never recorded). Raises
    CommandFailed naming what is missing or cannot travel."""
    env: dict[str, str] = {}
    missing = []
    for name, var in env_from.items():
        if var not in os.environ:
            missing.append(var)
        else:
            env[str(name)] = os.environ[var]
    if missing:
        raise CommandFailed(f"{label}: the environment variable(s) {', '.join(missing)} are not set here")
    bad = bad_env_values(env)
    if bad:
        raise CommandFailed(f"{label}: {', '.join(bad)} cannot be passed on (a value with a line break, or "
                            "a name that is not a shell variable name)")
    return env


def env_problem(env_from: dict[str, str], label: str) -> str | None:
    """Why a job command could not get its environment (None: it can), asked when planning,
    before anything moves."""
    try:
        env_values(env_from, label)
    except CommandFailed as exc:
        return str(exc)
    return None


async def new_trial_dirs(step: ExternalStep, ctx: StepContext) -> list[str]:
    """Dirs in the job that were not there when the command started (hidden ones aside)."""
    job = str(step.args["job_dir"])
    # what the plan set aside is not new when an interrupted undo already put some of it back
    remaining = set(step.args.get("remaining") or []) | set(step.args.get("moved") or [])
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


# tags of the commands this process ran to an end it saw (or lost the connection to): their
# step is done as far as applying goes; undo still asks whether what they started lives
_RAN_HERE: set[str] = set()


def outlived(step: ExternalStep) -> dict[str, Any] | None:
    """What the record knows of a command that was started and whose end nobody saw (evaldesk
    killed, the connection dropped mid-run), or None."""
    started = step.result.get("started")
    if not isinstance(started, dict) or step.result.get("exit_code") is not None:
        return None
    if step.result.get("error") and not step.result.get("dropped"):
        return None  # it ended as evaldesk saw, or never got going
    return started


async def may_still_run(step: ExternalStep, ctx: StepContext) -> str | None:
    """Why the command `step` started may still be running (None: provably gone, or the
    person said so with --force)."""
    started = outlived(step)
    if started is None or ctx.resources.get("force"):
        return None
    runner: Runner = ctx.resources.get("runner") or LocalRunner()
    state, why = await liveness(runner, started)
    if state == "gone":
        return None
    what = describe(started, str(step.args["argv"][0]))
    record = step.args.get("record", "RECORD")
    head = f"{what} is still running" if state == "alive" else f"evaldesk cannot tell whether {what} still runs ({why})"
    return (f"{head}: it was started by an evaldesk that is gone, and putting the trials back under it, or "
            f"starting another beside it, loses trials. Let it end, or stop it ({stop_hint(started)} on "
            f"{started.get('host') or 'this machine'}); once nothing runs, undo or finish goes on — "
            f"`evaldesk --batch undo {record} --force` if you know it is gone")


class JobCommandHandler:
    async def state(self, step: ExternalStep, ctx: StepContext) -> Literal["done", "not_done", "conflict"]:
        return (await self.state_detail(step, ctx))[0]

    async def state_detail(self, step: ExternalStep, ctx: StepContext) -> tuple[StepState, str]:
        started = outlived(step)
        if started is not None and started.get("tag") not in _RAN_HERE:
            why = await may_still_run(step, ctx)
            if why:
                return "conflict", why
            # it ended while nobody watched: what it did is on disk, its exit code is lost
            step.result = {**step.result, "ended_unseen": True}
            return "done", ""
        if "exit_code" in step.result or "error" in step.result:
            return "done", ""
        return "not_done", ""

    async def do(self, step: ExternalStep, ctx: StepContext) -> dict[str, Any]:
        runner: Runner = ctx.resources.get("runner") or LocalRunner()
        on_output: OutputFn | None = ctx.resources.get("on_output")
        args = step.args
        env = env_values(dict(args.get("env_from") or {}), step.label)  # nothing starts without them
        tag = new_tag(str(args.get("record") or "job"))
        started: dict[str, Any] = {"host": runner.host, "tag": tag, "at": datetime.now(UTC).isoformat()}
        step.result = {"started": started}
        await ctx.note(step.result)  # durable before the process exists
        ctx.checkpoint("starting")
        marks = MarkFilter()
        noted: list[asyncio.Task[None]] = []

        def seen(name: str, text: str) -> None:
            if name == "stderr" and not marks.done:
                text = marks.feed(text)
                if marks.found is not None and not noted:
                    started.update(marks.found)
                    noted.append(asyncio.ensure_future(ctx.note({"started": dict(started)})))
            if text and on_output is not None:
                on_output(name, text)

        try:
            res = await runner.run(wrapped(list(args["argv"]), tag), cwd=args.get("cwd"), on_output=seen,
                                   stdin=release(env))
        except (CommandNotFound, FileNotFoundError, SourceUnavailable) as exc:
            step.result = {}  # nothing started: the plan rolls back
            raise CommandFailed(str(exc)) from None
        finally:
            for task in noted:
                with contextlib.suppress(OSError):
                    await task
        err_tail = res.stderr_tail.split("\n", 1)[1] if res.stderr_tail.startswith(MARK) else res.stderr_tail
        if marks.found is None and res.stderr_tail.startswith(MARK):
            found = parse_mark(res.stderr_tail.split("\n", 1)[0])
            started.update(found or {})
        result: dict[str, Any] = {"exit_code": res.exit_code, "host": runner.host, "started": started,
                                  "stdout_tail": res.stdout_tail[-2000:], "stderr_tail": err_tail[-2000:]}
        if res.exit_code == 127 and "not found" in err_tail and runner.host is None:
            step.result = {}
            raise CommandFailed(f"{args['argv'][0]}: command not found on this machine")
        found_id = SBATCH_ID.search(res.stdout_tail)
        if found_id:
            result["slurm_job_id"] = found_id.group(1)
        if res.error:
            result["error"] = f"{step.label}: {res.error}"
            result["dropped"] = True  # how it ended is not known: it may run on
        elif res.exit_code not in args.get("ok_codes", [0]):
            last = (err_tail or res.stdout_tail).strip().splitlines()[-1:] or ["no output"]
            result["error"] = f"{step.label}: exit code {res.exit_code}: {last[0][:300]}"
        _RAN_HERE.add(tag)
        jid = result.get("slurm_job_id")
        if jid and args.get("follow"):
            follow(runner.host, str(args["follow"]), str(jid), args.get("record"))
        step.result = result
        return result

    async def undo_check(self, step: ExternalStep, ctx: StepContext) -> str | None:
        if step.args.get("kind") != "resume":
            where = step.args.get("follow") or "the new job"
            return (f"{step.label} started a fresh job ({where}); there is nothing to put back — keep or delete "
                    "that job dir yourself")
        aside = step.args.get("aside", "the quarantine")
        running = await may_still_run(step, ctx)
        if running:
            return running
        if (outlived(step) is None and step.result.get("exit_code") is None and step.result.get("error")
                and not ctx.resources.get("force")):
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
