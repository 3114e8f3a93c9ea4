"""The steps a plan is made of, and how each is done, checked on the target, and undone.

A step's state is always read from the target itself, never from the record alone: a kill can
land between a rename and the mark that says it happened. Reading the target never blocks on
a fifo, never reads more than `MAX_READ_BYTES`, and an unreadable file is a conflict that says
why, not an exception.
"""

from __future__ import annotations

import errno
import hashlib
import posixpath
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from services.transport.fs import READ_TIMEOUT_S, JobFS, LocalFS

# what the write path reads whole from a target (an aggregate result.json, a record); more is refused
MAX_READ_BYTES = 64 * 1024 * 1024


@dataclass(kw_only=True)
class MoveStep:
    """Rename `src` to `dst` (same filesystem, never over anything). Inverse: rename back."""

    kind: Literal["move"] = "move"
    src: str
    dst: str
    label: str = field(default="", metadata={
        "description": "what people call it: the trial dir relative to the job dir"})


@dataclass(kw_only=True)
class WriteFileStep:
    """Replace `path` (whose content hashed `old_sha256` when planned; None: absent) with
    `content`, keeping the original at `backup`. Inverse: put the backup back, but only over
    the content this step wrote."""

    kind: Literal["write_file"] = "write_file"
    path: str
    content: str = field(metadata={"description": "the new content, UTF-8 text (JSON files)"})
    new_sha256: str
    old_sha256: str | None
    backup: str
    label: str = ""


@dataclass(kw_only=True)
class ExternalStep:
    """A step carried out by a handler registered for `handler` (a command run on a host, a
    leaderboard row write, an upload). `args` is its data (never a secret's value);
    `inverse` says whether it can be undone; `result` is filled in when it ran.

    A result holding `before` and `after` (a leaderboard row as it was and as it became) is
    carried into the journal's entry for the write, under the step's label."""

    kind: Literal["external"] = "external"
    handler: str
    label: str
    args: dict[str, Any] = field(default_factory=dict)
    inverse: bool = False
    result: dict[str, Any] = field(default_factory=dict)


# (told apart by `kind`: each step's Literal admits only its own word)
Step = MoveStep | WriteFileStep | ExternalStep


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


def _no_checkpoint(name: str) -> None:
    return None


async def _no_note(result: dict[str, Any]) -> None:
    return None


class StepContext:
    """What steps act on: the target's fs and whatever external handlers need (a leaderboard
    client, a process runner …) by name. `checkpoint(name)` marks a point inside a step where
    an interruption splits its state (the write path names it `step:<i>:<name>`); a handler
    with such points calls it too. `note(result)` records a step's partial result durably
    before it goes on (a command marked *started*, with its pid, before it runs)."""

    def __init__(self, fs: JobFS | None = None, **resources: Any) -> None:
        self.fs: JobFS = fs or LocalFS()
        self.resources: dict[str, Any] = resources
        self.checkpoint: Callable[[str], None] = _no_checkpoint
        self.note: Callable[[dict[str, Any]], Awaitable[None]] = _no_note


class StepConflict(Exception):
    """The target is not what the step expects (it changed since the plan was made)."""


StepState = Literal["done", "not_done", "conflict"]


async def _exists(fs: JobFS, path: str) -> bool:
    return await fs.stat(path) is not None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def _digest(fs: JobFS, path: str) -> tuple[str | None, str]:
    """(sha256 or None when absent, "" or why it cannot be read)."""
    try:
        return await fs.sha256(path, MAX_READ_BYTES), ""
    except (OSError, TimeoutError) as exc:
        return None, describe_error(exc)


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
            return "conflict", (f"{step.label or step.src} is in the job again (re-created since it was moved) "
                                f"and its moved copy is still at {step.dst}")
        return "conflict", f"{step.label or step.src} is gone: neither {step.src} nor its moved copy {step.dst} exists"
    if isinstance(step, WriteFileStep):
        current, why = await _digest(fs, step.path)
        if why:
            return "conflict", f"{step.label or step.path} cannot be read: {why}"
        if current == step.new_sha256:
            return "done", ""
        if current == step.old_sha256:
            return "not_done", ""
        now = "is gone" if current is None else f"now hashes {current[:12]}"
        return "conflict", (f"{step.label or step.path} changed since it was planned ({now}; the plan read "
                            f"{(step.old_sha256 or 'no file')[:12]} and writes {step.new_sha256[:12]})")
    handler = HANDLERS.get(step.handler)
    if handler is None:
        return "conflict", f"no handler for {step.handler!r} steps in this evaldesk"
    said = getattr(handler, "state_detail", None)
    if said is not None:  # a handler that can say why a step is in conflict
        found: tuple[StepState, str] = await said(step, ctx)
        return found
    return await handler.state(step, ctx), ""


async def do_step(step: Step, ctx: StepContext) -> dict[str, Any]:
    fs = ctx.fs
    if isinstance(step, MoveStep):
        await fs.makedirs(posixpath.dirname(step.dst))
        ctx.checkpoint("dirs")
        await fs.rename(step.src, step.dst)
        return {}
    if isinstance(step, WriteFileStep):
        await _write_file(step, ctx)
        return {}
    handler = HANDLERS[step.handler]
    return await handler.do(step, ctx)


async def _write_file(step: WriteFileStep, ctx: StepContext) -> None:
    fs = ctx.fs
    if step.old_sha256 is None:
        if await _exists(fs, step.path):
            raise StepConflict(f"{step.label or step.path} appeared since it was planned; not overwritten")
    elif await _exists(fs, step.backup):
        # a run that was interrupted after its backup: the backup must be the original
        have, why = await _digest(fs, step.backup)
        if have != step.old_sha256:
            raise StepConflict(f"the backup {step.backup} is not the original ({why or 'different content'})")
    else:
        original = await fs.read_regular(step.path, MAX_READ_BYTES)
        if sha256_hex(original) != step.old_sha256:
            raise StepConflict(f"{step.label or step.path} changed since it was planned; not overwritten")
        await fs.makedirs(posixpath.dirname(step.backup))
        await fs.write_bytes_atomic(step.backup, original)
    ctx.checkpoint("backup")
    await fs.write_bytes_atomic(step.path, step.content.encode("utf-8"))


async def undo_check(step: Step, ctx: StepContext) -> str | None:
    """None when undoing `step` restores without overwriting anything newer; else what changed."""
    fs = ctx.fs
    if isinstance(step, MoveStep):
        src, dst = await _exists(fs, step.src), await _exists(fs, step.dst)
        if src and dst:
            return (f"{step.label or step.src} was re-created in the job since; its moved copy stays at {step.dst} "
                    "(move one of them away, then undo again)")
        if not dst:
            return f"{step.label or step.src}: its moved copy {step.dst} is gone (deleted since?)"
        return None
    if isinstance(step, WriteFileStep):
        current, why = await _digest(fs, step.path)
        if why:
            return f"{step.label or step.path} cannot be read: {why}"
        if current != step.new_sha256:
            now = "is gone" if current is None else f"sha256 now {current[:12]}"
            return (f"{step.label or step.path} changed since evaldesk wrote it ({now}, evaldesk wrote "
                    f"{step.new_sha256[:12]}): putting the original back would destroy the newer content")
        if step.old_sha256 is not None:
            backup, why = await _digest(fs, step.backup)
            if why:
                return f"the original of {step.label or step.path} cannot be read at {step.backup}: {why}"
            if backup is None:
                return f"the original of {step.label or step.path} is gone from {step.backup}"
            if backup != step.old_sha256:
                return f"the backup {step.backup} no longer holds the original of {step.label or step.path}"
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
            return
        original = await fs.read_regular(step.backup, MAX_READ_BYTES)
        if sha256_hex(original) != step.old_sha256:
            raise StepConflict(f"the backup {step.backup} no longer holds the original")
        await fs.write_bytes_atomic(step.path, original)
        return
    await HANDLERS[step.handler].undo(step, ctx)


def step_text(step: Step, undo: bool = False) -> str:
    """One line saying what a step does (or what its undo does), for previews and journals."""
    if isinstance(step, MoveStep):
        return f"restore {step.label or step.src}" if undo else f"move {step.label or step.src}"
    if isinstance(step, WriteFileStep):
        name = step.label or step.path
        return f"put back the original {name}" if undo else f"rewrite {name}"
    return f"undo {step.label}" if undo else step.label


def describe_error(exc: BaseException) -> str:
    """What went wrong and where, for a person: "Permission denied: /jobs/j/t -> /jobs/j/q/t"."""
    if isinstance(exc, OSError) and exc.filename:
        reason = exc.strerror or type(exc).__name__
        if exc.errno == errno.EXDEV:
            reason += " (a rename cannot cross filesystems, and evaldesk never copies instead)"
        return f"{reason}: {exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 else "")
    if isinstance(exc, TimeoutError):
        return f"gave up after {READ_TIMEOUT_S:.0f} s (a file that does not answer)"
    if isinstance(exc, (StepConflict, OSError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
