"""File access for job dirs, local or remote, behind one async interface.

Remediations and the log tail use only this, so the same code moves a trial dir on local
disk or over SFTP. Paths are absolute POSIX strings on the machine that holds the files;
names that are not UTF-8 travel as str with surrogate escapes (os.fsdecode), never mangled.

What the write path relies on: `rename` never overwrites (renameat2's RENAME_NOREPLACE where
the filesystem has it) and never falls back to a copy; `write_bytes_atomic` is a temporary
file in the same dir (named `.<name>.evaldesk-tmp-…`, so one a crash leaves behind can be
found and removed), fsync'd, renamed over the target (keeping the target's mode) and the dir
fsync'd; `mkdir_exclusive` is atomic (the lock); `read_regular` refuses fifos and devices,
caps the size and gives up after a timeout.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import hashlib
import os
import signal
import stat as st_mod
from dataclasses import dataclass
from typing import Any, Protocol

from services.core.statefile import TMP_MARK, fsync_dir, write_atomic

READ_TIMEOUT_S = 30.0


# Named points on the write path where the process can be made to die (SIGKILL) or stop
# (SIGSTOP): how the kill tests prove that every interruption is recoverable.
CRASH_ENV = "EVALDESK_CRASH_AT"
STOP_ENV = "EVALDESK_STOP_AT"


def checkpoint(name: str) -> None:
    """Die here when EVALDESK_CRASH_AT names this point; stop here for EVALDESK_STOP_AT."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(STOP_ENV) == name:
        os.kill(os.getpid(), signal.SIGSTOP)


def tmp_prefix(path: str) -> str:
    """The name prefix of the temporary files an atomic write of `path` uses."""
    return f".{os.path.basename(path)}{TMP_MARK}"


class NotRegularFile(OSError):
    """A path that is a fifo, socket, device or dir where a regular file was expected."""


class TooLarge(OSError):
    """A file over the size a caller is willing to read whole."""


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime: float
    is_dir: bool
    is_file: bool = True
    mode: int = 0
    is_link: bool = False


class JobFS(Protocol):
    async def stat(self, path: str) -> FileStat | None: ...

    async def lstat(self, path: str) -> FileStat | None:
        """Like `stat`, but a symlink is described as itself (`is_link`), never followed."""
        ...

    async def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes: ...

    async def read_regular(self, path: str, max_bytes: int, timeout_s: float = READ_TIMEOUT_S) -> bytes:
        """The whole of a regular file no larger than `max_bytes`; NotRegularFile / TooLarge otherwise."""
        ...

    async def sha256(self, path: str, max_bytes: int) -> str | None:
        """The hex digest of a regular file, None when it does not exist."""
        ...

    async def list_dir(self, path: str) -> list[str]: ...

    async def rename(self, src: str, dst: str) -> None: ...

    async def makedirs(self, path: str) -> None: ...

    async def mkdir_exclusive(self, path: str) -> None:
        """Create one dir; FileExistsError when it is already there (atomic: the lock)."""
        ...

    async def rmdir(self, path: str) -> None:
        """Remove an empty dir."""
        ...

    async def write_bytes_atomic(self, path: str, data: bytes) -> None: ...

    async def append_durable(self, path: str, data: bytes) -> None:
        """Append and fsync: the write-ahead log's step marks."""
        ...

    async def remove_file(self, path: str) -> None: ...


def _load_renameat2() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not glibc ≥ 2.28, or not Linux
        return None


_RENAMEAT2 = _load_renameat2()
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def rename_noreplace(src: str, dst: str) -> None:
    """rename(2) that fails with FileExistsError instead of replacing `dst` — atomically where
    the filesystem supports RENAME_NOREPLACE, else by looking first. Never a copy."""
    if _RENAMEAT2 is not None:
        rc = _RENAMEAT2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)
        if rc == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), src, None, dst)
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, "refusing to overwrite", dst)
    os.rename(src, dst)


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
        return FileStat(st.st_size, st.st_mtime, st_mod.S_ISDIR(st.st_mode), st_mod.S_ISREG(st.st_mode),
                        st_mod.S_IMODE(st.st_mode))

    async def lstat(self, path: str) -> FileStat | None:
        def _lstat() -> FileStat | None:
            try:
                st = os.lstat(path)
            except OSError:
                return None
            return FileStat(st.st_size, st.st_mtime, st_mod.S_ISDIR(st.st_mode), st_mod.S_ISREG(st.st_mode),
                            st_mod.S_IMODE(st.st_mode), st_mod.S_ISLNK(st.st_mode))

        return await asyncio.to_thread(_lstat)

    async def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        return await asyncio.to_thread(self._read, path, offset, length)

    @staticmethod
    def _read(path: str, offset: int, length: int | None) -> bytes:
        # O_NONBLOCK: opening a fifo must not wait for a writer that never comes
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not st_mod.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise NotRegularFile(f"{path}: not a regular file")
            if offset:
                fh.seek(offset)
            return fh.read() if length is None else fh.read(length)

    async def read_regular(self, path: str, max_bytes: int, timeout_s: float = READ_TIMEOUT_S) -> bytes:
        def _read() -> bytes:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                if not st_mod.S_ISREG(st.st_mode):
                    raise NotRegularFile(f"{path}: not a regular file")
                if st.st_size > max_bytes:
                    raise TooLarge(f"{path}: {st.st_size:,} bytes, over the {max_bytes:,} byte limit")
                data = fh.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise TooLarge(f"{path}: grew past the {max_bytes:,} byte limit while being read")
            return data

        return await asyncio.wait_for(asyncio.to_thread(_read), timeout_s)

    async def sha256(self, path: str, max_bytes: int) -> str | None:
        def _hash() -> str | None:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except FileNotFoundError:
                return None
            h = hashlib.sha256()
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                if not st_mod.S_ISREG(st.st_mode):
                    raise NotRegularFile(f"{path}: not a regular file")
                if st.st_size > max_bytes:
                    raise TooLarge(f"{path}: {st.st_size:,} bytes, over the {max_bytes:,} byte limit")
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            return h.hexdigest()

        return await asyncio.wait_for(asyncio.to_thread(_hash), READ_TIMEOUT_S)

    async def list_dir(self, path: str) -> list[str]:
        return await asyncio.to_thread(lambda: sorted(os.listdir(path)))

    async def rename(self, src: str, dst: str) -> None:
        def _mv() -> None:
            # a rename or nothing: a copy-then-delete that fails halfway leaves the trial twice
            rename_noreplace(src, dst)
            fsync_dir(os.path.dirname(dst))
            if os.path.dirname(src) != os.path.dirname(dst):
                fsync_dir(os.path.dirname(src))

        await asyncio.to_thread(_mv)

    async def makedirs(self, path: str) -> None:
        await asyncio.to_thread(os.makedirs, path, exist_ok=True)

    async def mkdir_exclusive(self, path: str) -> None:
        def _mk() -> None:
            os.mkdir(path)
            fsync_dir(os.path.dirname(path))

        await asyncio.to_thread(_mk)

    async def rmdir(self, path: str) -> None:
        await asyncio.to_thread(os.rmdir, path)

    async def write_bytes_atomic(self, path: str, data: bytes) -> None:
        await asyncio.to_thread(write_atomic, path, data,
                                before_replace=lambda: checkpoint(f"write:{os.path.basename(path)}"))

    async def append_durable(self, path: str, data: bytes) -> None:
        def _append() -> None:
            new = not os.path.lexists(path)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            if new:  # the file's name must survive a crash as well as its bytes
                fsync_dir(os.path.dirname(path))

        await asyncio.to_thread(_append)

    async def remove_file(self, path: str) -> None:
        await asyncio.to_thread(os.remove, path)
