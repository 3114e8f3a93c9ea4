"""The write path's two AISBench steps.

`aisbench_model_config` writes a task's model config — the one file that holds the API key —
on the eval host:

    ExternalStep(handler="aisbench_model_config", label="write cfg/models/api_model.py", args={
        "path": "<task dir>/cfg/models/api_model.py",
        "template": "... api_key=\"__EVALDESK_API_KEY__\" ...",   # the config without the key
        "key_env": "AISBENCH_API_KEY" | None,                      # where the key is read, here
    })

The key is read from this process's environment when the step runs and goes straight into the
file on the target. It is never in the step's args or result, so never in the plan, the
record, the journal, the preview or any output; a missing variable is a clear error naming it.

`aisbench_launched` marks the task's row in the task table as launched (evaldesk's own
bookkeeping, so that a task dir that later disappears shows as `removed`); undo clears it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from typing import Any, Literal

from services.aisbench.taskdir import with_key
from services.remediations.steps import MAX_READ_BYTES, ExternalStep, StepContext, register_handler

HANDLER = "aisbench_model_config"


class MissingKey(OSError):
    pass


def model_config_step(path: str, template: str, key_env: str | None,
                      label: str = "cfg/models/api_model.py") -> ExternalStep:
    return ExternalStep(handler=HANDLER, label=f"write {label} (holds the API key)",
                        args={"path": path, "template": template, "key_env": key_env,
                              "template_sha256": hashlib.sha256(template.encode()).hexdigest()},
                        inverse=True)


def _key(step: ExternalStep) -> str | None:
    var = step.args.get("key_env")
    if not var:
        return ""
    return os.environ.get(str(var))


def _content(step: ExternalStep) -> bytes | None:
    key = _key(step)
    return None if key is None else with_key(str(step.args["template"]), key).encode("utf-8")


class ModelConfigHandler:
    async def state(self, step: ExternalStep, ctx: StepContext) -> Literal["done", "not_done", "conflict"]:
        current = await ctx.fs.sha256(str(step.args["path"]), MAX_READ_BYTES)
        if current is None:
            return "not_done"
        if step.result.get("written"):
            return "done"
        want = _content(step)
        if want is not None and hashlib.sha256(want).hexdigest() == current:
            return "done"
        return "conflict"

    async def do(self, step: ExternalStep, ctx: StepContext) -> dict[str, Any]:
        content = _content(step)
        if content is None:
            raise MissingKey(f"{step.label}: the environment variable {step.args.get('key_env')} is not set here "
                             "(it holds the model API key)")
        await ctx.fs.write_bytes_atomic(str(step.args["path"]), content)
        step.result = {"written": True}
        return dict(step.result)

    async def undo_check(self, step: ExternalStep, ctx: StepContext) -> str | None:
        if await ctx.fs.stat(str(step.args["path"])) is None:
            return f"{step.args['path']} is already gone"
        return None

    async def undo(self, step: ExternalStep, ctx: StepContext) -> None:
        await ctx.fs.remove_file(str(step.args["path"]))


LAUNCHED = "aisbench_launched"


def launched_step(task_id: str, launched_at: str) -> ExternalStep:
    return ExternalStep(handler=LAUNCHED, label="mark the task launched in the task table",
                        args={"task_id": task_id, "launched_at": launched_at}, inverse=True)


class LaunchedHandler:
    """Needs `ctx.resources["table"]` (the source's TaskTable)."""

    @staticmethod
    async def _row(step: ExternalStep, ctx: StepContext) -> Any:
        table = ctx.resources.get("table")
        if table is None:
            raise OSError(f"{step.label}: no task table in this context")
        return table, await asyncio.to_thread(table.get, str(step.args["task_id"]))

    async def state(self, step: ExternalStep, ctx: StepContext) -> Literal["done", "not_done", "conflict"]:
        _, row = await self._row(step, ctx)
        if row is None:
            return "conflict"
        stamp = row.launched_at.isoformat() if row.launched_at else None
        return "done" if stamp == step.args["launched_at"] else "not_done"

    async def do(self, step: ExternalStep, ctx: StepContext) -> dict[str, Any]:
        from datetime import datetime

        table, row = await self._row(step, ctx)
        if row is None:
            raise OSError(f"{step.label}: task {step.args['task_id']} is no longer in the table")
        await asyncio.to_thread(table.put, row.model_copy(
            update={"launched_at": datetime.fromisoformat(str(step.args["launched_at"]))}))
        return {}

    async def undo_check(self, step: ExternalStep, ctx: StepContext) -> str | None:
        return None if await self.state(step, ctx) == "done" else "the task's row changed since"

    async def undo(self, step: ExternalStep, ctx: StepContext) -> None:
        table, row = await self._row(step, ctx)
        if row is not None:
            await asyncio.to_thread(table.put, row.model_copy(update={"launched_at": None}))


register_handler(HANDLER, ModelConfigHandler())
register_handler(LAUNCHED, LaunchedHandler())
