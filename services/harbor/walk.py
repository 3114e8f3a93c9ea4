"""Where a Harbor job's trials are and the key of each one's files: one listing of the job dir
and one stat per trial, with nothing but the standard library.

The scanner (services/harbor/scan.py) builds on it, and so does the audit replay of `--batch
audit` (tui/batch_replay.py), which must tell "nothing changed" before importing anything else:
both walk the same way, so their keys and digests agree by construction.

A file's key is one int: mtime_ns, ctime_ns, size and inode packed (ctime cannot be set back
by hand, so a file rewritten in place with its old mtime and size still shows as changed).
Sentinels: None absent, -1 not a regular file, -2 a dangling symlink or unstat-able,
-3 the trial dir itself cannot be searched. A running trial is keyed by its config.json at -10
and below (`running_key`), apart from every result key.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from services.core.stamps import file_stamp, pack_stat, tree_stamp

if TYPE_CHECKING:
    from typing import Any

    from services.harbor.early_read import EarlyReads

QUARANTINE_DIR = ".evaldesk-quarantine"
FileKey = int | None
UNREADABLE_DIR = -3
_ASK = -1  # from the batch stat: not the common case, ask trial_key
PARALLEL_STAT_MIN = 4000  # below this a forked helper costs more than the stats it takes over
_KEY_BYTES = 33


def is_trial_dir(path: str) -> bool:
    return os.path.lexists(os.path.join(path, "config.json")) or os.path.lexists(
        os.path.join(path, "result.json")
    )


class TrialLoc:
    """Where one trial dir is, and its result.json's key. (A plain class, not a dataclass: the
    audit replay imports this module and nothing else, and dataclasses costs 5 ms to import.)"""

    __slots__ = ("error", "job", "name", "rel", "rkey")

    def __init__(self, rel: str, job: str, name: str, rkey: FileKey = None, error: str | None = None) -> None:
        self.rel = rel
        self.job = job  # the job dir (one string shared by all: a path per trial would be ~10 MB at 100k)
        self.name = name
        self.rkey = rkey  # result.json's key, None when absent
        self.error = error  # the trial dir cannot be read: why

    def __repr__(self) -> str:
        return f"TrialLoc({self.rel!r}, rkey={self.rkey!r}, error={self.error!r})"

    @property
    def abs(self) -> str:
        return f"{self.job}/{self.rel}"


def trial_key(path: str) -> tuple[bool, FileKey, str | None]:
    """(is a trial dir, result.json key, why the dir cannot be read) with one stat in the common case."""
    result = path + "/result.json"
    try:
        st = os.stat(result)
    except PermissionError as exc:
        # a dir we may not search: nothing inside can be told, but it is not silently dropped
        return True, UNREADABLE_DIR, f"trial dir unreadable: {exc.strerror or exc}"
    except OSError:
        if os.path.lexists(result):
            return True, -2, None
        return os.path.lexists(path + "/config.json"), None, None
    if not stat.S_ISREG(st.st_mode):
        return True, -1, None
    return True, pack_stat(st), None


def unreadable_note(rel: str, error: str) -> str:
    return f"{rel}: {error}; counted as errored"


class ListedEntry:
    """What a poll needs of a new name in the job dir (os.listdir gives names only)."""

    __slots__ = ("_mode", "name", "path")

    def __init__(self, name: str, path: str, mode: int | None = None) -> None:
        self.name, self.path = name, path
        if mode is not None:
            self._mode = mode
            return
        try:
            self._mode = os.lstat(path).st_mode
        except OSError:
            self._mode = 0

    def is_dir(self, follow_symlinks: bool = True) -> bool:
        return stat.S_ISDIR(self._mode)

    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self._mode)


Entry = os.DirEntry[str] | ListedEntry


def classify(entry: Entry, job_dir: str, real_job: str, problems: list[str],
             known: FileKey = None) -> Iterator[TrialLoc]:
    """The trial dirs one entry of the job dir holds: itself, or staged copies one level deeper
    under a non-trial folder. `known` is its result.json key when a batch stat already took it."""
    if known is not None:
        yield TrialLoc(entry.name, job_dir, entry.name, known)
        return
    if entry.name == QUARANTINE_DIR:
        return
    # hidden folders (.git, caches) are skipped, but a task may legitimately start with a dot
    hidden = entry.name.startswith(".")
    if hidden and not (entry.is_dir(follow_symlinks=False) and is_trial_dir(entry.path)):
        return
    if entry.is_symlink():
        target = os.path.realpath(entry.path)
        if not (target + os.sep).startswith(real_job + os.sep):
            problems.append(f"{entry.name}: symlink to {target}, outside the job dir; not followed")
        else:
            problems.append(f"{entry.name}: symlink inside the job dir; not followed (counted once)")
        return
    if not entry.is_dir(follow_symlinks=False):
        return
    is_trial, rkey, error = trial_key(entry.path)
    if is_trial:
        yield TrialLoc(entry.name, job_dir, entry.name, rkey, error)
        return
    try:
        inner = sorted(os.scandir(entry.path), key=lambda e: e.name)
    except OSError:
        return
    for sub in inner:
        if sub.is_symlink():
            problems.append(f"{entry.name}/{sub.name}: symlink; not followed")
            continue
        if sub.is_dir(follow_symlinks=False):
            rel = f"{entry.name}/{sub.name}"
            is_trial, rkey, error = trial_key(sub.path)
            if is_trial:
                yield TrialLoc(rel, job_dir, sub.name, rkey, error)


def _stat_results(dir_fd: int, names: list[str], out: list[int]) -> None:
    # the common case only: a regular result.json; anything else is left to trial_key
    st = os.stat
    isreg = stat.S_ISREG
    put = out.append
    for name in names:
        try:
            s = st(name + "/result.json", dir_fd=dir_fd)
        except OSError:
            put(_ASK)
            continue
        put(pack_stat(s) if isreg(s.st_mode) else _ASK)


def cores() -> int:
    """The cores this process may run on (a forked helper is worth it only with two or more)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def key_bytes(key: int) -> bytes:
    """A key as the parse cache, the digest and the forked helper keep it: 33 bytes."""
    return key.to_bytes(_KEY_BYTES, "big", signed=True)


def encode_keys(keys: Iterable[int]) -> bytes:
    return b"".join([key_bytes(k) for k in keys])


def _decode_keys(data: bytes) -> list[int]:
    return [int.from_bytes(data[i: i + _KEY_BYTES], "big", signed=True) for i in range(0, len(data), _KEY_BYTES)]


def batch_result_keys(job_dir: str, names: list[str], parallel: bool = True) -> list[int]:
    """result.json's key for each of `names` (dirs of the job dir), -1 where that is not a
    regular file (ask `trial_key`)."""
    mine, theirs = _batch_stat(job_dir, names, parallel)
    return mine + (_decode_keys(theirs[:-1]) if theirs else [])


def batch_result_bytes(job_dir: str, names: list[str]) -> bytes | None:
    """The same keys encoded (`encode_keys`), or None when any of them is not the common case."""
    mine, theirs = _batch_stat(job_dir, names)
    if _ASK in mine or (theirs and theirs[-1:] != b"\0"):
        return None
    return encode_keys(mine) + theirs[:-1]


def _batch_stat(job_dir: str, names: list[str], parallel: bool = True) -> tuple[list[int], bytes]:
    """The keys of a first part of `names` stat'ed here, and the rest as a forked helper on a
    second core encoded them (with a last byte 1 when one of them is not the common case).
    Anything wrong with the helper only means its part is stat'ed here too."""
    try:
        dir_fd = os.open(job_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return [_ASK] * len(names), b""
    try:
        out: list[int] = []
        if not parallel or len(names) < PARALLEL_STAT_MIN or sys.platform != "linux" or cores() < 2:
            _stat_results(dir_fd, names, out)
            return out, b""
        half = len(names) // 2
        theirs = _forked_stats(dir_fd, names[half:])
        _stat_results(dir_fd, names[:half], out)
        got = theirs() if theirs is not None else None
        if got is None:
            _stat_results(dir_fd, names[half:], out)
            return out, b""
        return out, got
    finally:
        os.close(dir_fd)


def _forked_stats(dir_fd: int, names: list[str]) -> Callable[[], bytes | None] | None:
    """Start a child that stats `names` into an anonymous memory file; returns a function that
    waits for it and gives its encoded keys (None: it failed, stat them here)."""
    try:
        mem = os.memfd_create("evaldesk-stats", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(mem)
        return None
    if pid == 0:  # the child: stat, write, leave without running anything of the parent's
        code = 1
        try:
            keys: list[int] = []
            _stat_results(dir_fd, names, keys)
            view = memoryview(encode_keys(keys) + (b"\1" if _ASK in keys else b"\0"))
            while view:
                view = view[os.write(mem, view):]
            code = 0
        finally:
            os._exit(code)

    def collect() -> bytes | None:
        try:
            _, status = os.waitpid(pid, 0)
            if status != 0:
                return None
            size = os.fstat(mem).st_size
            if size != len(names) * _KEY_BYTES + 1:
                return None
            return os.pread(mem, size, 0)
        except OSError:
            return None
        finally:
            os.close(mem)

    return collect


def list_job(job_dir: str, problems: list[str], parallel: bool = True) -> list[tuple[Entry, list[TrialLoc]]] | None:
    """Every entry of the job dir in name order with the trial dirs it holds; None (and a
    problem said) when the job dir cannot be listed. `parallel`: a big job's stats may be
    shared with a forked helper."""
    early = _take_prelisted(job_dir)
    if early is not None:
        said, listed = early
        problems += said
        return listed
    real_job = os.path.realpath(job_dir)
    try:
        with os.scandir(job_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        problems.append(f"cannot list {job_dir}: {exc.strerror or exc}")
        return None
    # the common entry, a visible trial dir (not a symlink), has its result.json stat'ed in one batch
    plain = [e.name for e in entries
             if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
    keys = dict(zip(plain, batch_result_keys(job_dir, plain, parallel), strict=True)) if plain else {}
    out: list[tuple[Entry, list[TrialLoc]]] = []
    for entry in entries:
        known = keys.get(entry.name)
        out.append((entry, list(classify(entry, job_dir, real_job, problems,
                                         known if known is not None and known >= 0 else None))))
    return out


# -- a listing taken early, on a second core, while the process still imports (tui/cli.py) ---

PRELIST_FRESH_S = 2.0  # an early listing finished longer ago than this is not used: list again
_DIR, _LINK = 1, 2
# the dir listed early (st_dev, st_ino), and what waits for the child: (when it was done, what
# list_job said, the listing in the child's terms), or None when it failed
_prelisted: tuple[tuple[int, int], Callable[[], tuple[float, list[str], Any] | None]] | None = None
# the records the same child goes on to make of that dir's trials (services/harbor/early_read.py),
# once its listing is taken: for the scan that took it
_early_reads: tuple[tuple[int, int], EarlyReads] | None = None


def prelist(dirs: Iterable[str]) -> None:
    """List the first of `dirs` (the job dirs a batch command is about to scan) in a forked
    child while this process goes on importing the rest of evaldesk; `list_job` of that dir then
    takes the listing instead of listing it again. Only the first: the child pays for what it
    lists while the imports run (~0.15 s, a 20k-trial job), and the scan of one job must not wait
    for the listing of every other. Once listed, the child reads the job's finished trials for the
    scan (services/harbor/early_read.py). Anything wrong in the child only means the dir is listed
    and read here. Standard library only, and only fast_record imported in the child."""
    if sys.platform != "linux" or cores() < 2:
        return
    for job_dir in dirs:
        try:
            st = os.stat(job_dir)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            break
    else:
        return
    from services.harbor import early_read

    try:
        mem = os.memfd_create("evaldesk-listing", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return
    shared = early_read.shared_memory() if early_read.ORDERED_STORES else None
    ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        for fd in (mem, ready_r, ready_w):
            os.close(fd)
        return
    if pid == 0:  # the child: list, write, read; leave without running anything of the parent's
        code = 1
        try:
            os.close(ready_r)
            said: list[str] = []
            listed = list_job(job_dir, said, parallel=False)  # (the other core is the parent's)
            raw = None if listed is None else [
                (e.name, (_DIR if e.is_dir(follow_symlinks=False) else 0) | (_LINK if e.is_symlink() else 0),
                 _found(e.name, found)) for e, found in listed]
            locs = early_read.parseable(listed) if listed is not None and shared is not None else []
            if shared is not None and 0 < len(locs) < early_read.SETTLE_MIN:
                early_read.offer(shared, len(locs))
            else:
                locs = []
            # (CLOCK_MONOTONIC is one clock for every process of the machine)
            done = time.monotonic()
            view = memoryview(marshal.dumps((done, said, raw)))
            while view:
                view = view[os.write(mem, view):]
            os.write(ready_w, b"1")
            os.close(ready_w)
            code = 0
            if locs and shared is not None:
                early_read.read_back(shared, locs, parent, done + PRELIST_FRESH_S)
        finally:
            os._exit(code)
    os.close(ready_w)

    def collect() -> tuple[float, list[str], Any] | None:
        try:
            ready = os.read(ready_r, 1)  # (the child goes on reading trials after this)
            if ready != b"1":
                return None
            done, said, raw = marshal.loads(os.pread(mem, os.fstat(mem).st_size, 0))
            return float(done), said, raw
        except (OSError, ValueError, EOFError, TypeError):
            return None
        finally:
            os.close(ready_r)
            os.close(mem)

    global _prelisted, _early_reads
    _prelisted = ((st.st_dev, st.st_ino), collect)
    drop_early_reads()  # (one early child at a time: a process prelists once, tests many times)
    if shared is not None:
        _early_reads = ((st.st_dev, st.st_ino), early_read.EarlyReads(pid, shared))


def _take_prelisted(job_dir: str) -> tuple[list[str], list[tuple[Entry, list[TrialLoc]]]] | None:
    global _prelisted, _early_reads
    if _prelisted is None or not _is_dir(_prelisted[0], job_dir):
        return None
    collect = _prelisted[1]
    _prelisted = None  # taken once: the next scan lists the job itself
    got = collect()  # (waits for the child if it is still at it: it had a head start)
    if got is None or time.monotonic() - got[0] > PRELIST_FRESH_S or got[2] is None:
        # (a listing this process waited for is always fresh enough; one that failed is said by
        # this process itself, naming the dir its way)
        drop_early_reads()
        return None
    _, said, raw = got
    modes = {0: stat.S_IFREG, _DIR: stat.S_IFDIR, _LINK: stat.S_IFLNK, _DIR | _LINK: stat.S_IFLNK}
    base = os.path.join(job_dir, "")
    listed: list[tuple[Entry, list[TrialLoc]]] = [
        (ListedEntry(name, base + name, modes[flags]),
         [TrialLoc(name, job_dir, name, found)] if type(found) is int
         else [TrialLoc(rel, job_dir, tname, rkey, error) for rel, tname, rkey, error in found])
        for name, flags, found in raw]
    if _early_reads is not None:
        _early_reads[1].listed(listed)
    return said, listed


def take_early_reads(job_dir: str) -> EarlyReads | None:
    """The records the early child is making of `job_dir`'s trials, for the scan that just took
    its listing; None when there are none (the caller must `close()` what it takes)."""
    global _early_reads
    if _early_reads is None or _early_reads[1].rels is None or not _is_dir(_early_reads[0], job_dir):
        return None
    reads = _early_reads[1]
    _early_reads = None
    reads.arrive()
    return reads


def _is_dir(ident: tuple[int, int], job_dir: str) -> bool:
    # (st_dev, st_ino): any spelling of the path the command line gave
    try:
        st = os.stat(job_dir)
    except OSError:
        return False
    return ident == (st.st_dev, st.st_ino)


def drop_early_reads() -> None:
    """Stop the early child's reading: nothing will take its records."""
    global _early_reads
    if _early_reads is not None:
        _early_reads[1].close()
        _early_reads = None


def _found(name: str, found: list[TrialLoc]) -> int | list[tuple[str, str, FileKey, str | None]]:
    # the common entry, a trial dir of its own name with a result, travels as its key alone
    # (rebuilding 20k entries in the parent is what it waits for)
    if len(found) == 1:
        loc = found[0]
        if loc.rel == name and loc.name == name and loc.error is None and loc.rkey is not None:
            return loc.rkey
    return [(loc.rel, loc.name, loc.rkey, loc.error) for loc in found]


def running_key(ckey: FileKey) -> int:
    # a running trial is keyed by its config.json; kept apart from every result key
    return -10 - (0 if ckey is None else ckey + 3)


def persistable(key: int) -> bool:
    # -1, -2 (odd result files) and an unreadable dir say nothing stable about the content
    return key >= 0 or key <= -10


def keys_digest(keys: dict[str, int]) -> bytes:
    return names_digest(list(keys), encode_keys(keys.values()))


def names_digest(rels: list[str], encoded_keys: bytes) -> bytes:
    """One digest of trial dirs and their keys in order (names hold no NUL: the join is exact)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(os.fsencode("\0".join(rels)))
    h.update(b"\1")
    h.update(encoded_keys)
    return h.digest()


def fast_settled_digest(job_dir: str) -> bytes | None:
    """`keys_digest` of a job in which every entry is a plain trial dir with a regular
    result.json, from the encoded keys as they are; None for any other job (take the long
    way: list_job)."""
    plain: list[str] = []
    try:
        with os.scandir(job_dir) as it:
            for e in it:
                name = e.name
                if name.startswith("."):
                    if name != QUARANTINE_DIR and e.is_dir(follow_symlinks=False) and is_trial_dir(e.path):
                        return None  # a hidden trial dir: the long way places it
                    continue
                if e.is_symlink():
                    return None
                if e.is_dir(follow_symlinks=False):
                    plain.append(name)
    except OSError:
        return None
    plain.sort()
    encoded = batch_result_bytes(job_dir, plain)
    return names_digest(plain, encoded) if encoded is not None else None


# -- what the audit replay of `--batch audit` watches of a job (tui/batch_replay.py) -------------

JOB_FILES = ("config.json", "result.json", "eval_config.json", "meta.env")


STAMPER = "services.harbor.walk:job_stamp"  # how a replay file names job_stamp
REPLAY_STAMPS = ("job_stamp",)  # what a replay file may ask this module to compute


def job_stamp(job_dir: str) -> str:
    """A finished job's trial keys, its own files and its eval configs; "unsettled" when a trial
    runs, a file is odd or unreadable, or the walk had anything to say."""
    digest = fast_settled_digest(job_dir)
    if digest is None:  # not the plain layout: the scanner's own walk decides
        problems: list[str] = []
        listed = list_job(job_dir, problems)
        if listed is None or problems:
            return "unsettled"
        keys: dict[str, int] = {}
        for _, found in listed:
            for loc in found:
                if loc.rkey is None or loc.rkey < 0 or loc.error is not None:
                    return "unsettled"
                keys[loc.rel] = loc.rkey
        digest = keys_digest(keys)
    return settled_stamp(digest, job_dir)


def settled_stamp(digest: bytes, job_dir: str) -> str:
    """The stamp of a job whose trial keys a scan just took (their digest)."""
    return f"{digest.hex()}:{job_files_stamp(job_dir)}"


def job_files_stamp(job_dir: str) -> str:
    keys = [file_stamp(os.path.join(job_dir, n)) for n in JOB_FILES]
    cfg = os.path.join(job_dir, "configs")
    keys.append(tree_stamp(cfg) if os.path.isdir(cfg) else "-")
    return hashlib.blake2b("\0".join(keys).encode(), digest_size=12).hexdigest()


