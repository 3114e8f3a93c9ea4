"""The persistent parse cache: what earlier processes parsed, so the next one need not.

One SQLite file per source root in `$XDG_CACHE_HOME/evaldesk/`, holding per trial dir the key
of the file it was parsed from (path, inode, size, mtime_ns, ctime_ns) and the compact record
of the Trial (services/harbor/records.py). A scan still stats every file it would have read and
uses a record only when the key matches, so the cache is never trusted over the files.

The cache only ever costs speed: a corrupt file is replaced, a read-only or full disk turns
writing off for the process, a lock held too long by another evaldesk skips the write, and a
record that does not decode is re-parsed. The file carries a version that covers the schema
and the parser's own source, so a new evaldesk (or a changed parser) starts afresh. It is
bounded: least recently scanned jobs are dropped past MAX_ROWS, and files unused for
STALE_DAYS are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import fields
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from services.core.census import Census
from services.core.xdg import cache_dir

SCHEMA = 2
MAX_ROWS = 2_000_000
STALE_DAYS = 30
BUSY_TIMEOUT_S = 2.0


# the modules a record's content depends on (services/harbor/records.py and what it imports of
# evaldesk; a test holds the two equal), plus Harbor's error-policy table
PARSER_MODULES = ("services.harbor.files", "services.harbor.records", "services.harbor.fast_record",
                  "services.core.failures", "services.core.models", "services.core.stamps",
                  "services.core.policy")


def _parser_version() -> str:
    # the records depend on the parser's code: hash its source
    root = Path(__file__).resolve().parent.parent.parent
    h = hashlib.sha256(f"schema {SCHEMA}".encode())
    for name in PARSER_MODULES:
        with contextlib.suppress(OSError):
            h.update((root / (name.replace(".", "/") + ".py")).read_bytes())
    return h.hexdigest()[:20]


_VERSION: str | None = None


def version() -> str:
    global _VERSION
    if _VERSION is None:
        _VERSION = _parser_version()
    return _VERSION


_rel_of = itemgetter(1)


def _b(s: str) -> bytes:
    return os.fsencode(s)  # names need not be UTF-8: keep their bytes



@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken up front (IMMEDIATE: a second writer waits or gives up
    here, not halfway through), rolled back on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise


def _busy(exc: sqlite3.OperationalError) -> bool:
    # another evaldesk holds the write lock: skipped, the next scan tries again
    return "locked" in str(exc) or "busy" in str(exc)


def _forget_job(db: sqlite3.Connection, job: bytes) -> int:
    """Drop everything kept for one job dir; the number of trial rows it had."""
    n = db.execute("DELETE FROM trials WHERE job = ?", (job,)).rowcount
    db.execute("DELETE FROM summary WHERE job = ?", (job,))
    db.execute("DELETE FROM jobs WHERE job = ?", (job,))
    return int(n)

class ParseCache:
    """The cache of one source root. Never raises: a failure is kept in `problem` and turns the
    cache (or only its writes) off for the rest of the process."""

    def __init__(self, root: str, directory: Path | None = None) -> None:
        self.root = root
        self.directory = directory or cache_dir()
        digest = hashlib.sha256(_b(os.path.abspath(root))).hexdigest()[:24]
        self.path = self.directory / f"scan-{digest}.sqlite"
        self.problem: str | None = None
        self.writable = True
        self.hits = 0
        self.misses = 0
        self._db: sqlite3.Connection | None = None
        self._opened = False
        self._rows_at_most: int | None = None  # rows in the file at the last count, plus those written since

    # -- opening -------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # no fsync: a cache torn by a crash is found corrupt and rebuilt, which costs only speed
            db.execute("PRAGMA synchronous=OFF")
            db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
            db.execute("CREATE TABLE IF NOT EXISTS trials (job BLOB, rel BLOB, key BLOB, rec BLOB, "
                       "PRIMARY KEY (job, rel)) WITHOUT ROWID")
            db.execute("CREATE TABLE IF NOT EXISTS jobs (job BLOB PRIMARY KEY, used REAL)")
            # per job: a digest of every trial dir's (rel, key) and the census taken over them
            db.execute("CREATE TABLE IF NOT EXISTS summary (job BLOB PRIMARY KEY, digest BLOB, census BLOB)")
            row = db.execute("SELECT v FROM meta WHERE k = 'version'").fetchone()
            if row is None or row[0] != version():
                with _transaction(db):
                    row = db.execute("SELECT v FROM meta WHERE k = 'version'").fetchone()
                    if row is None or row[0] != version():
                        db.execute("DELETE FROM trials")
                        db.execute("DELETE FROM jobs")
                        db.execute("DELETE FROM summary")
                        db.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (version(),))
            db.execute("SELECT count(*) FROM trials WHERE job = x''").fetchone()  # reads a page: finds corruption
        except BaseException:
            db.close()
            raise
        return db

    def _open(self) -> sqlite3.Connection | None:
        if self._opened:
            return self._db
        self._opened = True
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._off(f"cannot create {self.directory}: {exc.strerror or exc}")
            return None
        self._prune_stale_files()
        try:
            self._db = self._connect()
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and not self.path.exists():
                self._off(f"cannot open {self.path}: {exc}")
                return None
            # corrupt, or not a database at all: it is only a cache, start a new one
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    os.unlink(f"{self.path}{suffix}")
            try:
                self._db = self._connect()
            except (sqlite3.Error, OSError) as again:
                self._off(f"cannot use {self.path}: {again}")
                return None
        except OSError as exc:
            self._off(f"cannot open {self.path}: {exc}")
            return None
        return self._db

    def _off(self, why: str) -> None:
        self.problem = why
        self.writable = False
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
        self._db = None
        return None

    def _prune_stale_files(self) -> None:
        limit = time.time() - STALE_DAYS * 86400
        with contextlib.suppress(OSError), os.scandir(self.directory) as it:
            for entry in it:
                if entry.name.startswith("scan-") and entry.name != self.path.name:
                    with contextlib.suppress(OSError):
                        if entry.stat().st_mtime < limit:
                            os.unlink(entry.path)

    # -- use -----------------------------------------------------------------------------
    def load(self, job: str) -> dict[str, tuple[bytes, bytes]]:
        """rel → (key, record) of every trial dir of `job` the cache holds."""
        db = self._open()
        if db is None:
            return {}
        try:
            rows = db.execute("SELECT rel, key, rec FROM trials WHERE job = ?", (_b(job),)).fetchall()
        except sqlite3.Error as exc:
            self._off(f"cannot read {self.path}: {exc}")
            return {}
        dec = os.fsdecode
        return {dec(rel): (key, rec) for rel, key, rec in rows}

    def rows(self, job: str) -> Iterator[tuple[str, bytes, bytes]]:
        """(rel, key, record) of every trial dir of `job` the cache holds, one at a time (a
        100k-trial job's records would take ~50 MB at once)."""
        db = self._open()
        if db is None:
            return
        dec = os.fsdecode
        try:
            for rel, key, rec in db.execute("SELECT rel, key, rec FROM trials WHERE job = ?", (_b(job),)):
                yield dec(rel), key, rec
        except sqlite3.Error as exc:
            self._off(f"cannot read {self.path}: {exc}")

    def _for_write(self) -> sqlite3.Connection | None:
        return self._open() if self.writable else None

    def store(self, job: str, put: list[tuple[str, bytes, bytes]], drop: list[str]) -> None:
        """Write what this scan parsed and forget what is gone, in one transaction."""
        if not self.writable or (not put and not drop and self._opened):
            return
        db = self._open()
        if db is None:
            return
        jb = _b(job)
        try:
            with _transaction(db):
                if drop:
                    db.executemany("DELETE FROM trials WHERE job = ? AND rel = ?", [(jb, _b(r)) for r in drop])
                if put:
                    rows = [(jb, _b(rel), key, rec) for rel, key, rec in put]
                    # in key order: the B-tree takes them ~1.4x faster than out of order (an
                    # early read hands its trials over from the last backwards)
                    rows.sort(key=_rel_of)
                    db.executemany("INSERT OR REPLACE INTO trials VALUES (?, ?, ?, ?)", rows)
                db.execute("INSERT OR REPLACE INTO jobs VALUES (?, ?)", (jb, time.time()))
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                return  # another evaldesk is writing: the next scan tries again
            self.problem = f"cannot write {self.path}: {exc}"
            self.writable = False
            return
        except sqlite3.Error as exc:
            self._off(f"cannot write {self.path}: {exc}")
            return
        if put:
            self._bound(db, len(put))
            # a first scan's pages stay in the connection's cache (~2 MiB) for as long as the
            # console runs; they are not needed again until the next write
            with contextlib.suppress(sqlite3.Error):
                db.execute("PRAGMA shrink_memory")

    def _bound(self, db: sqlite3.Connection, added: int) -> None:
        # Counting every row on every write cost more than the write. The rows are counted at a
        # process's first write, then again only once what it wrote since (replaced rows
        # included) could have passed the bound; other processes count their own writes.
        if self._rows_at_most is not None:
            self._rows_at_most += added
            if self._rows_at_most <= MAX_ROWS:
                return
        try:
            (n,) = db.execute("SELECT count(*) FROM trials").fetchone()
            self._rows_at_most = n
            if n <= MAX_ROWS:
                return
            with _transaction(db):
                for (job,) in db.execute("SELECT job FROM jobs ORDER BY used").fetchall():
                    if n <= MAX_ROWS * 3 // 4:
                        break
                    n -= _forget_job(db, job)
            self._rows_at_most = n
        except sqlite3.Error:
            return

    def summary(self, job: str) -> tuple[bytes, bytes] | None:
        """(digest, census) stored for `job`, or None."""
        db = self._open()
        if db is None:
            return None
        try:
            row = db.execute("SELECT digest, census FROM summary WHERE job = ?", (_b(job),)).fetchone()
        except sqlite3.Error as exc:
            self._off(f"cannot read {self.path}: {exc}")
            return None
        return (bytes(row[0]), bytes(row[1])) if row else None

    def store_summary(self, job: str, digest: bytes | None, census: bytes | None) -> None:
        """Keep (or, with None, forget) the summary of `job`."""
        db = self._for_write()
        if db is None:
            return
        try:
            if digest is None or census is None:
                db.execute("DELETE FROM summary WHERE job = ?", (_b(job),))
            else:
                db.execute("INSERT OR REPLACE INTO summary VALUES (?, ?, ?)", (_b(job), digest, census))
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                self.problem = f"cannot write {self.path}: {exc}"
                self.writable = False
        except sqlite3.Error as exc:
            self._off(f"cannot write {self.path}: {exc}")

    def forget_jobs_except(self, keep: set[str]) -> None:
        """Drop the records of job dirs that are no longer under the root."""
        db = self._for_write()
        if db is None:
            return
        try:
            known = [os.fsdecode(j) for (j,) in db.execute("SELECT job FROM jobs").fetchall()]
            gone = [j for j in known if j not in keep]
            if not gone:
                return
            with _transaction(db):
                for j in gone:
                    _forget_job(db, _b(j))
        except sqlite3.Error:
            return

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
        self._db = None
        self._opened = False


def census_bytes(census: Census) -> bytes | None:
    """The census as JSON, or None when it cannot be written (names that are not UTF-8)."""
    data = {}
    for f in fields(census):
        v = getattr(census, f.name)
        data[f.name] = sorted(v) if isinstance(v, frozenset) else dict(v) if isinstance(v, Counter) else v
    try:
        return orjson.dumps(data)
    except TypeError:
        return None


def census_from(data: bytes) -> Census:
    """Raises ValueError (or TypeError, KeyError) for bytes that do not hold a census."""
    raw = orjson.loads(data)
    kw: dict[str, Any] = {}
    for f in fields(Census):
        v = raw[f.name]
        if f.name == "benign":
            v = frozenset(v)
        elif isinstance(v, dict):
            v = Counter(v)
        kw[f.name] = v
    return Census(**kw)
