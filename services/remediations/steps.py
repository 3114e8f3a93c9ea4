"""The steps a plan is made of, and how each is done, checked on the target, and undone.

A step's state is always read from the target itself, never from the record alone: a kill can
land between a rename and the mark that says it happened.
"""

from __future__ import annotations

import posixpath
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, Field

from services.transport.fs import JobFS, LocalFS

# what the write path reads whole from a target (an aggregate result.json, a record); more is refused
MAX_READ_BYTES = 64 * 1024 * 1024


class MoveStep(BaseModel):
    """Rename `src` to `dst` (same filesystem, never over anything). Inverse: rename back."""

    kind: Literal["move"] = "move"
    src: str
    dst: str
    label: str = Field("", description="what people call it: the trial dir relative to the job dir")


class WriteFileStep(BaseModel):
    """Replace `path` (whose content hashed `old_sha256` when planned; None: absent) with
    `content`, keeping the original at `backup`. Inverse: put the backup back, but only over
    the content this step wrote."""

    kind: Literal["write_file"] = "write_file"
    path: str
    content: str = Field(description="the new content, UTF-8 text (JSON files)")
    new_sha256: str
    old_sha256: str | None
    backup: str
    label: str = ""


class ExternalStep(BaseModel):
    """A step carried out by a handler registered for `handler` (a command run on a host, a
    leaderboard row write, an upload). `args` is its data (never a secret's value);
    `inverse` says whether it can be undone; `result` is filled in when it ran."""

    kind: Literal["external"] = "external"
    handler: str
    label: str
    args: dict[str, Any] = Field(default_factory=dict)
    inverse: bool = False
    result: dict[str, Any] = Field(default_factory=dict)


Step = Annotated[MoveStep | WriteFileStep | ExternalStep, Field(discriminator="kind")]


class ExternalHandler(Protocol):
    """How an `ExternalStep` kind is done, checked and undone; registered in `HANDLERS`."""

    async def state(self, step: ExternalStep, ctx: StepContext) -> Literal["done", "not_done", "conflict"]: ...

    async def do(self, step: ExternalStep, ctx: StepContext) -> dict[str, Any]: ...

    async def undo_check(self, step: ExternalStep, ctx: StepContext) -> str | None:
        """None when the step can be undone now, else what changed since it ran."""
        ...

    async def undo(self, step: ExternalStep, ctx: StepContext) -> None: ...


HANDLERS: dict[str, ExternalHandler] = {}


def register_handler(name: str, handler: ExternalHandler) -> None:
    HANDLERS[name] = handler


class StepContext:
    """What steps act on: the target's fs and whatever external handlers need (a leaderboard
    client, a process runner …) by name."""

    def __init__(self, fs: JobFS | None = None, **resources: Any) -> None:
        self.fs: JobFS = fs or LocalFS()
        self.resources: dict[str, Any] = resources


StepState = Literal["done", "not_done", "conflict"]


async def _exists(fs: JobFS, path: str) -> bool:
    return await fs.stat(path) is not None


async def step_state(step: Step, ctx: StepContext) -> tuple[StepState, str]:
    """Where the target stands for one step, read from the target itself (never from the log
    alone: a kill can land between a rename and its mark)."""
    fs = ctx.fs
    if isinstance(step, MoveStep):
        src, dst = await _exists(fs, step.src), await _exists(fs, step.dst)
        if dst and not src:
            return "done", ""
        if src and not dst:
            return "not_done", ""
        if src and dst:
            return "conflict", f"{step.label or step.src}: both {step.src} and {step.dst} exist"
        return "conflict", f"{step.label or step.src}: neither {step.src} nor {step.dst} exists"
    if isinstance(step, WriteFileStep):
        current = await fs.sha256(step.path, MAX_READ_BYTES)
        if current == step.new_sha256:
            return "done", ""
        if current == step.old_sha256:
            return "not_done", ""
        return "conflict", f"{step.label or step.path}: changed since it was planned (sha256 {str(current)[:12]})"
    handler = HANDLERS.get(step.handler)
    if handler is None:
        return "conflict", f"no handler for {step.handler!r} steps in this evaldesk"
    return await handler.state(step, ctx), ""


async def do_step(step: Step, ctx: StepContext) -> dict[str, Any]:
    fs = ctx.fs
    if isinstance(step, MoveStep):
        await fs.makedirs(posixpath.dirname(step.dst))
        await fs.rename(step.src, step.dst)
        return {}
    if isinstance(step, WriteFileStep):
        if step.old_sha256 is not None:
            original = await fs.read_regular(step.path, MAX_READ_BYTES)
            await fs.makedirs(posixpath.dirname(step.backup))
            if not await _exists(fs, step.backup):
                await fs.write_bytes_atomic(step.backup, original)
        await fs.write_bytes_atomic(step.path, step.content.encode("utf-8"))
        return {}
    handler = HANDLERS[step.handler]
    return await handler.do(step, ctx)


async def undo_check(step: Step, ctx: StepContext) -> str | None:
    """None when undoing `step` restores without overwriting anything newer; else what changed."""
    fs = ctx.fs
    if isinstance(step, MoveStep):
        src, dst = await _exists(fs, step.src), await _exists(fs, step.dst)
        if src:
            return f"{step.label or step.src} was re-created in the job since; the moved copy stays at {step.dst}"
        if not dst:
            return f"{step.label or step.src}: the moved copy at {step.dst} is gone"
        return None
    if isinstance(step, WriteFileStep):
        current = await fs.sha256(step.path, MAX_READ_BYTES)
        if current != step.new_sha256:
            return (f"{step.label or step.path} changed since it was written "
                    f"(sha256 now {str(current)[:12]}, evaldesk wrote {step.new_sha256[:12]})")
        if step.old_sha256 is not None and await fs.sha256(step.backup, MAX_READ_BYTES) != step.old_sha256:
            return f"the backup {step.backup} no longer holds the original"
        return None
    handler = HANDLERS.get(step.handler)
    if handler is None:
        return f"no handler for {step.handler!r} steps in this evaldesk"
    if not step.inverse:
        return f"{step.label} cannot be undone"
    return await handler.undo_check(step, ctx)


async def undo_step(step: Step, ctx: StepContext) -> None:
    fs = ctx.fs
    if isinstance(step, MoveStep):
        await fs.makedirs(posixpath.dirname(step.src))
        await fs.rename(step.dst, step.src)
        return
    if isinstance(step, WriteFileStep):
        if step.old_sha256 is None:
            await fs.remove_file(step.path)
        else:
            await fs.write_bytes_atomic(step.path, await fs.read_regular(step.backup, MAX_READ_BYTES))
        return
    await HANDLERS[step.handler].undo(step, ctx)


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename:
        reason = exc.strerror or type(exc).__name__
        return f"{reason}: {exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 else "")
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, OSError) else str(exc)
