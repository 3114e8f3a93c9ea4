"""The write path's `command` step: run one command here or on the target's host.

    ExternalStep(handler="command", label=…, args={
        "argv": ["harbor", "jobs", "resume", "-p", "/jobs/j"],   # never a shell string
        "cwd": "/jobs" | None,
        "env_from": {"OPENAI_API_KEY": "MY_KEY_VAR"},            # name → env var read here; values never recorded
        "ok_codes": [0],                                          # exit codes that count as done
    })

The runner comes from the step context (`ctx.resources["runner"]`, a
`services.transport.process.Runner`; this machine when absent), and output is streamed to
`ctx.resources["on_output"]` when given. The step's result records the exit code, the tails of
stdout/stderr, and a SLURM job id when `sbatch` printed one. A command cannot be un-run, so the
step has no inverse; whether it already ran is read from the record.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal

from services.remediations.steps import ExternalStep, StepContext, register_handler
from services.transport.process import CommandNotFound, LocalRunner, OutputFn, Runner

SBATCH_ID = re.compile(r"Submitted batch job (\d+)")


class CommandFailed(OSError):
    pass


def command_step(argv: list[str], label: str, *, cwd: str | None = None, env_from: dict[str, str] | None = None,
                 ok_codes: tuple[int, ...] = (0,)) -> ExternalStep:
    return ExternalStep(handler="command", label=label,
                        args={"argv": list(argv), "cwd": cwd, "env_from": dict(env_from or {}),
                              "ok_codes": list(ok_codes)})


class CommandHandler:
    async def state(self, step: ExternalStep, ctx: StepContext) -> Literal["done", "not_done", "conflict"]:
        # a command leaves nothing to look at in general: it has run when its result says so
        return "done" if "exit_code" in step.result else "not_done"

    async def do(self, step: ExternalStep, ctx: StepContext) -> dict[str, Any]:
        runner: Runner = ctx.resources.get("runner") or LocalRunner()
        on_output: OutputFn | None = ctx.resources.get("on_output")
        args = step.args
        env: dict[str, str] = {}
        for name, var in (args.get("env_from") or {}).items():
            if var not in os.environ:
                raise CommandFailed(f"{step.label}: the environment variable {var} is not set here")
            env[name] = os.environ[var]
        try:
            res = await runner.run(list(args["argv"]), cwd=args.get("cwd"), env=env, on_output=on_output)
        except CommandNotFound as exc:
            raise CommandFailed(str(exc)) from None
        result: dict[str, Any] = {"exit_code": res.exit_code, "host": runner.host,
                                  "stdout_tail": res.stdout_tail[-2000:], "stderr_tail": res.stderr_tail[-2000:]}
        found = SBATCH_ID.search(res.stdout_tail)
        if found:
            result["slurm_job_id"] = found.group(1)
        step.result = result
        if res.error:
            raise CommandFailed(f"{step.label}: {res.error}")
        if res.exit_code not in args.get("ok_codes", [0]):
            last = (res.stderr_tail or res.stdout_tail).strip().splitlines()[-1:] or ["no output"]
            raise CommandFailed(f"{step.label}: exit code {res.exit_code}: {last[0][:300]}")
        return result

    async def undo_check(self, step: ExternalStep, ctx: StepContext) -> str | None:
        return f"{step.label} ran a command, which cannot be undone"

    async def undo(self, step: ExternalStep, ctx: StepContext) -> None:
        raise CommandFailed(f"{step.label} cannot be undone")


register_handler("command", CommandHandler())
