"""One writer per target: `<dir>/.evaldesk-lock`, made by an atomic mkdir (it works over SFTP
too), with `owner.json` inside saying who holds it and since when."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import posixpath
import socket
from datetime import UTC, datetime

from pydantic import BaseModel

from services.core.journal import current_user
from services.remediations.errors import LockHeld, WriteRefused
from services.remediations.records import dump_json
from services.transport.fs import JobFS

LOCK_DIR = ".evaldesk-lock"


STALE_LOCK_S = 6 * 3600.0


class LockOwner(BaseModel):
    host: str
    pid: int
    user: str
    started_at: datetime
    action: str = ""
    record: str = ""

    def describe(self) -> str:
        age = (datetime.now(UTC) - self.started_at).total_seconds()
        what = f" ({self.action} {self.record})" if self.action else ""
        since = f"{self.started_at:%Y-%m-%d %H:%M:%S} UTC"
        return f"{self.user}@{self.host} pid {self.pid}{what}, since {since} ({age:.0f} s)"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DirLock:
    """`<dir>/.evaldesk-lock`, made by an atomic mkdir; `owner.json` inside says who holds it."""

    def __init__(self, fs: JobFS, target_dir: str) -> None:
        self.fs = fs
        self.path = posixpath.join(target_dir, LOCK_DIR)
        self.owner_path = posixpath.join(self.path, "owner.json")
        self.held = False

    async def owner(self) -> LockOwner | None:
        try:
            return LockOwner.model_validate(json.loads(await self.fs.read_regular(self.owner_path, 64 * 1024)))
        except (OSError, ValueError):
            return None

    @staticmethod
    def stale_reason(owner: LockOwner | None, now: datetime | None = None) -> str | None:
        if owner is None:
            return "no owner recorded (a writer died between mkdir and writing owner.json)"
        now = now or datetime.now(UTC)
        if owner.host == socket.gethostname() and not _pid_alive(owner.pid):
            return f"pid {owner.pid} is not running on {owner.host}"
        age = (now - owner.started_at).total_seconds()
        if age > STALE_LOCK_S:
            return f"held for {age / 3600:.1f} h, over the {STALE_LOCK_S / 3600:.0f} h limit"
        return None

    async def acquire(self, action: str, record: str) -> None:
        me = LockOwner(host=socket.gethostname(), pid=os.getpid(), user=current_user(),
                       started_at=datetime.now(UTC), action=action, record=record)
        try:
            await self.fs.mkdir_exclusive(self.path)
        except FileExistsError:
            # the holder may still be writing owner.json: give it a moment before calling it ownerless
            owner = await self.owner()
            if owner is None:
                await asyncio.sleep(0.2)
                owner = await self.owner()
            raise LockHeld(owner or LockOwner(host="?", pid=0, user="?", started_at=datetime.now(UTC)),
                           self.path, self.stale_reason(owner)) from None
        self.held = True
        await self.fs.write_bytes_atomic(self.owner_path, dump_json(me.model_dump(mode="json")))

    async def release(self) -> None:
        if not self.held:
            return
        for path in (self.owner_path,):
            with contextlib.suppress(FileNotFoundError):
                await self.fs.remove_file(path)
        await self.fs.rmdir(self.path)
        self.held = False

    async def break_stale(self, expected: LockOwner | None) -> None:
        """Remove a lock judged stale — only if it is still held by `expected`."""
        now_owner = await self.owner()
        if (now_owner.model_dump() if now_owner else None) != (expected.model_dump() if expected else None):
            raise WriteRefused(f"{self.path} changed hands while you decided; not broken")
        if self.stale_reason(now_owner) is None:
            raise WriteRefused(f"{self.path} is held by a live writer ({now_owner.describe() if now_owner else '?'})")
        broken = f"{self.path}.broken-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}"
        await self.fs.rename(self.path, broken)
