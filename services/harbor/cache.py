"""The persistent parse cache: what earlier processes parsed, so the next one need not.

One SQLite file per source root in `$XDG_CACHE_HOME/evaldesk/`. Per trial dir, the key of every
file its record was built from (result.json, and config.json where it supplied fields) and the
record (services/harbor/parse.py `encode`), written a scan's batch at a time as one row (a pack:
a first read of 20k trials writes 10 rows, not 20k); a later entry for the same trial dir
supersedes an earlier one, and a job's packs are merged once they are many. Per job, the digest of
every trial's keys and the census over them. A scan takes a record only under the keys it just
stat'ed, and a record of a file within the racy window is never kept (walk.settled).

It only ever costs speed: a corrupt file is replaced, a read-only or full disk turns writing off,
a lock another evaldesk holds too long skips the write. A new schema or parser version starts it
afresh; past MAX_BYTES the least recently scanned jobs go; files unused for STALE_DAYS are removed.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from services.core.xdg import cache_dir
from services.harbor import parse

SCHEMA = 5
VERSION = f"{SCHEMA}.{parse.VERSION}"
MAX_BYTES = 400 << 20
MERGE_AT = 64  # packs of one job: past this many, merged into one
STALE_DAYS = 30
BUSY_TIMEOUT_S = 2.0


def record_key(rkey: int, ckey: int | None) -> bytes:
    """The key of a record: its result.json's key, and its config.json's when it was read."""
    return f"{rkey}".encode() if ckey is None else f"{rkey}:{ckey}".encode()


def keys_digest(keys: dict[str, int], ckeys: dict[str, int]) -> bytes:
    """One digest of every trial dir and the keys of the files its record came from."""
    h = hashlib.blake2b(digest_size=16)
    for part in (keys, ckeys):  # (names joined, then keys packed: one call each, not one per trial)
        names = os.fsencode("\0".join(part))
        h.update(b"%d:%d:" % (len(part), len(names)) + names)
        h.update(b"".join([key.to_bytes(40, "big", signed=True) for key in part.values()]))
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


_Entry = tuple[bytes, bytes, bytes]  # (rel, key, record); an empty key: the trial dir is gone


@functools.cache
def _codec() -> tuple[Callable[[list[_Entry]], bytes], Callable[[bytes], list[_Entry]], type[Exception]]:
    import msgspec  # (imported on the first pack: a run the summary answers never needs it)

    return (msgspec.msgpack.Encoder().encode, msgspec.msgpack.Decoder(list[tuple[bytes, bytes, bytes]]).decode,
            msgspec.MsgspecError)


def _pack(entries: list[_Entry]) -> bytes:
    return _codec()[0](entries)


def _forget(db: sqlite3.Connection, job: bytes) -> int:
    (n,) = db.execute("SELECT coalesce(sum(length(data)), 0) FROM packs WHERE job = ?", (job,)).fetchone()
    db.execute("DELETE FROM packs WHERE job = ?", (job,))
    db.execute("DELETE FROM jobs WHERE job = ?", (job,))
    return int(n)


def _entries(db: sqlite3.Connection, job: bytes) -> Iterator[_Entry]:
    _, unpack, damaged = _codec()
    for (data,) in db.execute("SELECT data FROM packs WHERE job = ? ORDER BY id", (job,)):
        try:
            yield from unpack(data)
        except damaged:
            continue  # a damaged pack: its trials are read from their files again


def _merge(db: sqlite3.Connection, job: bytes) -> None:
    latest = {rel: (rel, key, rec) for rel, key, rec in _entries(db, job)}
    db.execute("DELETE FROM packs WHERE job = ?", (job,))
    db.execute("INSERT INTO packs (job, data) VALUES (?, ?)", (job, _pack([e for e in latest.values() if e[1]])))


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
            row = db.execute("SELECT v FROM meta WHERE k = 'version'").fetchone()
            if row is None or row[0] != VERSION:
                with _transaction(db):
                    for table in ("trials", "packs", "jobs"):  # (trials: before packs, one row a trial)
                        db.execute(f"DROP TABLE IF EXISTS {table}")
                    db.execute("CREATE TABLE packs (id INTEGER PRIMARY KEY, job BLOB, data BLOB)")
                    db.execute("CREATE INDEX packs_of_job ON packs (job)")
                    db.execute("CREATE TABLE jobs (job BLOB PRIMARY KEY, used REAL, digest BLOB, census BLOB)")
                    db.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (VERSION,))
            db.execute("SELECT count(*) FROM packs WHERE job = x''").fetchone()  # (reads a page: finds corruption)
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
        """(rel, key, record) of every trial dir of `job` the cache holds, one at a time; a trial
        dir may come more than once, under the keys of its files at different times."""
        db = self._open()
        if db is None:
            return
        try:
            for rel, key, rec in _entries(db, os.fsencode(job)):  # (a pack at a time: memory stays flat)
                if key:
                    yield os.fsdecode(rel), key, rec
        except sqlite3.Error as exc:
            self._off(f"cannot read {self.path}: {exc}")

    def store(self, job: str, put: list[tuple[str, bytes, bytes]], drop: list[str]) -> None:
        """Keep what a scan parsed and forget what is gone, in one transaction."""
        if not put and not drop:
            return
        jb = os.fsencode(job)
        pack = _pack([(os.fsencode(rel), key, rec) for rel, key, rec in put] +
                     [(os.fsencode(rel), b"", b"") for rel in drop])

        def write(db: sqlite3.Connection) -> None:
            db.execute("INSERT INTO packs (job, data) VALUES (?, ?)", (jb, pack))
            db.execute("INSERT INTO jobs (job, used) VALUES (?, ?) "
                       "ON CONFLICT (job) DO UPDATE SET used = excluded.used", (jb, time.time()))
            (n,) = db.execute("SELECT count(*) FROM packs WHERE job = ?", (jb,)).fetchone()
            if n > MERGE_AT:
                _merge(db, jb)

        if self._write("trials", write) and put:
            self._bound()

    def _bound(self) -> None:
        try:
            if os.stat(self.path).st_size < MAX_BYTES:
                return
            assert self._db is not None
            (n,) = self._db.execute("SELECT coalesce(sum(length(data)), 0) FROM packs").fetchone()
            jobs = [j for (j,) in self._db.execute("SELECT job FROM jobs ORDER BY used").fetchall()]
        except (OSError, sqlite3.Error):
            return

        def prune(db: sqlite3.Connection) -> None:  # the least recently scanned jobs go first
            left = n
            for job in jobs:
                if left <= MAX_BYTES * 3 // 4:
                    break
                left -= _forget(db, job)

        if n > MAX_BYTES:
            self._write("bound", prune)

    def holds(self, job: str) -> bool:
        """Whether the cache keeps anything of `job`: records, or a summary."""
        db = self._open()
        if db is None:
            return False
        jb = os.fsencode(job)
        try:
            (held,) = db.execute("SELECT EXISTS (SELECT 1 FROM packs WHERE job = ?) OR EXISTS "
                                 "(SELECT 1 FROM jobs WHERE job = ? AND digest IS NOT NULL)", (jb, jb)).fetchone()
        except sqlite3.Error as exc:
            self._off(f"cannot read {self.path}: {exc}")
            return False
        return bool(held)

    def summary(self, job: str) -> tuple[bytes, bytes] | None:
        """(digest, census) stored for `job`, or None."""
        db = self._open()
        if db is None:
            return None
        try:
            row = db.execute("SELECT digest, census FROM jobs WHERE job = ?", (os.fsencode(job),)).fetchone()
        except sqlite3.Error as exc:
            self._off(f"cannot read {self.path}: {exc}")
            return None
        return (bytes(row[0]), bytes(row[1])) if row and row[0] is not None and row[1] is not None else None

    def store_summary(self, job: str, digest: bytes | None, census: bytes | None) -> None:
        """Keep (or, with None, forget) the summary of `job`."""
        both = (digest, census) if digest is not None and census is not None else (None, None)
        self._write("summary", lambda db: db.execute(
            "INSERT INTO jobs VALUES (?, ?, ?, ?) ON CONFLICT (job) DO UPDATE SET used = excluded.used, "
            "digest = excluded.digest, census = excluded.census", (os.fsencode(job), time.time(), *both)))

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
