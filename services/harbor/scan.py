"""Reading Harbor job dirs on local disk: discovery of job and trial dirs, and the scanner.

The first scan of a job in a process stats every trial's result.json (config.json while it
runs) and parses only what the persistent parse cache (services/harbor/cache.py) does not hold
under the same key. Later scans of the same job cost what changed, not the size of the job:
the job dir is listed once (new and removed trial dirs), running trials are stat'ed on every
scan, and finished ones are re-verified on a rotation so that each is checked against its
files at least once per `verify_window_s` (a forced scan checks them all).
"""

from __future__ import annotations

import gc
import math
import os
import stat
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import IO, cast

import orjson

from services.core.census import Census
from services.core.memory import give_back_memory
from services.core.models import Experiment, Trial
from services.core.policy import Policy
from services.core.source import ProgressFn, SourceUnavailable, no_progress
from services.core.stamps import file_key, key_mtime
from services.harbor.assemble import TrialIndex, assemble_experiment, collapse_copies, number_attempts
from services.harbor.cache import ParseCache, census_bytes, census_from
from services.harbor.early_read import EarlyReads
from services.harbor.fast_record import read_file as _read
from services.harbor.files import parse_trial
from services.harbor.records import compact, decode, encode, fast_trial
from services.harbor.walk import (
    JOB_FILES,
    FileKey,
    ListedEntry,
    TrialLoc,
    classify,
    cores,
    is_trial_dir,
    key_bytes,
    keys_digest,
    list_job,
    persistable,
    running_key,
    take_early_reads,
    trial_key,
    unreadable_note,
)

DEFAULT_VERIFY_WINDOW_S = 60.0

def _json_keys(path: str) -> set[str]:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return set()
        with open(path, "rb") as fh:
            data = orjson.loads(fh.read(4 * 1024 * 1024))
        return set(data) if isinstance(data, dict) else set()
    except (OSError, orjson.JSONDecodeError):
        return set()


JOB_KEYS = frozenset({"n_total_trials", "stats", "n_attempts", "agents", "datasets", "jobs_dir", "job_name"})
TRIAL_KEYS = frozenset({"trial_name", "task_name", "task", "trial_uri"})


def job_files_say(keys: set[str]) -> bool | None:
    """What the top-level keys of a dir's result.json/config.json say: a job dir (True), a trial
    dir (False), or nothing (None: decide by the children). Shared by every reader of job dirs."""
    if keys & JOB_KEYS and not keys & TRIAL_KEYS:
        return True
    return False if keys else None


def looks_like_job_dir(path: str) -> bool:
    keys = _json_keys(os.path.join(path, "result.json")) | _json_keys(os.path.join(path, "config.json"))
    said = job_files_say(keys)
    if said is not None:
        return said
    # No job files: a job dir if its children are trial dirs (not job dirs of a jobs folder).
    try:
        with os.scandir(path) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False) and is_trial_dir(entry.path):
                    child = _json_keys(os.path.join(entry.path, "config.json")) | _json_keys(
                        os.path.join(entry.path, "result.json")
                    )
                    return job_files_say(child) is not True
    except OSError:
        return False
    return False


def unreadable_reason(path: str) -> str | None:
    """Why a dir cannot be listed, or None when it can."""
    try:
        with os.scandir(path) as it:
            next(it, None)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def find_job_dirs_and_unreadable(root: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The job dirs under `root`, and the child dirs that could not be read (path, reason).
    Raises SourceUnavailable when `root` itself is missing or cannot be listed."""
    if not os.path.isdir(root):
        raise SourceUnavailable(root, "no such directory" if not os.path.exists(root) else "not a directory")
    why = unreadable_reason(root)
    if why is not None:
        raise SourceUnavailable(root, f"cannot read: {why}")
    if looks_like_job_dir(root):
        return [root], []
    jobs: list[str] = []
    unreadable: list[tuple[str, str]] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        raise SourceUnavailable(root, f"cannot read: {exc.strerror or exc}") from None
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        if looks_like_job_dir(entry.path):
            jobs.append(entry.path)
            continue
        why = unreadable_reason(entry.path)
        if why is not None:
            unreadable.append((entry.path, why))
    return jobs, unreadable


def find_job_dirs(root: str) -> list[str]:
    return find_job_dirs_and_unreadable(root)[0]


class _CensusOnly:
    """What assemble_experiment reads of an index: its census."""

    def __init__(self, census: Census) -> None:
        self.census = census


def _load_trial(loc: TrialLoc, ckey: FileKey) -> Trial:
    if loc.error is not None:
        return compact(parse_trial(loc.rel, loc.name, None, None, None, loc.error))
    rkey = loc.rkey
    rbytes, rerr = _read(loc.abs + "/result.json", rkey) if rkey is not None else (None, None)
    cbytes = None
    # A finished trial names itself and its task in result.json; its config is read only when needed.
    if rbytes is None or b'"task_name"' not in rbytes:
        cbytes, _ = _read(loc.abs + "/config.json", ckey) if ckey is not None else (None, None)
    mtime = max((key_mtime(k) for k in (rkey, ckey) if k is not None and k >= 0), default=0) or None
    return fast_trial(loc.rel, loc.name, rbytes, cbytes, mtime, rerr)


def _ckey(loc: TrialLoc, ckey: FileKey) -> FileKey:
    # a finished trial's config.json is stat'ed only when the trial is read (its mtime counts)
    if loc.rkey is not None and loc.rkey >= 0 and ckey is None:
        return file_key(loc.abs + "/config.json")
    return ckey


PARALLEL_MIN = 4000  # below this a second process costs more than it saves
SETTLE_MIN = 50_000  # a first read this big makes its Trials once the parsing is done (memory)


def _my_share(total: int) -> int:
    # 45%: measured on 2 cores (benchmarks/targets.py), 40% left the scanner waiting for the
    # forked reader and 55% the other way round
    return total * 9 // 20


class _ForkedReader:
    """Half of a big cold read done by a forked child on another core: it reads and parses its
    share and writes each Trial's cache record to a temp file the parent decodes (~5x cheaper
    than parsing). Anything that goes wrong in the child only means the parent reads that
    share itself."""

    def __init__(self, pid: int, out: IO[bytes], n: int) -> None:
        self.pid, self.out, self.n = pid, out, n

    @classmethod
    def start(cls, share: list[tuple[TrialLoc, FileKey, int]]) -> _ForkedReader | None:
        if sys.platform != "linux" or cores() < 2 or not share:
            return None
        try:
            out = tempfile.TemporaryFile()  # noqa: SIM115 (read back and closed by collect())
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            out.close()
            return None
        if pid == 0:  # the child: parse, write, and leave without running anything of the parent's
            code = 1
            try:
                w = out.write
                for loc, ckey, _ in share:
                    try:
                        rec = encode(_load_trial(loc, _ckey(loc, ckey)))
                    except Exception:
                        w(b"\xff\xff\xff\xff")
                        continue
                    w(len(rec).to_bytes(4, "little"))
                    w(rec)
                out.flush()
                code = 0
            finally:
                os._exit(code)
        return cls(pid, out, len(share))

    def collect_data(self) -> bytes:
        """Everything the forked reader wrote (length-prefixed records), or b"" when it failed."""
        try:
            _, status = os.waitpid(self.pid, 0)
            if status != 0:
                return b""
            self.out.seek(0)
            return self.out.read()
        except OSError:
            return b""
        finally:
            self.out.close()

    def collect(self) -> Iterator[bytes | None]:
        """One cache record (or None: read that one here) per file of the share, in order,
        each made as it is asked for (a list of them all would outlive the read as debris)."""
        try:
            _, status = os.waitpid(self.pid, 0)
            if status != 0:
                data = b""
            else:
                self.out.seek(0)
                data = self.out.read()
        except OSError:
            data = b""
        finally:
            self.out.close()
        return _records(data, self.n)


def _records(data: bytes, n: int) -> Iterator[bytes | None]:
    pos = given = 0
    while pos + 4 <= len(data) and given < n:
        size = int.from_bytes(data[pos: pos + 4], "little")
        pos += 4
        given += 1
        if size == 0xFFFFFFFF:
            yield None
            continue
        yield data[pos: pos + size] if pos + size <= len(data) else None
        pos += size
    for _ in range(n - given):
        yield None


_JOB_FILES = (*JOB_FILES, "configs")  # (a key for the folder: its listing)


class HarborScanner:
    """Incremental scanner of one job dir. Not thread-safe; one per job dir."""

    def __init__(self, job_dir: str, policy: Policy, cache: ParseCache | None = None,
                 verify_window_s: float = DEFAULT_VERIFY_WINDOW_S) -> None:
        self.job_dir = job_dir
        self.policy = policy
        self.cache = cache
        self.verify_window_s = verify_window_s
        self.index = TrialIndex(policy)  # rel → Trial, with copies, attempts and the census
        self.keys: dict[str, int] = {}  # rel → the key its Trial was read under
        self.volatile: set[str] = set()  # re-stat'ed on every scan: running, unreadable, odd results
        self._ring: list[str] = []  # finished trials in the order they are re-verified
        self._ring_at = array("d")  # when each was last verified (wall clock)
        self._cursor = 0
        self._names: list[str] = []  # the job dir's listing at the last scan, as os.listdir gave it
        self._reclassify: set[str] = set()  # names to look at again on the next scan
        self._folders: set[str] = set()  # depth-1 dirs that are not trial dirs (listed every scan)
        self._links: set[str] = set()  # depth-1 symlinks (never followed; noted every scan)
        self._folder_rels: dict[str, set[str]] = {}  # folder → the staged trial dirs found in it
        self._last: Experiment | None = None
        self._last_scan: float | None = None
        self._job_keys: tuple[FileKey, ...] = ()
        self._full_next = True
        self._pending_lazy: Experiment | None = None
        self._early: EarlyReads | None = None  # the early child's records, for the first scan
        self.files_read = 0

    def verify_all(self) -> None:
        """Check every trial against its files on the next scan (the `r` key)."""
        self._full_next = True

    def settled_digest(self) -> bytes | None:
        """The digest of every trial's key as the last scan took it (before reading), when each
        trial has finished with a regular result.json; None otherwise. The audit replay
        (tui/batch_replay.py) compares it with a fresh walk's."""
        if self._last is None or not self.keys or any(k < 0 for k in self.keys.values()):
            return None
        return keys_digest(self.keys)

    @property
    def verified_at(self) -> datetime | None:
        """Every finished trial has been checked against its files since this time."""
        if self._last_scan is None:
            return None
        # the ring is verified in order: the oldest check is where the cursor stands
        ring_at = self._ring_at
        oldest = (ring_at[self._cursor] if self._cursor < len(ring_at) else ring_at[0]) if ring_at else time.time()
        return datetime.fromtimestamp(oldest, UTC)

    def scan(self, source_label: str = "", progress: ProgressFn = no_progress) -> tuple[Experiment, dict]:
        # A scan allocates one object per trial while 100k older ones are alive; letting the
        # cyclic GC walk them all mid-scan costs more than the scan itself.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._scan(source_label, progress)
        except BaseException:
            # a scan cut short may leave the state and the index out of step: start afresh
            self._reset()
            raise
        finally:
            if self._early is not None:
                self._early.close()
                self._early = None
            if was_enabled:
                gc.enable()

    def _reset(self) -> None:
        self.index = TrialIndex(self.policy)
        self.keys, self.volatile, self._folders = {}, set(), set()
        self._links, self._folder_rels, self._names, self._reclassify = set(), {}, [], set()
        self._ring, self._ring_at, self._cursor = [], array("d"), 0
        self._last, self._last_scan, self._job_keys, self._full_next = None, None, (), True
        self._pending_lazy = None
        self._early = None

    def _due(self, now: float) -> set[str]:
        """The finished trials this scan re-verifies: a slice of the ring sized so that a
        whole turn takes `verify_window_s`."""
        n = len(self._ring)
        if not n or self._last_scan is None:
            return set()
        window = max(self.verify_window_s, 1e-9)
        budget = n if self.verify_window_s <= 0 else math.ceil(n * min(1.0, (now - self._last_scan) / window))
        due: set[str] = set()
        at = time.time()
        while budget > 0 and n:
            if self._cursor >= n:
                # a turn is over: drop what is gone, start again from the top
                keep = [(rel, t) for rel, t in zip(self._ring, self._ring_at, strict=True)
                        if rel in self.keys and rel not in self.volatile]
                self._ring = [rel for rel, _ in keep]
                self._ring_at = array("d", (t for _, t in keep))
                self._cursor, n = 0, len(self._ring)
                if not n:
                    break
            end = min(n, self._cursor + budget)
            due.update(self._ring[self._cursor:end])
            self._ring_at[self._cursor:end] = array("d", [at]) * (end - self._cursor)
            budget -= end - self._cursor
            self._cursor = end
            if len(due) >= n:
                break
        return due

    def _locate_all(self, problems: list[str]) -> tuple[list[TrialLoc], bool]:
        """Every trial dir, in discovery order (a full pass); the bool says whether the job dir
        could be listed. Also learns the listing the next scans compare with."""
        listed = list_job(self.job_dir, problems)
        self._early = take_early_reads(self.job_dir)  # (when that listing was made early)
        if listed is None:
            return [], False
        out: list[TrialLoc] = []
        self._names = [e.name for e, _ in listed]  # (sorted: the next listing differs once, in order only)
        self._folders, self._links, self._folder_rels = set(), set(), {}
        for entry, found in listed:
            self._learn(entry, found)
            out.extend(found)
        return out, True

    def _learn(self, entry: os.DirEntry[str] | ListedEntry, found: list[TrialLoc]) -> None:
        name = entry.name
        if entry.is_symlink():
            self._links.add(name)  # its note is repeated on every scan
        elif found and found[0].rel == name:
            self._folders.discard(name)
        elif entry.is_dir(follow_symlinks=False):
            # a non-trial folder: staged copies may come and go in it, so it is listed every scan
            self._folders.add(name)
            self._folder_rels[name] = {loc.rel for loc in found}

    def _locate_changes(self, now: float, problems: list[str]) -> tuple[list[TrialLoc], bool, list[str]]:
        """What a poll must look at: one listing of the job dir for new and removed trial dirs,
        running trials, non-trial folders, and the finished trials due for re-verification."""
        try:
            names = os.listdir(self.job_dir)
        except OSError as exc:
            problems.append(f"cannot list {self.job_dir}: {exc.strerror or exc}")
            return [], False, []
        keys = self.keys
        current: set[str] | None = None  # None: the same names as the last scan
        if names == self._names:
            # the same listing in the same order (the common poll): nothing came or went
            added, gone = set(), set()
        else:
            current, before = set(names), set(self._names)
            added = current - before
            gone = before - current
            self._names = names
        added |= self._reclassify
        self._reclassify = set()
        due = self._due(now)
        removed: list[str] = []
        for name in gone:
            if name in keys:
                removed.append(name)
            removed += self._folder_rels.pop(name, ())
            self._folders.discard(name)
            self._links.discard(name)
        real_job = os.path.realpath(self.job_dir)
        out: list[TrialLoc] = []
        # in name order, so the notes read as a full pass lists them
        folders = self._folders if current is None else self._folders & current
        links = self._links if current is None else self._links & current
        for name in sorted(added | folders | links):
            entry = ListedEntry(name, os.path.join(self.job_dir, name))
            found = list(classify(entry, self.job_dir, real_job, problems))
            was = self._folder_rels.get(name, set())
            self._learn(entry, found)
            now_rels = {loc.rel for loc in found}
            removed += [rel for rel in was if rel not in now_rels]
            if name in keys and name not in now_rels:
                removed.append(name)
            if name not in self._folders:
                self._folder_rels.pop(name, None)
            out.extend(found)
        for rel in self.volatile | due:
            if "/" in rel or rel in added or rel not in keys or (current is not None and rel not in current):
                continue  # staged copies come with their folder's listing; new ones are above
            path = os.path.join(self.job_dir, rel)
            is_trial, rkey, error = trial_key(path)
            if is_trial:
                out.append(TrialLoc(rel, self.job_dir, rel, rkey, error))
            else:
                removed.append(rel)
                self._reclassify.add(rel)  # classified afresh next scan (a folder now?)
        return out, True, removed

    def _scan(self, source_label: str, progress: ProgressFn) -> tuple[Experiment, dict]:
        t0 = time.perf_counter()
        now = time.monotonic()
        problems: list[str] = []
        if self._pending_lazy is not None:
            # the last scan handed over trials read on first use: the index needs them now
            self.index.rebuild(self._pending_lazy.trials)
            self._pending_lazy = None
        full = self._full_next or self._last is None
        self._full_next = False  # a verify_all() during this scan asks for the next one
        if full:
            locs, listed = self._locate_all(problems)
            gone: list[str] = []
        else:
            locs, listed, gone = self._locate_changes(now, problems)
        keys = self.keys
        by_path = self.index.by_path
        checked: list[tuple[TrialLoc, FileKey, int]] = []
        notes: list[tuple[tuple[str, ...], str]] = []
        for loc in locs:
            ckey: FileKey = None
            if loc.rkey is None:
                ckey = file_key(loc.abs + "/config.json")
                key = running_key(ckey)
            else:
                key = loc.rkey
            if loc.error is not None:
                notes.append((tuple(loc.rel.split("/")), unreadable_note(loc.rel, loc.error)))
            checked.append((loc, ckey, key))
        problems += [note for _, note in sorted(notes)]
        if full:
            new_keys = {loc.rel: key for loc, _, key in checked}
            if not listed and keys:
                new_keys = dict(keys)  # the job dir cannot be listed right now: keep what was known
            gone = [rel for rel in keys if rel not in new_keys]
        persisted: dict[str, Trial] = {}
        digest: bytes | None = None
        if self._last is None and self.cache is not None and listed:
            stored = self.cache.summary(self.job_dir)
            if stored is not None:  # (a first read ever has none: no digest to compute)
                digest = keys_digest(new_keys)
                lazy = self._lazy_experiment(stored, digest, new_keys, problems, source_label, now, t0)
                if lazy is not None:
                    return lazy
            persisted = self._from_cache(new_keys)  # (the first scan: every trial is in `checked`)
        changed: list[Trial] = []
        replaced: list[Trial] = []
        to_parse: list[tuple[TrialLoc, FileKey, int]] = []
        stats_hits = 0
        for item in checked:
            loc, ckey, key = item
            rel = loc.rel
            if keys.get(rel) == key and rel in by_path:
                continue
            trial = persisted.get(rel)
            if trial is not None:
                stats_hits += 1
                old = by_path.get(rel)
                if old is not None:
                    replaced.append(old)
                changed.append(trial)
                continue
            to_parse.append(item)
        total = len(to_parse)
        unsaved = 0
        n_checked = len(checked)
        settled = False
        if self._last is None and total >= SETTLE_MIN:
            # A first read of a big job: every trial is parsed to its record first, the locations
            # let go, and only then are the lasting Trials made from the records. Made while the
            # locations were alive, they left ~30 MB of half-empty memory pools behind at 100k.
            del locs, checked
            unsaved = self._read_settled(to_parse, changed, progress)
            to_parse = []
            settled = True
        if to_parse:
            progress(0, total, f"reading {total} trial files in {os.path.basename(self.job_dir)}")
            if self._early is not None:  # the child that listed the job early reads it too
                unsaved += self._read_early(self._early, to_parse, changed, replaced, progress)
            else:
                unsaved += self._read_forked(to_parse, changed, replaced, progress)
        self.files_read += total
        gone_trials = [by_path[rel] for rel in gone if rel in by_path]
        # the volatile set and the ring of finished trials follow what was just seen
        at = time.time()
        old_volatile = self.volatile
        if full:
            self.keys = new_keys
            self.volatile = {rel for rel, key in new_keys.items() if key < 0}
            self._ring = [rel for rel in new_keys if rel not in self.volatile]
            self._ring_at = array("d", [at]) * len(self._ring)
            self._cursor = 0
        else:
            for rel in gone:
                keys.pop(rel, None)
                old_volatile.discard(rel)
            for loc, _, key in checked:
                rel = loc.rel
                fresh = rel not in keys
                keys[rel] = key
                if key < 0:
                    old_volatile.add(rel)
                elif fresh or rel in old_volatile:
                    old_volatile.discard(rel)
                    self._ring.append(rel)  # finished since the last scan: joins the rotation
                    self._ring_at.append(at)
        if self._last is None:
            for t in changed:
                by_path[t.path] = t
            self.index.rebuild([by_path[rel] for rel in self.keys])
        else:
            self.index.apply(gone_trials + replaced, changed)
        self._last_scan = now
        if self.cache is not None and gone:
            self.cache.store(self.job_dir, [], gone)
        if self.cache is not None and full and listed:
            whole = unsaved == 0 and all(persistable(k) for k in self.keys.values())
            self.cache.store_summary(self.job_dir, (digest or keys_digest(self.keys)) if whole else None,
                                     census_bytes(self.index.census) if whole else None)
        job_keys = tuple(file_key(os.path.join(self.job_dir, n)) for n in _JOB_FILES)
        stats = {"trial_dirs": len(self.keys), "files_read": total, "cache_hits": stats_hits,
                 "verified": n_checked, "seconds": 0.0}
        if not changed and not gone and job_keys == self._job_keys and self._last is not None:
            # nothing on disk changed: the last Experiment is still exact
            self._last.__dict__["verified_at"] = self.verified_at
            stats["seconds"] = time.perf_counter() - t0
            return self._last, stats
        self._job_keys = job_keys
        # the index keeps copy marks, attempt numbers and the census of these very objects
        trials = [by_path[rel] for rel in self.keys] if full else list(by_path.values())
        exp = self._assemble(trials, self.index, problems, source_label)
        if settled:
            del trials
            give_back_memory()
        if self._last is not None:
            self._last._delta = None  # one step of history, never a chain of old Experiments
            exp._delta = (self._last, gone_trials + replaced, changed, self.index.touched)
        self._last = exp
        stats["seconds"] = time.perf_counter() - t0
        return exp, stats

    def _read_settled(self, to_parse: list[tuple[TrialLoc, FileKey, int]], changed: list[Trial],
                      progress: ProgressFn) -> int:
        """Read `to_parse` (emptied on the way), then append its Trials to `changed`; the number
        that could not be cached. Records travel in two flat buffers, not one object each."""
        total = len(to_parse)
        split = _my_share(total)
        reader = _ForkedReader.start(to_parse[split:]) if total >= PARALLEL_MIN else None
        mine = split if reader is not None else total
        buf = bytearray()
        spans = array("q")  # start, end of each record in buf (or in the forked reader's data); -1: none
        direct: dict[int, Trial] = {}
        for j in range(mine):
            loc, ckey, _ = to_parse[j]
            trial = _load_trial(loc, _ckey(loc, ckey))
            try:
                rec = encode(trial)
            except TypeError:
                direct[j] = trial  # a name that is not UTF-8: kept as it is
                spans.extend((-1, -1))
                continue
            spans.extend((len(buf), len(buf) + len(rec)))
            buf += rec
            if j % 2000 == 0:
                progress(j, total, "reading trials")
        theirs = b""
        if reader is not None:
            theirs = reader.collect_data()
            pos = 0
            for j in range(mine, total):  # the forked reader's records, in order; a gap is read here
                size = int.from_bytes(theirs[pos: pos + 4], "little") if pos + 4 <= len(theirs) else -1
                if size < 0 or size == 0xFFFFFFFF or pos + 4 + size > len(theirs):
                    loc, ckey, _ = to_parse[j]
                    direct[j] = _load_trial(loc, _ckey(loc, ckey))
                    spans.extend((-1, -1))
                    pos = pos + 4 if size == 0xFFFFFFFF else len(theirs)
                    continue
                spans.extend((pos + 4, pos + 4 + size))
                pos += 4 + size
        # what the Trials need of each location, then the locations go
        rels = [loc.rel for loc, _, _ in to_parse]
        keys = [key for _, _, key in to_parse]
        cacheable = bytes(1 if loc.error is None and persistable(key) else 0 for loc, _, key in to_parse)
        to_parse.clear()
        unsaved = 0
        put: list[tuple[str, bytes, bytes]] = []
        for j in range(total):
            made = direct.get(j)
            record: bytes | None = None
            if made is None:
                start, end = spans[2 * j], spans[2 * j + 1]
                record = bytes(buf[start:end]) if j < mine else theirs[start:end]
                try:
                    made = decode(rels[j], record)
                except (ValueError, KeyError, TypeError, IndexError):  # never expected: read it again
                    path = os.path.join(self.job_dir, rels[j])
                    _, rkey, error = trial_key(path)
                    loc = TrialLoc(rels[j], self.job_dir, os.path.basename(rels[j]), rkey, error)
                    made, record = _load_trial(loc, file_key(path + "/config.json")), None
            changed.append(made)
            if self.cache is not None and cacheable[j]:
                if record is None:
                    unsaved += 1
                else:
                    put.append((rels[j], key_bytes(keys[j]), record))
                    if len(put) >= 2000:
                        self.cache.store(self.job_dir, put, [])
                        put = []
        if put and self.cache is not None:
            self.cache.store(self.job_dir, put, [])
        progress(total, total, "reading trials")
        return unsaved

    def _read_forked(self, to_parse: list[tuple[TrialLoc, FileKey, int]], changed: list[Trial],
                     replaced: list[Trial], progress: ProgressFn) -> int:
        """Read `to_parse`, sharing it with a forked reader when it is big; the number that could
        not be cached."""
        put: list[tuple[str, bytes, bytes]] = []
        unsaved = 0
        # a big cold read splits the files with a forked reader on a second core; the forked reader
        # takes the larger share, as the scanner also decodes its records and writes the cache
        total = len(to_parse)
        split = _my_share(total)
        reader = _ForkedReader.start(to_parse[split:]) if total >= PARALLEL_MIN else None
        mine = to_parse[: split] if reader is not None else to_parse
        chunk = 2000
        done = 0
        for i in range(0, len(mine), chunk):
            for loc, ckey, key in mine[i: i + chunk]:
                unsaved += self._take(loc, ckey, key, _load_trial(loc, _ckey(loc, ckey)), changed, replaced, put)
            done += len(mine[i: i + chunk])
            if put and self.cache is not None:
                self.cache.store(self.job_dir, put, [])  # chunk by chunk: memory stays flat
                put = []
            progress(done, total, "reading trials")
        if reader is not None:
            for (loc, ckey, key), rec in zip(to_parse[split:], reader.collect(), strict=True):
                got: Trial | None = None
                if rec is not None:
                    try:
                        got = decode(loc.rel, rec)
                    except (ValueError, KeyError, TypeError, IndexError):
                        got = None
                if got is None:  # the forked reader could not hand this one over: read it here
                    got = _load_trial(loc, _ckey(loc, ckey))
                    rec = None
                unsaved += self._take(loc, ckey, key, got, changed, replaced, put, rec)
                if len(put) >= chunk and self.cache is not None:
                    self.cache.store(self.job_dir, put, [])
                    put = []
            if put and self.cache is not None:
                self.cache.store(self.job_dir, put, [])
            progress(total, total, "reading trials")
        return unsaved

    def _read_early(self, early: EarlyReads, to_parse: list[tuple[TrialLoc, FileKey, int]], changed: list[Trial],
                    replaced: list[Trial], progress: ProgressFn) -> int:
        """Read `to_parse` together with the early child (services/harbor/early_read.py): claim
        trials from the front of its listing and take its records as they come, until the two
        meet; then whatever it did not hand over. The number that could not be cached."""
        rels, keys = early.rels or [], early.keys
        at = {rel: j for j, rel in enumerate(rels)}
        item_at: list[tuple[TrialLoc, FileKey, int] | None] = [None] * len(rels)
        extra: list[tuple[TrialLoc, FileKey, int]] = []  # not in the child's listing as it is now
        for item in to_parse:
            j = at.get(item[0].rel)
            if j is None or keys[j] != item[2] or item_at[j] is not None:
                extra.append(item)
            else:
                item_at[j] = item
        del at
        taken = bytearray(len(rels))
        put: list[tuple[str, bytes, bytes]] = []
        unsaved = 0
        total, reported = len(to_parse), 0
        cache, job_dir = self.cache, self.job_dir

        def theirs(records: Iterator[tuple[int, bytes | None]]) -> int:
            got_unsaved = 0
            for j, rec in records:
                item = item_at[j]
                if rec is None or item is None or taken[j]:
                    continue  # (None: the child could not make it; read here below)
                loc, ckey, key = item
                try:
                    trial = decode(loc.rel, rec)
                except (ValueError, KeyError, TypeError, IndexError):
                    continue
                taken[j] = 1
                got_unsaved += self._take(loc, ckey, key, trial, changed, replaced, put, rec)
            return got_unsaved

        while True:
            unsaved += theirs(early.records())
            claim = early.claim()
            if claim is None:
                break
            for j in claim:
                mine = item_at[j]
                if mine is None or taken[j]:
                    continue
                taken[j] = 1
                loc, ckey, key = mine
                unsaved += self._take(loc, ckey, key, _load_trial(loc, _ckey(loc, ckey)), changed, replaced, put)
            if len(put) >= 2000:
                if cache is not None:
                    cache.store(job_dir, put, [])
                put = []
                done = len(changed)
                if done - reported >= 2000:
                    progress(min(done, total), total, "reading trials")
                    reported = done
        unsaved += theirs(early.finish())
        rest = [item for j, item in enumerate(item_at) if item is not None and not taken[j]]
        for loc, ckey, key in [*rest, *extra]:
            unsaved += self._take(loc, ckey, key, _load_trial(loc, _ckey(loc, ckey)), changed, replaced, put)
        if put and cache is not None:
            cache.store(job_dir, put, [])
        progress(total, total, "reading trials")
        return unsaved

    def _take(self, loc: TrialLoc, ckey: FileKey, key: int, trial: Trial, changed: list[Trial],
              replaced: list[Trial], put: list[tuple[str, bytes, bytes]], rec: bytes | None = None) -> int:
        """Account for one freshly read Trial; 1 when it could not be cached."""
        old = self.index.by_path.get(loc.rel)
        if old is not None:
            replaced.append(old)
        changed.append(trial)
        if self.cache is not None and persistable(key) and loc.error is None:
            try:
                put.append((loc.rel, key_bytes(key), rec if rec is not None else encode(trial)))
            except TypeError:
                return 1  # a name that is not UTF-8: not cached, read again next time
        return 0

    def _assemble(self, trials: list[Trial], index: TrialIndex | _CensusOnly, problems: list[str],
                  source_label: str) -> Experiment:
        def job_file(name: str) -> bytes | None:
            data, err = _read(os.path.join(self.job_dir, name))
            if err:
                problems.append(err)
            return data

        eval_cfg = job_file("eval_config.json")
        if eval_cfg is None:
            cfg_dir = os.path.join(self.job_dir, "configs")
            if os.path.isdir(cfg_dir):
                try:
                    names = sorted(os.listdir(cfg_dir))
                except OSError:
                    names = []
                for name in names:
                    if name.endswith("_eval_config.json"):
                        eval_cfg, _ = _read(os.path.join(cfg_dir, name))
                        break
        exp = assemble_experiment(
            job_id=os.path.basename(os.path.normpath(self.job_dir)),
            path=self.job_dir,
            source="harbor",
            source_label=source_label or self.job_dir,
            trials=trials,
            policy=self.policy,
            config_bytes=job_file("config.json"),
            result_bytes=job_file("result.json"),
            eval_config_bytes=eval_cfg,
            env_bytes=job_file("meta.env"),
            problems=problems,
            index=cast(TrialIndex, index),
        )
        exp.__dict__["verified_at"] = self.verified_at
        return exp

    def _lazy_experiment(self, stored: tuple[bytes, bytes], digest: bytes, new_keys: dict[str, int],
                         problems: list[str], source_label: str, now: float, t0: float
                         ) -> tuple[Experiment, dict] | None:
        """When the cache's summary of this job has the same digest, the Experiment comes from
        its census, and the trials are read from the cache only if something asks for them."""
        if stored[0] != digest:
            return None
        try:
            census = census_from(stored[1])
        except (ValueError, TypeError, KeyError):
            return None
        order = dict(new_keys)
        exp = self._assemble([], _CensusOnly(census), problems, source_label)
        exp.__dict__.pop("trials", None)
        exp._trials_loader = lambda: self._materialize(order)
        self.keys = order
        self.volatile = {rel for rel, key in order.items() if key < 0}
        volatile = self.volatile
        self._ring = [rel for rel in order if rel not in volatile]
        self._ring_at = array("d", [time.time()]) * len(self._ring)
        self._cursor, self._full_next, self._last_scan = 0, False, now
        self._job_keys = tuple(file_key(os.path.join(self.job_dir, n)) for n in _JOB_FILES)
        self._pending_lazy = self._last = exp
        exp.__dict__["verified_at"] = self.verified_at
        stats = {"trial_dirs": len(order), "files_read": 0, "cache_hits": len(order), "verified": len(order),
                 "seconds": time.perf_counter() - t0}
        return exp, stats

    def _from_cache(self, wanted: dict[str, int]) -> dict[str, Trial]:
        """The cached Trials of `wanted` (rel → key) whose key still matches."""
        out: dict[str, Trial] = {}
        if self.cache is None:
            return out
        # the Trials keep the scan's own name strings, not a second copy of each from the cache
        canon = {rel: rel for rel in wanted}
        for row_rel, key, rec in self.cache.rows(self.job_dir):
            rel = canon.get(row_rel)
            if rel is None:
                continue
            want = wanted[rel]
            if not persistable(want) or key != key_bytes(want):
                continue
            try:
                out[rel] = decode(rel, rec)
            except (ValueError, KeyError, TypeError, IndexError):
                continue  # read from the files instead
        return out

    def _materialize(self, order: dict[str, int]) -> list[Trial]:
        cached = self._from_cache(order)
        trials: list[Trial] = []
        for rel in order:
            trial = cached.pop(rel, None)
            if trial is None:  # the cache lost it since: read the files
                path = os.path.join(self.job_dir, rel)
                _, rkey, error = trial_key(path)
                loc = TrialLoc(rel, self.job_dir, os.path.basename(rel), rkey, error)
                trial = _load_trial(loc, file_key(path + "/config.json"))
            trials.append(trial)
        collapse_copies(trials)
        number_attempts(trials)
        return trials
