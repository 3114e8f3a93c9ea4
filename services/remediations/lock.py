"""One writer per target: `<dir>/.evaldesk-lock`, made by an atomic mkdir (it works over SFTP
too), with `owner.json` inside saying who holds it and since when.

A lock is stale when its holder is provably gone (a pid that is not running on this host),
when it is older than `STALE_LOCK_S`, or when it has had no owner for longer than a writer
needs to say who it is. A stale lock is never taken silently: breaking it is an explicit
request (`break_stale`), made after a person confirmed it — except by recovery, which may
take over a lock whose holder is provably dead and was working on the very record being
recovered (see `WritePath`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import posixpath
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from services.core.journal import current_user
from services.core.plain import dump, validate
from services.remediations.errors import LockHeld, TargetUnwritable, WriteRefused
from services.remediations.records import dump_json
from services.remediations.steps import describe_error
from services.transport.fs import TMP_MARK, JobFS

LOCK_DIR = ".evaldesk-lock"
OWNER_FILE = "owner.json"

STALE_LOCK_S = 6 * 3600.0

# mkdir and writing owner.json are a few milliseconds apart; an owner missing for longer
# than this means the writer died in between
OWNERLESS_GRACE_S = 60.0


@dataclass(kw_only=True)
class LockOwner:
    host: str
    pid: int
    user: str
    started_at: datetime
    action: str = ""
    record: str = ""

    def __post_init__(self) -> None:
        # an owner.json written by hand (or by an old evaldesk) may lack the zone: it is UTC
        if self.started_at.tzinfo is None:
            self.started_at = self.started_at.replace(tzinfo=UTC)

    def describe(self, now: datetime | None = None) -> str:
        age = ((now or datetime.now(UTC)) - self.started_at).total_seconds()
        what = f" ({self.action} {self.record})" if self.action else ""
        since = f"{self.started_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        return f"{self.user}@{self.host} pid {self.pid}{what}, since {since} ({_age(age)} ago)"

    @property
    def here(self) -> bool:
        return self.host == socket.gethostname()


def _age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def provably_dead(owner: LockOwner | None) -> bool:
    """True only when the holder cannot be running: its pid is gone on this very host."""
    return owner is not None and owner.here and not pid_alive(owner.pid)


class DirLock:
    """`<dir>/.evaldesk-lock`, made by an atomic mkdir; `owner.json` inside says who holds it."""

    def __init__(self, fs: JobFS, target_dir: str) -> None:
        self.fs = fs
        self.target = target_dir
        self.path = posixpath.join(target_dir, LOCK_DIR)
        self.owner_path = posixpath.join(self.path, OWNER_FILE)
        self.held = False

    async def owner(self) -> LockOwner | None:
        try:
            return validate(LockOwner, json.loads(await self.fs.read_regular(self.owner_path, 64 * 1024)))
        except (OSError, ValueError):
            return None

    @staticmethod
    def stale_reason(owner: LockOwner | None, now: datetime | None = None,
                     lock_age_s: float | None = None) -> str | None:
        if owner is None:
            if lock_age_s is not None and lock_age_s > OWNERLESS_GRACE_S:
                return (f"it has had no owner for {_age(lock_age_s)}: the writer died right after "
                        "taking it")
            return None
        now = now or datetime.now(UTC)
        if owner.here and not pid_alive(owner.pid):
            return f"pid {owner.pid} is not running on {owner.host}"
        age = (now - owner.started_at).total_seconds()
        if age > STALE_LOCK_S:
            return f"held for {age / 3600:.1f} h, over the {STALE_LOCK_S / 3600:.0f} h limit"
        return None

    async def inspect(self) -> tuple[LockOwner | None, str | None] | None:
        """None when nobody holds the lock, else (holder, why it looks stale or None)."""
        st = await self.fs.stat(self.path)
        if st is None:
            return None
        owner = await self.owner()
        age = time.time() - st.mtime if st.mtime else None
        return owner, self.stale_reason(owner, lock_age_s=age)

    def _held_by_other(self, owner: LockOwner | None, reason: str | None) -> LockHeld:
        return LockHeld(owner, self.path, reason, self.target)

    async def acquire(self, action: str, record: str) -> None:
        me = LockOwner(host=socket.gethostname(), pid=os.getpid(), user=current_user(),
                       started_at=datetime.now(UTC), action=action, record=record)
        try:
            await self.fs.mkdir_exclusive(self.path)
        except FileExistsError:
            found = await self.inspect()
            if found is not None and found[0] is None:
                # the holder may still be writing owner.json: give it a moment before calling it ownerless
                await asyncio.sleep(0.2)
                found = await self.inspect()
            if found is None:  # released while we looked: one more try, then report whoever won
                try:
                    await self.fs.mkdir_exclusive(self.path)
                except FileExistsError:
                    found = await self.inspect() or (None, None)
                    raise self._held_by_other(*found) from None
            else:
                raise self._held_by_other(*found) from None
        except OSError as exc:
            raise TargetUnwritable(f"cannot lock {self.target}: {describe_error(exc)}; nothing was changed") from None
        self.held = True
        try:
            await self.fs.write_bytes_atomic(self.owner_path, dump_json(dump(me, json=True)))
        except OSError as exc:
            self.held = False
            with contextlib.suppress(OSError):
                await self._clear(self.path)
            raise TargetUnwritable(f"cannot lock {self.target}: {describe_error(exc)}; nothing was changed") from None

    async def release(self) -> None:
        if not self.held:
            return
        await self._clear(self.path)
        self.held = False

    async def _clear(self, path: str) -> list[str]:
        """Remove a lock dir evaldesk made: owner.json and temporary files of its writes.
        Returns what else was found there (left in place, and the dir with it)."""
        others = []
        try:
            names = await self.fs.list_dir(path)
        except FileNotFoundError:
            return []
        for name in names:
            if name == OWNER_FILE or (name.startswith(f".{OWNER_FILE}") and TMP_MARK in name):
                with contextlib.suppress(FileNotFoundError):
                    await self.fs.remove_file(posixpath.join(path, name))
            else:
                others.append(name)
        if not others:
            await self.fs.rmdir(path)
        return others

    async def break_stale(self, expected: LockOwner | None) -> LockOwner | None:
        """Remove a lock judged stale — only if it is still held by `expected` and still
        stale. Returns the holder whose lock was broken."""
        found = await self.inspect()
        if found is None:
            return None  # gone already: nothing to break
        owner, reason = found
        if (dump(owner) if owner else None) != (dump(expected) if expected else None):
            raise WriteRefused(f"{self.path} changed hands while you decided; it was not broken")
        if reason is None:
            who = owner.describe() if owner else "a writer that is still taking it"
            raise WriteRefused(f"{self.path} is held by a live writer ({who}); it was not broken")
        # rename first: a second breaker, or the holder's own release, then finds nothing to remove
        grave = f"{self.path}.broken-{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{os.getpid()}"
        try:
            await self.fs.rename(self.path, grave)
        except FileNotFoundError:
            return None
        try:
            taken = validate(LockOwner, json.loads(
                await self.fs.read_regular(posixpath.join(grave, OWNER_FILE), 64 * 1024)))
        except (OSError, ValueError):
            taken = None
        if (dump(taken) if taken else None) != (dump(owner) if owner else None):
            # a new writer took the lock between the look and the rename: give it back
            with contextlib.suppress(OSError):
                await self.fs.rename(grave, self.path)
            raise WriteRefused(f"{self.path} changed hands while it was being broken; it was left to its new holder")
        others = await self._clear(grave)
        if others:
            raise WriteRefused(f"the stale lock was moved to {grave}, which holds files evaldesk did not put there "
                               f"({', '.join(others[:5])}); look at them, then remove it")
        return owner
