"""evaldesk's own files on this machine (followed jobs, the records index, task tables, reports,
last reads): written whole or not at all, and changed under a lock so that two processes never
lose each other's updates.

`write_atomic` is a temporary file in the same dir (named `.<name>.evaldesk-tmp-…`), fsync'd,
renamed over the target (keeping the target's mode, or `mode` for a new file) and the dir
fsync'd. `update` is a read-modify-write under an exclusive `fcntl.flock` on `<path>.lock`:
readers need no lock, since a rename is atomic.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TMP_MARK = ".evaldesk-tmp-"
LOCK_TIMEOUT_S = 10.0


class StateLockTimeout(OSError):
    """Another process held a state file's lock for longer than the wait allowed."""


def fsync_dir(path: str | Path) -> None:
    try:
        fd = os.open(str(path) or ".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a dir; the rename itself is still atomic
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: bytes, mode: int | None = None,
                 before_replace: Callable[[], None] | None = None) -> None:
    """Put `data` at `path` whole or not at all. The file keeps its mode; a new one gets `mode`
    (default 0o644, narrowed by nothing: the umask does not apply)."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    try:
        keep = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        keep = 0o644 if mode is None else mode
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}{TMP_MARK}", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), keep)
            os.fsync(fh.fileno())
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(folder)


@contextlib.contextmanager
def locked(path: str | Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the exclusive lock of the state file `path` (`<path>.lock`, created as needed)."""
    lock_path = f"{os.fspath(path)}.lock"
    os.makedirs(os.path.dirname(lock_path) or ".", exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StateLockTimeout(f"{lock_path}: held by another process for over {timeout_s:g} s") from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # (closing the file releases the lock)


def read_json(path: str | Path, default: Any = None) -> Any:
    """The JSON a state file holds; `default` when it is missing, unreadable or not JSON."""
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except (OSError, ValueError):
        return default


def dump_json(data: Any) -> bytes:
    return (json.dumps(data, indent=1, ensure_ascii=True, sort_keys=True) + "\n").encode("ascii")


def update_json(path: str | Path, change: Callable[[Any], Any], default: Any = None,
                mode: int | None = None) -> Any:
    """Read the state file, `change` what it holds (the new value is returned and written) and
    write it back, all under its lock: concurrent updates are applied one after the other."""
    with locked(path):
        new = change(read_json(path, default))
        write_atomic(path, dump_json(new), mode=mode)
        return new
