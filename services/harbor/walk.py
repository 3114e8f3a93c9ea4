"""The one walk of Harbor job dirs: which dirs are jobs, where each job's trials are, the key of
every file, and which files a trial's record is built from. Every Harbor source drives it through
a small batched list / stat / read interface (`LocalWalkFS` here, which also keys a file from the
open file as it reads it, `read_files`; SFTP, object stores). On an SSH
host this very file is the remote program (`serve()`): standard library only, Python 3.6.

DESIGN 3a: trial dirs (holding a config.json or a result.json) sit at depth 1, staged copies one
level deeper under a non-trial folder; symlinks are never followed; `.evaldesk-quarantine` and
hidden non-trial dirs are skipped.

A file's key is one int: mtime_ns, ctime_ns, size, inode (0 where a store has no ctime or inode).
ctime cannot be set back, so a same-size rewrite with the old mtime still changes the key; where it
cannot (SFTP, coarse clocks), git's racy-timestamp rule does: a file changed within RACY_S of being
read is not settled, so it is read again and never kept across processes. Sentinels: None absent,
-1 not a regular file, -2 a dangling symlink, -3 the trial dir cannot be searched, -4 a directory.
"""

import base64
import bisect
import errno
import hashlib
import json
import os
import re
import stat
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

QUARANTINE_DIR = ".evaldesk-quarantine"
MAX_BYTES = 64 * 1024 * 1024
JOB_FILES = ("config.json", "result.json", "eval_config.json", "meta.env")
JOB_KEYS = frozenset({"n_total_trials", "stats", "n_attempts", "agents", "datasets", "jobs_dir", "job_name"})
TRIAL_KEYS = frozenset({"trial_name", "task_name", "task", "trial_uri"})
RACY_S = 2.0
ODD, BROKEN, DENIED, A_DIR = -1, -2, -3, -4
PROTOCOL = 2
# overlapped(): PROBE files read one at a time, and slower than SLOW_S each, send the rest to READERS threads
PROBE, SLOW_S, READERS, STUCK_S = 64, 50e-6, 8, 120.0

Key = Optional[int]
Entry = Tuple[str, str]  # (name, kind): kind is "dir", "file", "link" or "other"
Listing = Union[List[Entry], str]  # the sorted entries, or why the dir cannot be listed
Read = Tuple[Optional[bytes], Optional[str]]  # (bytes, why they could not be read)

_M64 = (1 << 64) - 1


def pack_key(mtime_ns: int, ctime_ns: int, size: int, ino: int) -> int:
    return (mtime_ns << 192) | ((ctime_ns & _M64) << 128) | ((size & _M64) << 64) | (ino & _M64)


def key_mtime(key: int) -> float:
    return (key >> 192) / 1e9


def settled(key: Key, now: float) -> bool:
    """A regular file that has not changed in the last RACY_S (by mtime and ctime)."""
    if key is None or key < 0:
        return False
    limit = (now - RACY_S) * 1e9
    return key >> 192 < limit and (key >> 128) & _M64 < limit


def running_key(ckey: Key) -> int:
    """A running trial is keyed by its config.json, apart from every result key (≤ -100)."""
    return -100 - (0 if ckey is None else ckey + 10)


def loc_of_key(rel: str, key: int) -> "Loc":
    """The Loc of a trial dir as a scan keyed it (running_key turned back for a running one)."""
    name = rel.rsplit("/", 1)[-1]
    if key > -100:
        return Loc(rel, name, key)
    return Loc(rel, name, None, None if key == -100 else -110 - key)


def key_problem(name: str, key: int) -> str:
    """Why a file with a negative key cannot be read."""
    if key == BROKEN:
        return "%s unreadable: a symlink to a missing file" % name
    if key == DENIED:
        return "%s unreadable: %s" % (name, os.strerror(errno.EACCES))
    return "%s unreadable: %s" % (name, "Is a directory" if key == A_DIR else "not a regular file")


class Loc(object):
    """One trial dir: where it is, the keys of its result.json and (while it runs, or when its
    record needs it) config.json, and what a first read already read of its result.json."""

    __slots__ = ("ckey", "error", "got", "name", "rel", "rkey")

    def __init__(self, rel: str, name: str, rkey: Key = None, ckey: Key = None, error: Optional[str] = None) -> None:
        self.rel, self.name, self.rkey, self.ckey, self.error = rel, name, rkey, ckey, error
        self.got = None  # type: Optional[Read]


class WalkError(Exception):
    def __init__(self, where: str, message: str) -> None:
        Exception.__init__(self, "%s: %s" % (where, message))
        self.where, self.message = where, message


# -- this machine's disk ----------------------------------------------------------------------

# (never wait on a fifo, nor take a terminal for the process's own)
_OPEN = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK | os.O_NOCTTY


def _kind(entry: Any) -> str:
    try:
        return "dir" if entry.is_dir(follow_symlinks=False) else "link" if entry.is_symlink() else \
            "file" if entry.is_file(follow_symlinks=False) else "other"
    except OSError:
        return "other"


def read_local(path: str) -> Tuple[Key, Optional[bytes], Optional[str]]:
    """A regular file's key, taken from the open file, and its bytes (never a fifo's or a
    device's; at most MAX_BYTES): (key, bytes, why they could not be read)."""
    try:
        fd = os.open(path, _OPEN)
    except OSError as exc:  # (keyed as a stat keys it)
        known = stat_local(path)
        name = os.path.basename(path)
        if known is None or known < 0:
            return known, None, None if known is None else key_problem(name, known)
        return known, None, "%s unreadable: %s" % (name, exc.strerror or exc)
    key = None  # type: Key
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            key = A_DIR if stat.S_ISDIR(st.st_mode) else ODD
            return key, None, key_problem(os.path.basename(path), key)
        key = pack_key(st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        if st.st_size > MAX_BYTES:
            return key, None, "%s is larger than %d MiB" % (os.path.basename(path), MAX_BYTES >> 20)
        data = os.read(fd, st.st_size + 1)
        if len(data) > st.st_size:  # it grew since the fstat: read it to its end, within the cap
            chunks = [data]
            while chunks[-1] and sum(map(len, chunks)) <= MAX_BYTES:
                chunks.append(os.read(fd, 1 << 20))
            data = b"".join(chunks)
            if len(data) > MAX_BYTES:
                return key, None, "%s is larger than %d MiB" % (os.path.basename(path), MAX_BYTES >> 20)
        return key, data, None
    except OSError as exc:
        return key, None, "%s unreadable: %s" % (os.path.basename(path), exc.strerror or exc)
    finally:
        os.close(fd)


def stat_local(path: str) -> Key:
    try:
        st = os.stat(path)
    except PermissionError:
        return DENIED
    except OSError:
        return BROKEN if os.path.lexists(path) else None
    return (pack_key(st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino) if stat.S_ISREG(st.st_mode)
            else A_DIR if stat.S_ISDIR(st.st_mode) else ODD)


def overlapped(fn: Any, paths: Sequence[str]) -> Tuple[List[Any], Optional[bool]]:
    """fn of each path, in order, and whether the disk was found slow (None: too few paths to
    tell). When the first answers come from the disk rather than the page cache (GPFS and NFS
    always, a local disk after a reboot), the rest are asked READERS at a time so that their
    waits overlap; from the page cache, one at a time is faster."""
    head = min(len(paths), PROBE)
    t = time.monotonic()
    out = [fn(p) for p in paths[:head]]
    if len(paths) == head:
        return out, None
    if time.monotonic() - t < head * SLOW_S:
        return out + [fn(p) for p in paths[head:]], False
    pool = ThreadPoolExecutor(READERS)
    parts = [pool.submit(lambda part: [fn(p) for p in part], paths[i:i + PROBE])
             for i in range(head, len(paths), PROBE)]
    try:
        for part in parts:
            out.extend(part.result(timeout=STUCK_S))
    except FuturesTimeout:
        for part in parts:
            part.cancel()
        raise OSError(errno.ETIMEDOUT, "the disk did not answer for %d s" % STUCK_S) from None
    finally:
        pool.shutdown(wait=False)
    return out, True


class LocalWalkFS(object):
    """The walk's view of this machine's disk."""

    _listed = {}  # type: Dict[str, Tuple[Tuple[int, int, int], List[Entry]]]  # (one per process: finding a job lists it too)
    cold = False  # the last batch that could tell found the disk slow: prefetch() hints it

    def list(self, paths: Sequence[str]) -> List[Listing]:
        """Each dir's sorted entries. A dir whose mtime, ctime and inode are those of a listing
        taken when they were settled (RACY_S) has the same entries: that listing is the answer."""
        out = []  # type: List[Listing]
        for path in paths:
            try:
                st = os.stat(path)
                dkey = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                kept = self._listed.get(path)
                if kept is not None and kept[0] == dkey:
                    out.append(kept[1])
                    continue
                with os.scandir(path) as it:
                    entries = sorted((e.name, _kind(e)) for e in it)
                out.append(entries)
                if max(dkey[0], dkey[1]) / 1e9 < self.now() - RACY_S:
                    self._listed[path] = (dkey, entries)
            except OSError as exc:
                out.append(exc.strerror or str(exc))
        return out

    def _overlapped(self, fn: Any, paths: Sequence[str]) -> List[Any]:
        out, slow = overlapped(fn, paths)
        self.cold = self.cold if slow is None else slow
        return out

    def stat(self, paths: Sequence[str]) -> List[Key]:
        return self._overlapped(stat_local, paths)

    def read(self, paths: Sequence[str]) -> List[Read]:
        return [(data, why) for _, data, why in self.read_files(paths)]

    def read_files(self, paths: Sequence[str]) -> List[Tuple[Key, Optional[bytes], Optional[str]]]:
        """(key, bytes, problem) of each file from one open of it (walk.read_files)."""
        return self._overlapped(read_local, paths)

    def prefetch(self, paths: Sequence[str]) -> None:
        """On a cold disk, have the kernel start reading these files now, without waiting for
        them: read while the files before them are parsed, they come from the page cache."""
        if not hasattr(os, "posix_fadvise"):
            return
        for path in paths:
            try:
                fd = os.open(path, _OPEN)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            except OSError:
                pass
            finally:
                os.close(fd)

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def now(self) -> float:
        return time.time()


# -- the walk ----------------------------------------------------------------------------------

def _join(*parts: str) -> str:
    return "/".join(p.rstrip("/") for p in parts if p)


def _top_keys(data: Optional[bytes]) -> Set[str]:
    if not data:
        return set()
    try:
        doc = json.loads(data.decode("utf-8"))
    except ValueError:
        return set()
    return set(doc) if isinstance(doc, dict) else set()


def read_files(fs: Any, paths: Sequence[str]) -> List[Tuple[Key, Optional[bytes], Optional[str]]]:
    """(key, bytes, problem) of each file: where the FS can key a file as it reads it (LocalWalkFS),
    in one go; otherwise a stat, then a read of what is a regular file."""
    if hasattr(fs, "read_files"):
        return fs.read_files(paths)
    keys = fs.stat(paths)
    regular = [i for i, k in enumerate(keys) if k is not None and k >= 0]
    reads = dict(zip(regular, fs.read([paths[i] for i in regular])))
    return [(k, *reads.get(i, (None, None if k is None else key_problem(os.path.basename(paths[i]), k))))
            for i, k in enumerate(keys)]


def _says_job(fs: Any, path: str, entries: List[Entry]) -> Optional[bool]:
    # what the top-level keys of its result.json and config.json say: a job dir, a trial dir, or
    # nothing (None)
    names = [n for n, kind in named(entries, ("config.json", "result.json")) if kind in ("file", "link")]
    keys = set()  # type: Set[str]
    for _, data, _ in read_files(fs, [_join(path, n) for n in names]):
        keys |= _top_keys(data)
    return bool(keys & JOB_KEYS and not keys & TRIAL_KEYS) if keys else None


def is_job_dir(fs: Any, path: str, entries: List[Entry]) -> bool:
    said = _says_job(fs, path, entries)
    if said is not None:
        return said
    # no job files: a job dir if its children are trial dirs (not job dirs of a jobs folder)
    for name, kind in entries:
        child = fs.list([_join(path, name)])[0] if kind == "dir" else None
        if isinstance(child, list) and any(n in ("result.json", "config.json") for n, _ in child):
            return _says_job(fs, _join(path, name), child) is not True
    return False


def _root_error(why: str) -> str:
    plain = {os.strerror(errno.ENOENT): "no such directory", os.strerror(errno.ENOTDIR): "not a directory"}
    return plain.get(why, "cannot read: %s" % why)


def find_jobs(fs: Any, root: str) -> Tuple[List[str], List[Tuple[str, str]]]:
    """The job dirs under `root` (itself, or its children) and the children that could not be
    read (path, why). Raises WalkError when `root` itself cannot be read."""
    top = fs.list([root])[0]
    if isinstance(top, str):
        raise WalkError(root, _root_error(top))
    if is_job_dir(fs, root, top):
        return [root], []
    dirs = [n for n, kind in top if kind == "dir" and not n.startswith(".")]
    jobs = []  # type: List[str]
    unreadable = []  # type: List[Tuple[str, str]]
    for name, listing in zip(dirs, fs.list([_join(root, n) for n in dirs])):
        path = _join(root, name)
        if isinstance(listing, str):
            unreadable.append((path, listing))
        elif is_job_dir(fs, path, listing):
            jobs.append(path)
    return jobs, unreadable


def trial_keys(fs: Any, dirs: List[str], read: bool = False) -> List[Tuple[Key, Key, Optional[Read]]]:
    """(result.json key, config.json key, what was read of result.json) of each dir; config.json
    only where result.json is absent. With `read`, each result.json is read rather than stat'ed
    (a first read, that would read them all next)."""
    paths = [d + "/result.json" for d in dirs]
    got = ([(k, (data, why) if k is not None and k >= 0 else None) for k, data, why in read_files(fs, paths)]
           if read else [(k, None) for k in fs.stat(paths)])  # type: List[Tuple[Key, Optional[Read]]]
    missing = [i for i, (k, _) in enumerate(got) if k is None]
    ckeys = [None] * len(dirs)  # type: List[Key]
    for i, k in zip(missing, fs.stat([dirs[i] + "/config.json" for i in missing])):
        ckeys[i] = k
    return [(rkey, ckey, data) for (rkey, data), ckey in zip(got, ckeys)]


def loc_of(rel: str, name: str, rkey: Key, ckey: Key, got: Optional[Read] = None) -> Optional[Loc]:
    if rkey == DENIED:
        return Loc(rel, name, DENIED, None, "trial dir unreadable: %s" % os.strerror(errno.EACCES))
    if rkey is None and (ckey is None or ckey == DENIED):
        return None
    loc = Loc(rel, name, rkey, ckey)
    loc.got = got
    return loc


def locate(fs: Any, job: str, entries: List[Entry], problems: List[str],
           read: bool = False) -> Tuple[List[Loc], Dict[str, Set[str]]]:
    """The trial dirs the given entries of the job dir hold, in name order, and the non-trial
    folders among them with the staged trial dirs found in each; with `read`, their result.json
    files read as they are found (trial_keys)."""
    real_job = None  # type: Optional[str]
    candidates = []  # type: List[str]
    for name, kind in entries:
        if name == QUARANTINE_DIR:
            continue
        if kind == "link" and not name.startswith("."):
            if real_job is None:
                real_job = fs.realpath(job).rstrip("/")
            target = fs.realpath(_join(job, name))
            if not (target + "/").startswith(real_job + "/"):
                problems.append("%s: symlink to %s, outside the job dir; not followed" % (name, target))
            else:
                problems.append("%s: symlink inside the job dir; not followed (counted once)" % name)
        elif kind == "dir":
            candidates.append(name)
    locs = []  # type: List[Loc]
    folders = []  # type: List[str]
    base = job.rstrip("/") + "/"
    for name, (rkey, ckey, got) in zip(candidates, trial_keys(fs, [base + n for n in candidates], read)):
        loc = loc_of(name, name, rkey, ckey, got)
        if loc is not None and not (name.startswith(".") and loc.error):
            locs.append(loc)
        elif loc is None and not name.startswith("."):
            folders.append(name)
    found = {}  # type: Dict[str, Set[str]]
    staged = []  # type: List[Tuple[str, str]]
    for folder, listing in zip(folders, fs.list([_join(job, f) for f in folders])):
        found[folder] = set()
        for sub, kind in listing if isinstance(listing, list) else ():
            if kind == "link":
                problems.append("%s/%s: symlink; not followed" % (folder, sub))
            elif kind == "dir":
                staged.append((folder, sub))
    for (folder, sub), (rkey, ckey, got) in zip(staged, trial_keys(fs, [_join(job, f, s) for f, s in staged], read)):
        loc = loc_of(folder + "/" + sub, sub, rkey, ckey, got)
        if loc is not None:
            locs.append(loc)
            found[folder].add(loc.rel)
    if staged:  # (the others came in name order, from the sorted listing)
        locs.sort(key=lambda loc: loc.rel.split("/"))
    return locs, found


_NAMES_TASK = re.compile(rb'"task_name"\s*:\s*"')


def needs_config(result: Optional[bytes]) -> bool:
    """Whether a trial's record needs its config.json: unless its result.json is whole and names
    its task (older Harbor did not; a half-written one cannot be read), the task, trial name and
    model come from config.json too."""
    return result is None or not result[-64:].rstrip().endswith(b"}") or _NAMES_TASK.search(result) is None


def read_trials(fs: Any, job: str, locs: Sequence[Loc]) -> List[Tuple[Read, Read]]:
    """Each trial's (result.json, config.json) as its record is built from them (what locate
    read of a result.json is taken from its Loc): config.json only where it is needed, its key
    then put in the Loc (the record's key covers it)."""
    none = (None, None)  # type: Read
    base = job.rstrip("/") + "/"
    results = {i: (None, key_problem("result.json", loc.rkey)) for i, loc in enumerate(locs)
               if loc.rkey is not None and loc.rkey < 0 and loc.error is None}  # type: Dict[int, Read]
    finished = []  # type: List[int]
    for i, loc in enumerate(locs):
        if loc.rkey is not None and loc.rkey >= 0 and loc.error is None:
            if loc.got is None:
                finished.append(i)
            else:
                results[i], loc.got = loc.got, None
    results.update(zip(finished, fs.read([base + locs[i].rel + "/result.json" for i in finished])))
    want = [i for i, loc in enumerate(locs) if loc.error is None and needs_config(results.get(i, none)[0])]
    unkeyed = [i for i in want if locs[i].ckey is None and locs[i].rkey is not None]
    for i, k in zip(unkeyed, fs.stat([base + locs[i].rel + "/config.json" for i in unkeyed])):
        locs[i].ckey = k
    readable = [i for i in want if (locs[i].ckey or -1) >= 0]
    configs = dict(zip(readable, fs.read([base + locs[i].rel + "/config.json" for i in readable])))
    return [(results.get(i, none), configs.get(i, none)) for i in range(len(locs))]


def prefetch_trials(fs: Any, job: str, locs: Sequence[Loc]) -> None:
    """Tell a walk FS that can take the hint (LocalWalkFS) which trial files read_trials will read
    next: each result.json, or config.json where there is none yet. Only a disk found slow takes
    the hint: from the page cache, the reads are answered before the hint would be."""
    prefetch = getattr(fs, "prefetch", None)
    if prefetch is None or not locs or not getattr(fs, "cold", False):
        return
    paths = []  # type: List[str]
    for loc in locs:
        key = loc.rkey if loc.rkey is not None else loc.ckey
        if loc.error is None and key is not None and key >= 0:
            paths.append(_join(job, loc.rel, "result.json" if loc.rkey is not None else "config.json"))
    prefetch(paths)


def named(entries: List[Entry], names: Any) -> List[Entry]:
    """The entries of a sorted listing that have the given names, in name order."""
    out = []  # type: List[Entry]
    for name in sorted(names):
        i = bisect.bisect_left(entries, (name,))
        if i < len(entries) and entries[i][0] == name:
            out.append(entries[i])
    return out


def job_file_names(fs: Any, job: str, entries: List[Entry]) -> List[str]:
    """The job's own files that are there (JOB_FILES, and an eval config under configs/)."""
    kinds = dict(named(entries, (*JOB_FILES, "configs")))
    names = [n for n in JOB_FILES if n in kinds]
    if "eval_config.json" not in names and kinds.get("configs") == "dir":
        listing = fs.list([_join(job, "configs")])[0]
        evals = [n for n, _ in listing if n.endswith("_eval_config.json")] if isinstance(listing, list) else []
        names += ["configs/" + n for n in evals[:1]]
    return names


def job_files(fs: Any, job: str, names: List[str]) -> Dict[str, Tuple[Key, Optional[bytes], Optional[str]]]:
    """The job's own files by name ("configs" for the eval config under configs/): key, bytes, problem."""
    return {("configs" if n.startswith("configs/") else n): got
            for n, got in zip(names, read_files(fs, [_join(job, n) for n in names]))}


# -- the remote program: `serve()` on the host, one request in, one zlib stream of JSON lines out --

def fingerprint(rel: str, rkey: Key, ckey: Key) -> bytes:
    text = "%s\0%s\0%s" % (rel, rkey, ckey)
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).digest()


def bucket_of(rel: str, nb: int) -> int:
    h = hashlib.blake2b(rel.encode("utf-8", "surrogateescape"), digest_size=4).digest()
    return int.from_bytes(h, "big") % nb


def bucket_digest(fps: List[bytes]) -> bytes:
    return hashlib.blake2b(b"".join(sorted(fps)), digest_size=4).digest()


def n_buckets(n: int) -> int:
    # a power of two with up to eight trials a bucket: a changed trial re-sends its few
    # neighbours, an unchanged job costs about half a byte a trial upstream
    return min(65536, 1 << max(0, (n + 7) // 8 - 1).bit_length())


def blob(data: Optional[bytes]) -> Optional[str]:
    # bytes that are not UTF-8 travel as \udcXX escapes, and come back as the same bytes
    return None if data is None else data.decode("utf-8", "surrogateescape")


def unblob(raw: Any) -> Optional[bytes]:
    return None if raw is None else str(raw).encode("utf-8", "surrogateescape")


def _text(key: Key) -> Optional[str]:
    # keys travel as decimal text: they are wider than the 64 bits a JSON reader may take
    return None if key is None else str(key)


def _serve_job(fs: LocalWalkFS, job: str, have: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
    problems = []  # type: List[str]
    entries = fs.list([job])[0]
    if isinstance(entries, str):
        problems.append("cannot list %s: %s" % (job, entries))
        entries = []
    locs, _ = locate(fs, job, entries, problems)
    problems += ["%s: %s; counted as errored" % (loc.rel, loc.error) for loc in locs if loc.error]
    # the remote keys a finished trial by both files: one more stat each, here, not a round trip
    finished = [loc for loc in locs if loc.rkey is not None and loc.rkey >= 0]
    for loc, k in zip(finished, fs.stat([_join(job, loc.rel, "config.json") for loc in finished])):
        loc.ckey = k
    nb = int(have.get("nb") or 0)
    dig = base64.b64decode(have.get("dig") or "")
    stale = None  # type: Optional[Set[int]]
    if nb:
        groups = [[] for _ in range(nb)]  # type: List[List[bytes]]
        for loc in locs:
            groups[bucket_of(loc.rel, nb)].append(fingerprint(loc.rel, loc.rkey, loc.ckey))
        stale = {b for b in range(nb) if bucket_digest(groups[b]) != dig[4 * b: 4 * b + 4]}
    known = have.get("files") or {}
    files = {}
    for name, (key, data, err) in job_files(fs, job, job_file_names(fs, job, entries)).items():
        files[name] = {"k": _text(key), "same": 1} if key is not None and known.get(name) == _text(key) else \
            {"k": _text(key), "d": blob(data), "e": err}
    yield {"t": "job", "path": job, "n": len(locs), "nb": nb, "stale": sorted(stale) if stale is not None else None,
           "problems": problems, "files": files}
    send = [loc for loc in locs if stale is None or bucket_of(loc.rel, nb) in stale]
    for i in range(0, len(send), 512):
        part = send[i: i + 512]
        for loc, ((rdata, rerr), (cdata, _)) in zip(part, read_trials(fs, job, part)):
            yield {"t": "tr", "rel": loc.rel, "name": loc.name, "rk": _text(loc.rkey), "ck": _text(loc.ckey),
                   "r": blob(rdata), "c": blob(cdata), "re": loc.error or rerr}


def serve(stdin: Any = None, stdout: Any = None) -> None:
    """The remote program's main: the request (roots, and what the client already holds of each
    job: per-bucket digests of its trials' keys, its job files' keys) on stdin; every job under
    the roots, and the files of the trials whose bucket differs, on stdout."""
    req = json.loads((stdin or sys.stdin.buffer).read().decode("utf-8", "surrogateescape"))
    out = stdout or sys.stdout.buffer
    z = zlib.compressobj(6)

    def emit(obj: Dict[str, Any]) -> None:
        out.write(z.compress(json.dumps(obj, separators=(",", ":")).encode("ascii") + b"\n"))

    fs = LocalWalkFS()
    started = fs.now()
    emit({"t": "hello", "v": PROTOCOL, "py": sys.version.split()[0], "now": started})
    have_jobs = req.get("jobs") or {}
    for root in req["roots"]:
        full = os.path.abspath(os.path.expanduser(root))
        try:
            jobs, unreadable = find_jobs(fs, full)
        except WalkError as exc:
            emit({"t": "root", "root": root, "abs": full, "err": exc.message})
            continue
        emit({"t": "root", "root": root, "abs": full, "jobs": jobs, "unreadable": unreadable})
        for job in jobs:
            try:
                for obj in _serve_job(fs, job, have_jobs.get(job) or {}):
                    emit(obj)
            except OSError as exc:  # (a disk that stopped answering): this job only
                emit({"t": "jerr", "path": job, "err": str(exc)})
    emit({"t": "done", "seconds": fs.now() - started})
    out.write(z.flush())
    out.flush()


if __name__ == "__main__":
    serve()
