"""File access for job dirs, local or remote, behind one async interface.

Remediations and the log tail use only this, so the same code moves a trial dir on local
disk or over SFTP. Paths are absolute POSIX strings on the machine that holds the files.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime: float
    is_dir: bool


class JobFS(Protocol):
    async def stat(self, path: str) -> FileStat | None: ...

    async def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes: ...

    async def list_dir(self, path: str) -> list[str]: ...

    async def rename(self, src: str, dst: str) -> None: ...

    async def makedirs(self, path: str) -> None: ...

    async def write_bytes_atomic(self, path: str, data: bytes) -> None: ...

    async def remove_file(self, path: str) -> None: ...


class LocalFS:
    """The local disk; blocking calls run in threads so the event loop never waits on IO."""

    async def stat(self, path: str) -> FileStat | None:
        return await asyncio.to_thread(self._stat, path)

    @staticmethod
    def _stat(path: str) -> FileStat | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        import stat as st_mod

        return FileStat(st.st_size, st.st_mtime, st_mod.S_ISDIR(st.st_mode))

    async def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        return await asyncio.to_thread(self._read, path, offset, length)

    @staticmethod
    def _read(path: str, offset: int, length: int | None) -> bytes:
        with open(path, "rb") as fh:
            if offset:
                fh.seek(offset)
            return fh.read() if length is None else fh.read(length)

    async def list_dir(self, path: str) -> list[str]:
        return await asyncio.to_thread(lambda: sorted(os.listdir(path)))

    async def rename(self, src: str, dst: str) -> None:
        def _mv() -> None:
            if os.path.lexists(dst):
                raise FileExistsError(f"refusing to overwrite {dst}")
            try:
                os.rename(src, dst)
            except OSError:
                # across filesystems; the quarantine normally sits in the same job dir
                shutil.move(src, dst)

        await asyncio.to_thread(_mv)

    async def makedirs(self, path: str) -> None:
        await asyncio.to_thread(os.makedirs, path, exist_ok=True)

    async def write_bytes_atomic(self, path: str, data: bytes) -> None:
        def _write() -> None:
            tmp = f"{path}.evaldesk-tmp-{os.getpid()}"
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)

        await asyncio.to_thread(_write)

    async def remove_file(self, path: str) -> None:
        await asyncio.to_thread(os.remove, path)
