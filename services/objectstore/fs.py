"""A bucket seen as the walk's list / stat / read (`StoreWalkFS`) and as the write path's
`JobFS` (`StoreFS`), over POSIX-style paths `/<bucket>/<key>`.

Reading: one paged listing of a root prefix answers every list and stat of a scan (names,
sizes, versions come with it); only the files the walk asks to read are fetched.

Writing: an object store has no rename, so moving a trial dir is copy, verify, delete, made
safe by two small marker objects and the store's preconditions:

    dst/.evaldesk-incoming.json {src}   written first (must not exist): dst is not there yet
    server-side copy of each object, the destination required absent, the source's version named
    a listing of dst: every copy present with the source's checksum (verified)
    src/.evaldesk-moved.json {dst}      the commit (must not exist): from here src is gone
    delete each source object, naming the version that was copied; then the two markers

A reader (`stat`, `list_dir`, the walk) counts a prefix holding `.evaldesk-moved.json` as
gone, and one holding `.evaldesk-incoming.json` as not there until its source is committed,
so a kill anywhere leaves a state the write path reads as done or not done, never half; the
next move touching either prefix finishes the deletions first. A listing taken before a move
(the walk's, or a nested folder's) never brings a moved prefix back: prefixes moved since a
listing was taken are taken out of it, and a rename never copies a nested prefix that is gone.

A dir made by `mkdir_exclusive` (the lock) is a `.evaldesk-dir` object, written only if absent.
Every overwrite names the version last read (`ifGenerationMatch` / `If-Match`), so a
concurrent writer between evaldesk's read and its write is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import posixpath
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from services.harbor.walk import A_DIR, MAX_BYTES, Key, Listing, Read, pack_key
from services.objectstore.store import ABSENT, Bucket, Conflict, Obj
from services.transport.fs import READ_TIMEOUT_S, FileStat, NotRegularFile, TooLarge, checkpoint

INCOMING = ".evaldesk-incoming.json"
MOVED = ".evaldesk-moved.json"
DIR_MARK = ".evaldesk-dir"
MARKERS = (INCOMING, MOVED)
HIDDEN = (INCOMING, MOVED, DIR_MARK)
QUARANTINE = ".evaldesk-quarantine"
LOCK_DIR = ".evaldesk-lock"  # (services/remediations/lock.py)
_T = TypeVar("_T")
_Strs = list[str]
_Listings = list[Listing]
_Keys = list[Key]
_Reads = list[Read]


def _ino(version: str) -> int:
    return int.from_bytes(hashlib.blake2b(version.encode(), digest_size=8).digest(), "big")


class Moves:
    """The moves made through this bucket since start, so a listing taken before one of them
    leaves the moved prefix out (and a move back puts it in again)."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str]] = []
        self._lock = threading.Lock()

    def add(self, src: str, dst: str) -> None:
        with self._lock:
            self.events.append((time.monotonic(), src, dst))

    def gone_since(self, t0: float) -> set[str]:
        gone: set[str] = set()
        with self._lock:
            for t, src, dst in self.events:
                if t >= t0:
                    gone.add(src)
                    gone.discard(dst)
        return gone


def _under(key: str, prefixes: set[str]) -> bool:
    return any(key == p or key.startswith(p + "/") for p in prefixes)


class _Paths:
    def __init__(self, bucket: Bucket) -> None:
        self.bucket = bucket
        self.root = f"/{bucket.name}"

    def key(self, path: str) -> str:
        path = posixpath.normpath(path)
        if path == self.root:
            return ""
        if not path.startswith(self.root + "/"):
            raise FileNotFoundError(errno.ENOENT, f"not in {self.bucket.url}", path)
        return path[len(self.root) + 1:]

    def path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root


# -- the walk's view ----------------------------------------------------------------------------

class _Tree:
    """One listing of a prefix: every dir's children, every file's object."""

    def __init__(self, top: str, objs: list[Obj], taken: float) -> None:
        self.top, self.taken = top, taken
        self.files: dict[str, Obj] = {}
        self.dirs: dict[str, dict[str, str]] = {top: {}}
        self.hidden: set[str] = set()  # prefixes in the middle of a move (see the module's doc)
        self.incoming: set[str] = set()  # of those, the destinations
        start = len(top) + 1 if top else 0
        for o in objs:
            self.files[o.key] = o
            parts = o.key[start:].split("/")
            parent = top
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                self.dirs.setdefault(parent, {})[part] = "file" if last else "dir"
                if last and part in MARKERS:
                    self.hidden.add(parent)
                    if part == INCOMING:
                        self.incoming.add(parent)
                parent = f"{parent}/{part}" if parent else part


class StoreWalkFS:
    """The walk's list / stat / read over one bucket. `refresh()` (at every scan) drops the
    listings; until then a listing answers, minus what was moved since it was taken."""

    def __init__(self, bucket: Bucket, moves: Moves | None = None, threads: int = 16) -> None:
        self.paths = _Paths(bucket)
        self.bucket = bucket
        self.moves = moves or Moves()
        self.threads = threads
        self.reads = 0
        self._trees: list[_Tree] = []

    def refresh(self) -> None:
        self._trees = []

    def _tree(self, key: str) -> _Tree:
        for tree in self._trees:
            if key == tree.top or tree.top == "" or key.startswith(tree.top + "/"):
                return tree
        taken = time.monotonic()
        tree = _Tree(key, self.bucket.objects(key + "/" if key else ""), taken)
        for dst in tree.incoming - {k.rpartition("/")[0] for k in tree.files if k.endswith("/" + MOVED)}:
            # a destination whose move is committed is there (its source's deletions may lag)
            got = self.bucket.get(f"{dst}/{INCOMING}", 64 * 1024)
            try:
                src = str(json.loads(got[0]).get("src", "")) if got else ""
            except (ValueError, AttributeError):
                src = ""
            commit = self.bucket.get(f"{src}/{MOVED}", 64 * 1024) if src else None
            try:
                if commit is not None and json.loads(commit[0]).get("dst") == dst:
                    tree.hidden.discard(dst)
            except (ValueError, AttributeError):
                pass
        self._trees.append(tree)
        return tree

    def _gone(self, tree: _Tree, key: str) -> bool:
        return _under(key, tree.hidden) or _under(key, self.moves.gone_since(tree.taken))

    def list(self, paths: _Strs) -> _Listings:
        out: _Listings = []
        for path in paths:
            try:
                key = self.paths.key(path)
                tree = self._tree(key)
            except OSError as exc:
                out.append(exc.strerror or str(exc))
                continue
            children = tree.dirs.get(key)
            if not children or self._gone(tree, key):
                out.append(os.strerror(errno.ENOENT))
                continue
            gone = self.moves.gone_since(tree.taken) | tree.hidden
            prefix = key + "/" if key else ""
            out.append(sorted((n, kind) for n, kind in children.items()
                              if n not in HIDDEN and not (kind == "dir" and (prefix + n) in gone)))
        return out

    def stat(self, paths: _Strs) -> _Keys:
        out: _Keys = []
        for path in paths:
            key = self.paths.key(path)
            tree = self._tree(posixpath.dirname(key))
            if self._gone(tree, key):
                out.append(None)
            elif key in tree.files:
                o = tree.files[key]
                out.append(pack_key(o.mtime_ns, 0, o.size, _ino(o.version)))
            else:
                out.append(A_DIR if tree.dirs.get(key) else None)
        return out

    def _read_one(self, path: str) -> Read:
        name = posixpath.basename(path)
        try:
            got = self.bucket.get(self.paths.key(path), MAX_BYTES)
        except OSError as exc:
            return None, f"{name} unreadable: {exc}"
        return (None, None) if got is None else (got[0], None)

    def read(self, paths: _Strs) -> _Reads:
        self.reads += len(paths)
        if len(paths) < 4 or self.threads <= 1:
            return [self._read_one(p) for p in paths]
        with ThreadPoolExecutor(min(self.threads, len(paths))) as pool:
            return list(pool.map(self._read_one, paths, timeout=600))

    def realpath(self, path: str) -> str:
        return path  # an object store has no symlinks

    def now(self) -> float:
        return time.time()


# -- the write path's view ----------------------------------------------------------------------

class StoreFS:
    """`JobFS` over one bucket (see the module's doc for how a move is made safe)."""

    def __init__(self, bucket: Bucket, moves: Moves | None = None) -> None:
        self.paths = _Paths(bucket)
        self.bucket = bucket
        self.moves = moves or Moves()
        self._seen: dict[str, str] = {}  # key → the version last read or written: what an overwrite names
        self._lock = threading.Lock()

    async def _io(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.to_thread(fn, *args)

    # reading

    def _marker(self, key: str) -> dict[str, Any] | None:
        got = self.bucket.get(key, 64 * 1024)
        if got is None:
            return None
        try:
            doc = json.loads(got[0])
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) else {}

    def _committed(self, src: str, dst: str) -> bool:
        mark = self._marker(f"{src}/{MOVED}")
        return mark is not None and mark.get("dst") == dst

    def _dir_state(self, key: str) -> tuple[bool, float]:
        """(there, mtime) of a prefix, as the module's doc says a reader sees it."""
        first = self.bucket.list_first(key + "/", 4)
        content = [o for o in first if o.key.rpartition("/")[2] not in MARKERS]
        if not content:
            return False, 0.0
        names = {o.key for o in first}
        if f"{key}/{MOVED}" in names or self.bucket.head(f"{key}/{MOVED}") is not None:
            return False, 0.0
        incoming = self._marker(f"{key}/{INCOMING}")
        if incoming is not None and not self._committed(str(incoming.get("src", "")), key):
            return False, 0.0
        mark = next((o for o in first if o.key == f"{key}/{DIR_MARK}"), None)
        return True, (mark.mtime_ns / 1e9 if mark else 0.0)

    def _stat(self, path: str) -> FileStat | None:
        key = self.paths.key(path)
        if key:
            obj = self.bucket.head(key)
            if obj is not None:
                return FileStat(obj.size, obj.mtime_ns / 1e9, False, True, 0o644)
        there, mtime = self._dir_state(key)
        return FileStat(0, mtime, True, False, 0o755) if there else None

    async def stat(self, path: str) -> FileStat | None:
        try:
            return await self._io(self._stat, path)
        except FileNotFoundError:
            return None

    async def lstat(self, path: str) -> FileStat | None:
        return await self.stat(path)

    def _get(self, path: str, max_bytes: int) -> bytes:
        key = self.paths.key(path)
        got = self.bucket.get(key, max_bytes)
        if got is None:
            if self._dir_state(key)[0]:
                raise NotRegularFile(f"{path}: not a regular file")
            with self._lock:
                self._seen[key] = ABSENT
            raise FileNotFoundError(errno.ENOENT, "no such object", path)
        with self._lock:
            self._seen[key] = got[1].version
        return got[0]

    async def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        data = await self._io(self._get, path, MAX_BYTES)
        return data[offset:] if length is None else data[offset: offset + length]

    async def read_regular(self, path: str, max_bytes: int, timeout_s: float = READ_TIMEOUT_S) -> bytes:
        try:
            return await asyncio.wait_for(self._io(self._get, path, max_bytes), timeout_s)
        except OSError as exc:
            if "larger than" in str(exc):
                raise TooLarge(f"{path}: over the {max_bytes:,} byte limit") from None
            raise

    async def sha256(self, path: str, max_bytes: int) -> str | None:
        try:
            data = await self.read_regular(path, max_bytes)
        except FileNotFoundError:
            return None
        return hashlib.sha256(data).hexdigest()

    def _children(self, key: str) -> list[str]:
        # one listing answers for every child: a child in the middle of a move is told by the
        # markers the listing holds (an incoming one costs a read of its source's commit)
        objs = self.bucket.objects(key + "/" if key else "")
        if not objs:
            raise FileNotFoundError(errno.ENOENT, "no such prefix", self.paths.path(key))
        tree = _Tree(key, objs, time.monotonic())
        prefix = key + "/" if key else ""
        out = []
        for name, kind in (tree.dirs.get(key) or {}).items():
            child = prefix + name
            if name in HIDDEN:
                continue
            if kind == "dir":
                inside = tree.dirs.get(child) or {}
                if MOVED in inside or not [n for n in inside if n not in MARKERS]:
                    continue
                if INCOMING in inside:
                    mark = self._marker(f"{child}/{INCOMING}")
                    if mark is not None and not self._committed(str(mark.get("src", "")), child):
                        continue
            out.append(name)
        return sorted(out)

    async def list_dir(self, path: str) -> list[str]:
        return await self._io(self._children, self.paths.key(path))

    # writing

    async def makedirs(self, path: str) -> None:
        return None  # prefixes need no making

    def _mkdir(self, path: str) -> None:
        key = self.paths.key(path)
        try:
            self.bucket.put(f"{key}/{DIR_MARK}", b"", ABSENT)
        except Conflict:
            raise FileExistsError(errno.EEXIST, "exists", path) from None
        if posixpath.basename(key) == LOCK_DIR:
            # under the lock: the deletions of moves that a kill cut short after their commit
            # are finished, whatever the write that now runs (apply, finish, undo); a lock
            # beside the job (<jobs>/.evaldesk-quarantine/<job>) covers the job too
            target = posixpath.dirname(key)
            self._settle_under(target)
            if posixpath.basename(posixpath.dirname(target)) == QUARANTINE:
                jobs = posixpath.dirname(posixpath.dirname(target))
                self._settle_under(posixpath.join(jobs, posixpath.basename(target)))

    def _settle_under(self, key: str) -> None:
        for o in self.bucket.objects(key + "/"):
            parent, _, name = o.key.rpartition("/")
            if name in MARKERS:
                self._settle(parent)

    async def mkdir_exclusive(self, path: str) -> None:
        await self._io(self._mkdir, path)

    def _rmdir(self, path: str) -> None:
        key = self.paths.key(path)
        objs = self.bucket.objects(key + "/")
        # what may go with an empty dir: its own marker, and uncommitted copies of moves that
        # never reached their commit (their sources are whole)
        debris: list[Obj] = []
        for o in objs:
            if o.key == f"{key}/{DIR_MARK}":
                debris.append(o)
                continue
            top = o.key
            while top.startswith(key + "/"):
                top = top.rpartition("/")[0]
                incoming = self._marker(f"{top}/{INCOMING}") if top != key else None
                if incoming is not None and not self._committed(str(incoming.get("src", "")), top):
                    debris.append(o)
                    break
            else:
                raise OSError(errno.ENOTEMPTY, "not empty", self.paths.path(o.key))
        for o in debris:
            self.bucket.delete(o)

    async def rmdir(self, path: str) -> None:
        await self._io(self._rmdir, path)

    def _forget(self, key: str) -> None:
        """What was read under `key` (an object or a prefix) was moved or deleted by evaldesk."""
        with self._lock:
            for k in [k for k in self._seen if k == key or k.startswith(key + "/")]:
                del self._seen[k]

    def _match(self, key: str) -> str:
        with self._lock:
            seen = self._seen.get(key)
        if seen is not None:
            return seen
        obj = self.bucket.head(key)
        return ABSENT if obj is None else obj.version

    def _put(self, path: str, data: bytes, match: str | None = None) -> None:
        key = self.paths.key(path)
        match = self._match(key) if match is None else match
        checkpoint(f"write:{posixpath.basename(path)}")
        try:
            obj = self.bucket.put(key, data, match)
        except Conflict as exc:
            with self._lock:
                self._seen.pop(key, None)
            raise Conflict(path, exc.strerror or "changed") from None
        with self._lock:
            self._seen[key] = obj.version

    async def write_bytes_atomic(self, path: str, data: bytes) -> None:
        # an object write is atomic by itself; the precondition is what refuses a concurrent writer
        await self._io(self._put, path, data)

    def _append(self, path: str, data: bytes) -> None:
        key = self.paths.key(path)
        got = self.bucket.get(key, MAX_BYTES)
        old, version = (b"", ABSENT) if got is None else (got[0], got[1].version)
        self._put(path, old + data, version)

    async def append_durable(self, path: str, data: bytes) -> None:
        await self._io(self._append, path, data)

    def _remove(self, path: str) -> None:
        key = self.paths.key(path)
        obj = self.bucket.head(key)
        if obj is None:
            raise FileNotFoundError(errno.ENOENT, "no such object", path)
        with self._lock:
            seen = self._seen.pop(key, None)
        if seen and seen != obj.version:
            raise Conflict(path)
        self.bucket.delete(obj)

    async def remove_file(self, path: str) -> None:
        await self._io(self._remove, path)

    # moving

    def _settle(self, key: str) -> None:
        """Finish the deletions of a committed move that `key` is either end of."""
        incoming = self._marker(f"{key}/{INCOMING}")
        if incoming is not None:
            src = str(incoming.get("src", ""))
            if self._committed(src, key):
                self._cleanup(src, key)
            return
        moved = self._marker(f"{key}/{MOVED}")
        if moved is not None:
            self._cleanup(key, str(moved.get("dst", "")))

    def _cleanup(self, src: str, dst: str) -> None:
        """Delete exactly the versions the committed move copied; an object rewritten since is
        left, and the commit marker goes with the rest, so it shows (beside its moved copy: the
        write path then reports a conflict, nothing is lost)."""
        mark = self._marker(f"{src}/{MOVED}") or {}
        copied = mark.get("objects") or {}
        self._forget(src)
        for key, version in sorted(copied.items()):
            with contextlib.suppress(Conflict, FileNotFoundError):
                self.bucket.delete(Obj(str(key), 0, 0, str(version), ""))
            checkpoint("move:deleting")
        for key in (f"{dst}/{INCOMING}", f"{src}/{MOVED}"):
            obj = self.bucket.head(key)
            if obj is not None:
                self.bucket.delete(obj)

    def _content(self, key: str) -> list[Obj]:
        """The objects of a prefix, minus markers and every nested prefix that is gone (moved
        away, or a quarantine): what a move carries."""
        objs = self.bucket.objects(key + "/")
        gone = {o.key.rpartition("/")[0] for o in objs if o.key.rpartition("/")[2] == MOVED}
        gone |= {o.key.rpartition("/")[0] for o in objs if o.key.rpartition("/")[2] == INCOMING
                 and o.key.rpartition("/")[0] != key}
        gone |= self.moves.gone_since(0.0)
        return [o for o in objs if o.key.rpartition("/")[2] not in MARKERS and not _under(o.key, gone)
                and f"/{QUARANTINE}/" not in o.key[len(key):]]

    def _rename(self, src_path: str, dst_path: str) -> None:
        src, dst = self.paths.key(src_path), self.paths.key(dst_path)
        obj = self.bucket.head(src)
        if obj is not None:  # one object
            if self.bucket.head(dst) is not None:
                raise FileExistsError(errno.EEXIST, "refusing to overwrite", dst_path)
            new = self.bucket.head(dst) if self.bucket.copy(obj, dst) else None
            if new is None or not self.bucket.same(obj, new):
                raise OSError(errno.EIO, "the copy does not match its source; the source is kept", dst_path)
            self.bucket.delete(obj)
            self._forget(src)
            self.moves.add(src, dst)
            return
        self._settle(src)
        self._settle(dst)
        if self._dir_state(dst)[0]:
            raise FileExistsError(errno.EEXIST, "refusing to overwrite", dst_path)
        objs = self._content(src)
        if not objs or not self._dir_state(src)[0]:
            raise FileNotFoundError(errno.ENOENT, "no such prefix", src_path)
        try:
            self.bucket.put(f"{dst}/{INCOMING}", json.dumps({"src": src}).encode(), ABSENT)
        except Conflict:
            mark = self._marker(f"{dst}/{INCOMING}") or {}
            if mark.get("src") != src:
                raise FileExistsError(errno.EEXIST, "another move is writing there", dst_path) from None
        for o in objs:
            target = dst + o.key[len(src):]
            try:
                self.bucket.copy(o, target)
            except Conflict:
                have = self.bucket.head(target)
                if have is None or not self.bucket.same(o, have):
                    raise
            checkpoint("move:copying")
        # verified: every copy is there with its source's checksum, before anything is deleted
        copies = {o.key: o for o in self.bucket.objects(dst + "/")}
        bad = [o.key for o in objs if (c := copies.get(dst + o.key[len(src):])) is None or not self.bucket.same(o, c)]
        if bad:
            raise OSError(errno.EIO, f"{len(bad)} copies do not match their sources; nothing deleted",
                          self.paths.path(bad[0]))
        commit = {"dst": dst, "objects": {o.key: o.version for o in objs}}
        self.bucket.put(f"{src}/{MOVED}", json.dumps(commit).encode(), ABSENT)
        self.moves.add(src, dst)
        self._forget(src)
        checkpoint("move:committed")
        self._cleanup(src, dst)

    async def rename(self, src: str, dst: str) -> None:
        await self._io(self._rename, src, dst)
