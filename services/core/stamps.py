"""Stamps: short strings that change whenever what they stand for changes (a file's stat key,
a folder's names and keys two levels deep). Standard library only: the audit replay of `--batch
audit` compares them before importing anything else."""

from __future__ import annotations

import hashlib
import os
import stat

TREE_MAX = 20_000  # entries a watched tree may have before it is not worth watching


def file_key(path: str) -> int | None:
    """A file's stat key (mtime_ns, ctime_ns, size, inode in one int); None when absent, -1 when
    not a regular file, -2 when it cannot be stat'ed (a dangling symlink)."""
    try:
        st = os.stat(path)
    except OSError:
        # a dangling symlink named result.json is an unreadable result, not a running trial
        return -2 if os.path.lexists(path) else None
    if not stat.S_ISREG(st.st_mode):
        return -1  # a dir or fifo named result.json: read it to get the error
    return pack_stat(st)


_M64 = (1 << 64) - 1


def pack_stat(st: os.stat_result) -> int:
    return (st.st_mtime_ns << 192) | ((st.st_ctime_ns & _M64) << 128) | ((st.st_size & _M64) << 64) | (
        st.st_ino & _M64)


def key_size(key: int) -> int:
    return (key >> 64) & _M64


def key_mtime(key: int) -> float:
    return (key >> 192) / 1e9


def file_stamp(path: str) -> str:
    """A file's stat key as a string."""
    return str(file_key(path))


def tree_stamp(path: str) -> str:
    """A folder two levels deep: names and lstat keys (write records, baselines, quarantines)."""
    h = hashlib.blake2b(digest_size=16)
    n = 0

    def add(top: str, depth: int) -> None:
        nonlocal n
        try:
            entries = sorted(os.scandir(top), key=lambda e: e.name)
        except FileNotFoundError:
            h.update(b"-")
            return
        except OSError as exc:
            h.update(f"!{exc.errno}".encode())
            return
        for e in entries:
            n += 1
            if n > TREE_MAX:
                raise _TooBig
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                h.update(f"{e.name}\0?\0".encode("utf-8", "surrogateescape"))
                continue
            h.update(f"{e.name}\0{st.st_mode}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_size}\0{st.st_ino}\0"
                     .encode("utf-8", "surrogateescape"))
            if depth < 2 and stat.S_ISDIR(st.st_mode):
                add(e.path, depth + 1)

    try:
        st = os.stat(path)
        h.update(f"{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0".encode())
    except OSError:
        return "absent"
    try:
        add(path, 1)
    except _TooBig:
        return "unwatchable"
    return h.hexdigest()


class _TooBig(Exception):
    pass


