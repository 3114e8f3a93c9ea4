"""JobFS over SFTP, so dedupe/undo and the log tail work on a remote job dir unchanged.

The SFTP session rides on the host's pooled connection. Renames never overwrite (SFTP's
plain rename refuses an existing target, and we check first for servers that do not); an
atomic write is a temporary file in the same directory (`.<name>.evaldesk-tmp-…`, like the
local one), fsync'd where the server offers fsync@openssh.com, given the old file's mode and
posix-renamed over the target. SFTP has no way to fsync a directory: a rename's durability is
the server's. Errors carry errno and the path, so a refusal names what was refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import posixpath
import stat as st_mod
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import asyncssh

from services.core.source import SourceUnavailable
from services.harbor import walk
from services.transport.fs import READ_TIMEOUT_S, FileStat, NotRegularFile, TooLarge, checkpoint, tmp_prefix
from services.transport.ssh import HostSpec, SSHPool, describe

_T = TypeVar("_T")
_Many = list  # (inside SFTPWalkFS, `list` is its method)


def _os_error(exc: asyncssh.SFTPError, path: str, path2: str | None = None) -> OSError:
    """The OSError (with errno and path) that a local call would have raised."""
    code = {
        asyncssh.SFTPNoSuchFile: errno.ENOENT,
        asyncssh.SFTPNoSuchPath: errno.ENOENT,
        asyncssh.SFTPPermissionDenied: errno.EACCES,
        asyncssh.SFTPFileAlreadyExists: errno.EEXIST,
        asyncssh.SFTPNoSpaceOnFilesystem: errno.ENOSPC,
        asyncssh.SFTPWriteProtect: errno.EROFS,
        asyncssh.SFTPDirNotEmpty: errno.ENOTEMPTY,
    }.get(type(exc), errno.EIO)
    return OSError(code, str(exc.reason or type(exc).__name__), path, None, path2)


class SFTPFS:
    def __init__(self, pool: SSHPool, spec: HostSpec) -> None:
        self.pool = pool
        self.spec = spec
        self._sftp: asyncssh.SFTPClient | None = None
        self._conn: asyncssh.SSHClientConnection | None = None

    async def client(self) -> asyncssh.SFTPClient:
        """The SFTP session on the host's pooled connection, reopened after a reconnect."""
        return await self._client()

    async def _client(self) -> asyncssh.SFTPClient:
        conn = await self.pool.get(self.spec)
        if self._sftp is None or self._conn is not conn:
            try:
                # a name that is not UTF-8 keeps its bytes (as os.scandir does), never fails a listing
                self._sftp = await conn.start_sftp_client(path_errors="surrogateescape")
            except (OSError, asyncssh.Error) as exc:
                raise SourceUnavailable(self.spec.label, f"cannot start SFTP: {describe(exc, self.spec)}") from None
            self._conn = conn
        return self._sftp

    async def stat(self, path: str) -> FileStat | None:
        sftp = await self._client()
        try:
            attrs = await sftp.stat(path)
        except asyncssh.SFTPError:
            return None
        perms = attrs.permissions
        is_dir = perms is not None and st_mod.S_ISDIR(perms)
        is_file = perms is None or st_mod.S_ISREG(perms)
        return FileStat(attrs.size or 0, float(attrs.mtime or 0), is_dir, is_file,
                        st_mod.S_IMODE(perms) if perms is not None else 0)

    async def lstat(self, path: str) -> FileStat | None:
        sftp = await self._client()
        try:
            attrs = await sftp.lstat(path)
        except asyncssh.SFTPError:
            return None
        perms = attrs.permissions
        return FileStat(attrs.size or 0, float(attrs.mtime or 0), perms is not None and st_mod.S_ISDIR(perms),
                        perms is not None and st_mod.S_ISREG(perms), st_mod.S_IMODE(perms) if perms is not None else 0,
                        perms is not None and st_mod.S_ISLNK(perms))

    async def _regular(self, path: str) -> FileStat:
        # the server would block opening a fifo: look before opening
        st = await self.stat(path)
        if st is None:
            raise FileNotFoundError(path)
        if st.is_dir or not st.is_file:
            raise NotRegularFile(f"{path}: not a regular file")
        return st

    async def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        sftp = await self._client()
        await self._regular(path)
        try:
            async with sftp.open(path, "rb") as fh:
                if offset:
                    await fh.seek(offset)
                data = await (fh.read() if length is None else fh.read(length))
        except asyncssh.SFTPNoSuchFile:
            raise FileNotFoundError(path) from None
        except asyncssh.SFTPError as exc:
            raise OSError(f"{path}: {exc.reason}") from None
        return data if isinstance(data, bytes) else data.encode()

    async def read_regular(self, path: str, max_bytes: int, timeout_s: float = READ_TIMEOUT_S) -> bytes:
        st = await self._regular(path)
        if st.size > max_bytes:
            raise TooLarge(f"{path}: {st.size:,} bytes, over the {max_bytes:,} byte limit")
        data = await asyncio.wait_for(self.read_bytes(path, 0, max_bytes + 1), timeout_s)
        if len(data) > max_bytes:
            raise TooLarge(f"{path}: grew past the {max_bytes:,} byte limit while being read")
        return data

    async def sha256(self, path: str, max_bytes: int) -> str | None:
        if await self.stat(path) is None:
            return None
        st = await self._regular(path)
        if st.size > max_bytes:
            raise TooLarge(f"{path}: {st.size:,} bytes, over the {max_bytes:,} byte limit")
        sftp = await self._client()

        async def _hash() -> str:
            h = hashlib.sha256()
            seen = 0
            try:
                async with sftp.open(path, "rb") as fh:
                    while True:
                        chunk = await fh.read(1 << 18)
                        if not chunk:
                            break
                        seen += len(chunk)
                        if seen > max_bytes:
                            raise TooLarge(f"{path}: grew past the {max_bytes:,} byte limit while being read")
                        h.update(chunk if isinstance(chunk, bytes) else chunk.encode())
            except asyncssh.SFTPError as exc:
                raise _os_error(exc, path) from None
            return h.hexdigest()

        return await asyncio.wait_for(_hash(), READ_TIMEOUT_S)

    async def list_dir(self, path: str) -> list[str]:
        sftp = await self._client()
        try:
            names = await sftp.listdir(path)
        except asyncssh.SFTPNoSuchFile:
            raise FileNotFoundError(path) from None
        except asyncssh.SFTPError as exc:
            raise OSError(f"{path}: {exc.reason}") from None
        return sorted(str(n) for n in names if n not in (".", ".."))

    async def rename(self, src: str, dst: str) -> None:
        sftp = await self._client()
        if await sftp.exists(dst):
            raise FileExistsError(f"refusing to overwrite {dst}")
        try:
            await sftp.rename(src, dst)
        except asyncssh.SFTPError as exc:
            raise _os_error(exc, src, dst) from None

    async def makedirs(self, path: str) -> None:
        sftp = await self._client()
        try:
            await sftp.makedirs(path, exist_ok=True)
        except asyncssh.SFTPError as exc:
            raise _os_error(exc, path) from None

    async def mkdir_exclusive(self, path: str) -> None:
        sftp = await self._client()
        try:
            await sftp.mkdir(path)
        except asyncssh.SFTPFileAlreadyExists:
            raise FileExistsError(path) from None
        except asyncssh.SFTPFailure as exc:
            # OpenSSH's server answers a plain "Failure" for EEXIST
            if await sftp.exists(path):
                raise FileExistsError(path) from None
            raise _os_error(exc, path) from None
        except asyncssh.SFTPError as exc:
            raise _os_error(exc, path) from None

    async def rmdir(self, path: str) -> None:
        sftp = await self._client()
        try:
            await sftp.rmdir(path)
        except asyncssh.SFTPError as exc:
            raise _os_error(exc, path) from None

    async def append_durable(self, path: str, data: bytes) -> None:
        sftp = await self._client()
        try:
            async with sftp.open(path, "ab") as fh:
                await fh.write(data)
                with contextlib.suppress(asyncssh.SFTPOpUnsupported):
                    await fh.fsync()
        except asyncssh.SFTPError as exc:
            raise _os_error(exc, path) from None

    async def write_bytes_atomic(self, path: str, data: bytes) -> None:
        sftp = await self._client()
        tmp = posixpath.join(posixpath.dirname(path), f"{tmp_prefix(path)}{uuid.uuid4().hex[:8]}")
        try:
            old = await sftp.stat(path)
        except asyncssh.SFTPError:
            old = None
        try:
            async with sftp.open(tmp, "wb") as fh:
                await fh.write(data)
                # fsync@openssh.com where the server has it: the bytes are on disk before the rename
                with contextlib.suppress(asyncssh.SFTPOpUnsupported):
                    await fh.fsync()
            if old is not None and old.permissions is not None:
                await sftp.chmod(tmp, st_mod.S_IMODE(old.permissions))
            checkpoint(f"write:{posixpath.basename(path)}")
            await sftp.posix_rename(tmp, path)
        except asyncssh.SFTPError as exc:
            with contextlib.suppress(asyncssh.SFTPError):
                await sftp.remove(tmp)
            raise _os_error(exc, path) from None

    async def remove_file(self, path: str) -> None:
        sftp = await self._client()
        try:
            await sftp.remove(path)
        except asyncssh.SFTPError as exc:
            raise _os_error(exc, path) from None

    async def close(self) -> None:
        if self._sftp is not None:
            self._sftp.exit()
            self._sftp = None


class SFTPWalkFS:
    """The Harbor walk's list / stat / read (services/harbor/walk.py) over SFTP, for a scan that
    runs in a worker thread: each batch is one burst of pipelined requests on the event loop
    that owns the connection, waited for with a deadline. SFTP (v3, OpenSSH) has whole-second
    mtimes and no ctime or inode: keys carry 0 there."""

    def __init__(self, sftp: SFTPFS, loop: asyncio.AbstractEventLoop, concurrency: int = 64,
                 timeout_s: float = 120.0, max_bytes: int = walk.MAX_BYTES) -> None:
        self.sftp, self.loop, self.timeout_s, self.max_bytes = sftp, loop, timeout_s, max_bytes
        self._sem = asyncio.Semaphore(concurrency)
        self.requests = 0

    def _run(self, make: Callable[[asyncssh.SFTPClient, str], Awaitable[_T]], paths: Sequence[str]) -> _Many[_T]:
        async def every() -> _Many[_T]:
            client = await self.sftp.client()

            async def one(path: str) -> _T:
                async with self._sem:
                    self.requests += 1
                    return await make(client, path)

            return list(await asyncio.gather(*map(one, paths)))

        if not paths:
            return []
        batch = asyncio.run_coroutine_threadsafe(every(), self.loop)
        try:
            return batch.result(self.timeout_s)
        except TimeoutError:
            batch.cancel()
            host = self.sftp.spec.label
            raise OSError(errno.ETIMEDOUT, f"{host} sent no SFTP answer for {self.timeout_s:g} s") from None

    def list(self, paths: Sequence[str]) -> _Many[walk.Listing]:
        async def one(client: asyncssh.SFTPClient, path: str) -> walk.Listing:
            try:
                names = await client.readdir(path)
            except asyncssh.SFTPError as exc:
                return os.strerror(_os_error(exc, path).errno or errno.EIO)
            return sorted((str(n.filename), _kind(n.attrs.permissions)) for n in names
                          if n.filename not in (".", ".."))

        return self._run(one, paths)

    def stat(self, paths: Sequence[str]) -> _Many[walk.Key]:
        async def one(client: asyncssh.SFTPClient, path: str) -> walk.Key:
            try:
                attrs = await client.stat(path)
            except asyncssh.SFTPPermissionDenied:
                return walk.DENIED
            except asyncssh.SFTPError:
                try:  # (a dangling symlink is there, unlike a missing file)
                    await client.lstat(path)
                except asyncssh.SFTPError:
                    return None
                return walk.BROKEN
            kind = _kind(attrs.permissions)
            if kind != "file":
                return walk.A_DIR if kind == "dir" else walk.ODD
            ns = getattr(attrs, "mtime_ns", None)
            mtime_ns = int(ns) if ns is not None else int(attrs.mtime or 0) * 10**9
            return walk.pack_key(mtime_ns, 0, int(attrs.size or 0), 0)

        return self._run(one, paths)

    def read(self, paths: Sequence[str]) -> _Many[walk.Read]:
        cap = self.max_bytes

        async def one(client: asyncssh.SFTPClient, path: str) -> walk.Read:
            name = posixpath.basename(path)
            try:
                async with client.open(path, "rb") as fh:
                    data = await fh.read(cap + 1)
            except asyncssh.SFTPNoSuchFile:
                return None, None
            except asyncssh.SFTPError as exc:
                return None, f"{name} unreadable: {exc.reason}"
            if len(data) > cap:
                return None, f"{name} is larger than {cap >> 20} MiB"
            return (data if isinstance(data, bytes) else data.encode()), None

        return self._run(one, paths)

    def realpath(self, path: str) -> str:
        async def one(client: asyncssh.SFTPClient, p: str) -> str:
            try:
                return str(await client.realpath(p))
            except asyncssh.SFTPError:
                return p

        return self._run(one, [path])[0]

    def now(self) -> float:
        return time.time()


def _kind(perms: int | None) -> str:
    for test, kind in ((st_mod.S_ISLNK, "link"), (st_mod.S_ISDIR, "dir"), (st_mod.S_ISREG, "file")):
        if perms is not None and test(perms):
            return kind
    return "other"
