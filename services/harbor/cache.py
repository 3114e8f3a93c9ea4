"""The persistent parse cache: what earlier processes parsed, so the next one need not.

One SQLite file per source root in `$XDG_CACHE_HOME/evaldesk/`: per trial dir, the key of every
file its record was built from (result.json, and config.json where it supplied fields) and the
record (services/harbor/parse.py `encode`); per job, as its row with an empty name, the digest
of every trial's keys and the census over them. A scan takes a record only under the keys it
just stat'ed, and a record of a file within the racy window is never kept (walk.settled).

It only ever costs speed: a corrupt file is replaced, a read-only or full disk turns writing off,
a lock another evaldesk holds too long skips the write. A new schema or parser version starts it
afresh; past MAX_ROWS the least recently scanned jobs go; files unused for STALE_DAYS are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from services.core.xdg import cache_dir
from services.harbor import parse

SCHEMA = 4
VERSION = f"{SCHEMA}.{parse.VERSION}"
MAX_ROWS = 2_000_000
STALE_DAYS = 30
BUSY_TIMEOUT_S = 2.0


def record_key(rkey: int, ckey: int | None) -> bytes:
    """The key of a record: its result.json's key, and its config.json's when it was read."""
    return f"{rkey}".encode() if ckey is None else f"{rkey}:{ckey}".encode()


def keys_digest(keys: dict[str, int], ckeys: dict[str, int]) -> bytes:
    """One digest of every trial dir and the keys of the files its record came from."""
    h = hashlib.blake2b(digest_size=16)
    for rel, key in keys.items():
        h.update(os.fsencode(rel) + b"\0" + record_key(key, ckeys.get(rel)) + b"\0")
    return h.digest()


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")  # (a second writer waits or gives up here, not halfway through)
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise


def _forget(db: sqlite3.Connection, job: bytes) -> int:
    n = db.execute("DELETE FROM trials WHERE job = ?", (job,)).rowcount
    db.execute("DELETE FROM jobs WHERE job = ?", (job,))
    return int(n)


class ParseCache:
    """The cache of one source root (names kept as their bytes: they need not be UTF-8). Never
    raises: a failure is kept in `problem` and turns the cache (or its writes) off for the process."""

    def __init__(self, root: str, directory: Path | None = None) -> None:
        self.directory = directory or cache_dir()
        digest = hashlib.sha256(os.fsencode(os.path.abspath(root))).hexdigest()[:24]
        self.path = self.directory / f"scan-{digest}.sqlite"
        self.problem: str | None = None
        self.writable = True
        self._db: sqlite3.Connection | None = None
        self._opened = False

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")  # (a cache torn by a crash is found corrupt and rebuilt)
            db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
            db.execute("CREATE TABLE IF NOT EXISTS trials (job BLOB, rel BLOB, key BLOB, rec BLOB, "
                       "PRIMARY KEY (job, rel)) WITHOUT ROWID")
            db.execute("CREATE TABLE IF NOT EXISTS jobs (job BLOB PRIMARY KEY, used REAL)")
            row = db.execute("SELECT v FROM meta WHERE k = 'version'").fetchone()
            if row is None or row[0] != VERSION:
                with _transaction(db):
                    for table in ("trials", "jobs"):
                        db.execute(f"DELETE FROM {table}")
                    db.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (VERSION,))
            db.execute("SELECT count(*) FROM trials WHERE job = x''").fetchone()  # (reads a page: finds corruption)
        except BaseException:
            db.close()
            raise
        return db

    def _open(self) -> sqlite3.Connection | None:
        if not self._opened:
            self._opened = True
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                limit = time.time() - STALE_DAYS * 86400
                for old in self.directory.glob("scan-*.sqlite*"):
                    if not old.name.startswith(self.path.name) and old.stat().st_mtime < limit:
                        old.unlink()
                try:
                    self._db = self._connect()
                except sqlite3.DatabaseError as exc:
                    if isinstance(exc, sqlite3.OperationalError) and not self.path.exists():
                        raise
                    for suffix in ("", "-wal", "-shm"):  # corrupt, or not a database: start a new one
                        with contextlib.suppress(OSError):
                            os.unlink(f"{self.path}{suffix}")
                    self._db = self._connect()
            except (OSError, sqlite3.Error) as exc:
                self._off(f"cannot use {self.path}: {exc}")
        return self._db

    def _off(self, why: str) -> None:
        self.problem, self.writable = why, False
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
        self._db = None

    def _write(self, what: str, fn: Callable[[sqlite3.Connection], object]) -> bool:
        db = self._open() if self.writable else None
        if db is None:
            return False
        try:
            with _transaction(db):
                fn(db)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):  # (busy: the next scan tries again)
                self.problem, self.writable = f"cannot write {self.path}: {exc}", False
            return False
        except sqlite3.Error as exc:
            self._off(f"cannot write {self.path} ({what}): {exc}")
            return False
        return True

    def rows(self, job: str) -> Iterator[tuple[str, bytes, bytes]]:
        """(rel, key, record) of every trial dir of `job` the cache holds, one at a time."""
        db = self._open()
        if db is None:
            return
        try:
            for rel, key, rec in db.execute("SELECT rel, key, rec FROM trials WHERE job = ? AND rel != x''",
                                            (os.fsencode(job),)):
                yield os.fsdecode(rel), key, rec
        except sqlite3.Error as exc:
            self._off(f"cannot read {self.path}: {exc}")

    def store(self, job: str, put: list[tuple[str, bytes, bytes]], drop: list[str]) -> None:
        """Write what a scan parsed and forget what is gone, in one transaction."""
        if not put and not drop:
            return
        jb = os.fsencode(job)

        def write(db: sqlite3.Connection) -> None:
            db.executemany("DELETE FROM trials WHERE job = ? AND rel = ?", [(jb, os.fsencode(r)) for r in drop])
            # in key order: the B-tree takes them faster than out of order
            db.executemany("INSERT OR REPLACE INTO trials VALUES (?, ?, ?, ?)",
                           sorted((jb, os.fsencode(rel), key, rec) for rel, key, rec in put))
            db.execute("INSERT OR REPLACE INTO jobs VALUES (?, ?)", (jb, time.time()))

        if self._write("trials", write) and put:
            self._bound()

    def _bound(self) -> None:
        # rows take over 200 bytes each: a smaller file holds fewer than MAX_ROWS, no count needed
        try:
            if os.stat(self.path).st_size < MAX_ROWS * 200:
                return
            assert self._db is not None
            (n,) = self._db.execute("SELECT count(*) FROM trials").fetchone()
            jobs = [j for (j,) in self._db.execute("SELECT job FROM jobs ORDER BY used").fetchall()]
        except (OSError, sqlite3.Error):
            return

        def prune(db: sqlite3.Connection) -> None:  # the least recently scanned jobs go first
            left = n
            for job in jobs:
                if left <= MAX_ROWS * 3 // 4:
                    break
                left -= _forget(db, job)

        if n > MAX_ROWS:
            self._write("bound", prune)

    def summary(self, job: str) -> tuple[bytes, bytes] | None:
        """(digest, census) stored for `job`, or None."""
        db = self._open()
        if db is None:
            return None
        try:
            row = db.execute("SELECT key, rec FROM trials WHERE job = ? AND rel = x''", (os.fsencode(job),)).fetchone()
        except sqlite3.Error as exc:
            self._off(f"cannot read {self.path}: {exc}")
            return None
        return (bytes(row[0]), bytes(row[1])) if row else None

    def store_summary(self, job: str, digest: bytes | None, census: bytes | None) -> None:
        """Keep (or, with None, forget) the summary of `job`."""
        if digest is None or census is None:
            self.store(job, [], [""])
        else:
            self.store(job, [("", digest, census)], [])

    def forget_jobs_except(self, keep: set[str]) -> None:
        """Drop the records of job dirs that are no longer under the root."""
        db = self._open() if self.writable else None
        if db is None:
            return
        try:
            gone = [j for (j,) in db.execute("SELECT job FROM jobs").fetchall() if os.fsdecode(j) not in keep]
        except sqlite3.Error:
            return
        if gone:
            self._write("forget", lambda db: [_forget(db, j) for j in gone])

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
        self._db, self._opened = None, False
