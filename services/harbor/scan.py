"""The scanner of one Harbor job dir, over any walk FS (local disk, SFTP, an object store).

A first scan walks the job, takes from the parse cache every record whose files still have the
keys it was built from, and parses the rest; of a job the cache holds nothing of, it reads each
trial's files as it finds them (`_first_read`). A later scan costs what changed: one listing, a stat
of every running, odd or racy trial and of a slice of the finished ones, so that each is checked
against its files at least once per `verify_window_s` (a forced scan checks them all).
"""

from __future__ import annotations

import contextlib
import gc
import math
import posixpath
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from services.core.census import Census
from services.core.memory import give_back_memory
from services.core.models import Experiment, Trial
from services.core.policy import Policy
from services.core.source import ProgressFn, no_progress
from services.harbor import walk
from services.harbor.assemble import TrialIndex, assemble_experiment, collapse_copies, number_attempts
from services.harbor.cache import ParseCache, keys_digest, record_key
from services.harbor.parse import decode, encode, trial_of
from services.harbor.walk import Loc, running_key, settled

DEFAULT_VERIFY_WINDOW_S = 60.0
READ_BATCH = 2048  # trials read, parsed and cached at a time: memory stays flat on a big first read


def _key(loc: Loc) -> int:
    return loc.rkey if loc.rkey is not None else running_key(loc.ckey)


def _ckey(loc: Loc) -> int | None:
    # a finished trial's config.json key, when its record was built from that file too
    return loc.ckey if loc.rkey is not None else None


def _keeps(key: int) -> bool:
    # odd or unreadable result files say nothing stable about their content
    return key >= 0 or key <= -100


def loc_settled(loc: Loc, now: float) -> bool:
    """Whether every file the trial's record comes from is out of the racy window."""
    return settled(loc.rkey if loc.rkey is not None else loc.ckey, now) and (
        _ckey(loc) is None or settled(loc.ckey, now))


def job_experiment(job: str, files: dict[str, tuple[int | None, bytes | None, str | None]], trials: list[Trial],
                   problems: list[str], policy: Policy, source: str, label: str,
                   index: TrialIndex | None = None) -> Experiment:
    """The Experiment of one job dir from its own files (walk.job_files) and its trials."""
    def data(name: str, say: bool = True) -> bytes | None:
        _, got, err = files.get(name, (None, None, None))
        if err and say:
            problems.append(err)
        return got

    return assemble_experiment(
        job_id=posixpath.basename(job.rstrip("/")) or job, path=job, source=source, source_label=label or job,
        trials=trials, policy=policy, config_bytes=data("config.json"), result_bytes=data("result.json"),
        eval_config_bytes=data("eval_config.json") or data("configs", say=False), env_bytes=data("meta.env"),
        problems=problems, index=index)


class HarborScanner:
    """Incremental scanner of one job dir. Not thread-safe; one per job dir."""

    def __init__(self, fs: Any, job_dir: str, policy: Policy, cache: ParseCache | None = None,
                 verify_window_s: float = DEFAULT_VERIFY_WINDOW_S, source: str = "harbor") -> None:
        self.fs, self.job_dir, self.policy, self.cache = fs, job_dir, policy, cache
        self.verify_window_s = verify_window_s
        self.source = source
        self.index = TrialIndex(policy)
        self.keys: dict[str, int] = {}  # rel → the key its Trial was read under
        self.ckeys: dict[str, int] = {}  # rel → config.json's key, for records built from it too
        self.volatile: set[str] = set()  # stat'ed every scan: running, odd, unreadable, racy
        self.racy: set[str] = set()  # read again on the next scan whatever their key
        self._entries: list[walk.Entry] = []  # the job dir's listing at the last scan
        self._folders: dict[str, set[str]] = {}  # non-trial folders → the staged trial dirs in them
        self._links: set[str] = set()
        self._recheck: set[str] = set()  # names to classify again on the next scan
        self._ring: list[str] = []  # finished trials in the order they are re-verified
        self._cursor = 0
        self._turn_began = self._verified_since = time.time()
        self._last: Experiment | None = None
        self._last_scan: float | None = None
        self._job_keys: tuple[object, ...] = ()
        self._full_next = True
        self._lazy: Experiment | None = None
        self.job_files: dict[str, tuple[int | None, bytes | None, str | None]] = {}  # as the last scan read them

    def verify_all(self) -> None:
        """Check every trial against its files on the next scan (the `r` key)."""
        self._full_next = True

    @property
    def verified_at(self) -> datetime | None:
        """Every finished trial has been checked against its files since this time: the start of
        the last whole turn of the ring."""
        return None if self._last_scan is None else datetime.fromtimestamp(self._verified_since, UTC)

    def scan(self, label: str = "", progress: ProgressFn = no_progress) -> tuple[Experiment, dict[str, Any]]:
        # a scan makes one object per trial while 100k older ones live: a cyclic collection
        # walking them all mid-scan costs more than the scan
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._scan(label, progress)
        except BaseException:
            # a scan cut short may leave the state and the index out of step: start afresh
            HarborScanner.__init__(self, self.fs, self.job_dir, self.policy, self.cache, self.verify_window_s,
                                   self.source)
            raise
        finally:
            if was_enabled:
                gc.enable()

    # -- where to look ---------------------------------------------------------------------
    def _due(self, now: float) -> set[str]:
        """The finished trials this scan re-verifies: a slice of the ring sized so that a whole
        turn takes `verify_window_s`."""
        if not self._ring or self._last_scan is None:
            return set()
        share = 1.0 if self.verify_window_s <= 0 else min(1.0, (now - self._last_scan) / self.verify_window_s)
        take, due = min(len(self._ring), math.ceil(len(self._ring) * share)), set()
        while take > 0:
            if self._cursor >= len(self._ring):  # a turn is over: drop what is gone, start again
                self._ring = [r for r in self._ring if r in self.keys and r not in self.volatile]
                self._cursor, self._verified_since, self._turn_began = 0, self._turn_began, time.time()
                if not self._ring:
                    break
            part = self._ring[self._cursor: self._cursor + take]
            due.update(part)
            self._cursor += len(part)
            take -= len(part)
        return due

    def _locate(self, entries: list[walk.Entry], problems: list[str], read: bool = False) -> list[Loc]:
        locs, folders = walk.locate(self.fs, self.job_dir, entries, problems, read)
        for name, _ in entries:
            self._folders.pop(name, None)
            self._links.discard(name)
        self._folders.update(folders)
        self._links.update(n for n, kind in entries if kind == "link")
        return locs

    def _changes(self, entries: list[walk.Entry], now: float, problems: list[str]) -> tuple[list[Loc], list[str]]:
        """What a poll looks at: new and gone names, non-trial folders, links, and the running,
        racy and due trials; and the trial dirs that are gone."""
        added, gone = set[str](), set[str]()
        if entries is not self._entries and entries != self._entries:
            now_names, before = {n for n, _ in entries}, {n for n, _ in self._entries}
            added, gone = now_names - before, before - now_names
            self._entries = entries
        added |= self._recheck
        self._recheck = set()
        removed = [n for n in gone if n in self.keys]
        for name in gone:
            removed += self._folders.pop(name, ())
            self._links.discard(name)
        look = added | set(self._folders) | self._links
        was = {name: self._folders.get(name, set()) for name in look}
        locs = self._locate(walk.named(entries, look), problems)
        now_rels = {loc.rel for loc in locs}
        for name in look:
            removed += [r for r in was[name] if r not in now_rels]
            if name in self.keys and name not in now_rels:
                removed.append(name)
        again = sorted(r for r in self.volatile | self.racy | self._due(now)
                       if "/" not in r and r not in added and r in self.keys and r not in gone)
        for rel, (rkey, ckey, _) in zip(again, walk.trial_keys(self.fs, [f"{self.job_dir}/{r}" for r in again]),
                                     strict=True):
            loc = walk.loc_of(rel, rel, rkey, ckey)
            if loc is None:
                removed.append(rel)
                self._recheck.add(rel)  # classified afresh next scan (a folder now?)
            else:
                locs.append(loc)
        return locs, removed

    # -- the scan ----------------------------------------------------------------------------
    def _scan(self, label: str, progress: ProgressFn) -> tuple[Experiment, dict[str, Any]]:
        t0 = time.perf_counter()
        now_mono, now = time.monotonic(), self.fs.now()
        problems: list[str] = []
        if self._lazy is not None:  # the last scan handed over trials read on first use
            self.index.rebuild(self._lazy.trials)
            self._lazy = None
        full = self._full_next or self._last is None
        self._full_next = False
        new_keys: dict[str, int] = {}
        listing = self.fs.list([self.job_dir])[0]
        listed = isinstance(listing, list)
        entries: list[walk.Entry] = listing if isinstance(listing, list) else []
        if not listed:
            problems.append(f"cannot list {self.job_dir}: {listing}")
        # a first read of a job the cache holds nothing of: each file is read as it is found
        first = self._last is None and listed and (self.cache is None or not self.cache.holds(self.job_dir))
        changed: list[Trial] = []
        unsaved = 0
        if full:
            self._entries, self._folders, self._links = entries, {}, set()
            gone = list[str]()
            if first:
                locs, unsaved = self._first_read(entries, problems, now, changed, progress)
            else:
                locs = self._locate(entries, problems)
        else:
            locs, gone = self._changes(entries, now_mono, problems) if listed else ([], [])
        # a record built from config.json too is checked against both files
        needs = [loc for loc in locs if loc.rel in self.ckeys and loc.rkey is not None and loc.ckey is None]
        for loc, ck in zip(needs, self.fs.stat([f"{self.job_dir}/{loc.rel}/config.json" for loc in needs]),
                           strict=True):
            loc.ckey = ck
        notes = sorted((loc.rel.split("/"), f"{loc.rel}: {loc.error}; counted as errored") for loc in locs if loc.error)
        problems += [note for _, note in notes]
        if full:
            new_keys = {loc.rel: _key(loc) for loc in locs}
            if not listed and self.keys:
                new_keys = dict(self.keys)  # the job dir cannot be listed right now: keep what was known
            gone = [rel for rel in self.keys if rel not in new_keys]
        by_path = self.index.by_path
        persisted: dict[str, Trial] = {}
        if self._last is None and self.cache is not None and listed and not first:
            lazy = self._from_summary(entries, new_keys, problems, label, now_mono, t0)
            if lazy is not None:
                return lazy
            persisted, absent = self._from_cache(locs)
            gone += absent  # (records of trial dirs gone before this process: forgotten too)
        replaced: list[Trial] = []
        to_read: list[Loc] = []
        hits = 0
        for loc in [] if first else locs:
            rel = loc.rel
            if self.keys.get(rel) == _key(loc) and self.ckeys.get(rel) == _ckey(loc) and rel in by_path \
                    and rel not in self.racy:
                continue
            trial = persisted.get(rel)
            if trial is None:
                to_read.append(loc)
                continue
            hits += 1
            replaced += [by_path[rel]] if rel in by_path else []
            changed.append(trial)
        if to_read:
            progress(0, len(to_read), f"reading {len(to_read)} trial files in {posixpath.basename(self.job_dir)}")
        unsaved += self._read(to_read, now, changed, replaced, progress)
        n_read = len(locs) if first else len(to_read)
        self._remember(locs, gone, full, new_keys if full else None)
        gone_trials = [by_path[rel] for rel in gone if rel in by_path]
        if self._last is None:
            for t in changed:
                by_path[t.path] = t
            self.index.rebuild([by_path[rel] for rel in self.keys])
        else:
            self.index.apply(gone_trials + replaced, changed)
        self._last_scan = now_mono
        if self.cache is not None and gone:
            self.cache.store(self.job_dir, [], gone)
        if self.cache is not None and full and listed:
            whole = not unsaved and not self.racy and all(_keeps(k) for k in self.keys.values())
            self.cache.store_summary(self.job_dir, keys_digest(self.keys, self.ckeys) if whole else None,
                                     self.index.census.to_bytes() if whole else None)
        names = walk.job_file_names(self.fs, self.job_dir, entries)
        job_keys: tuple[object, ...] = (*names, *self.fs.stat([f"{self.job_dir}/{n}" for n in names]))
        stats = {"trial_dirs": len(self.keys), "files_read": n_read, "cache_hits": hits,
                 "verified": len(locs), "seconds": 0.0}
        if not changed and not gone and job_keys == self._job_keys and self._last is not None:
            self._last.__dict__["verified_at"] = self.verified_at  # nothing changed: the last Experiment stands
            stats["seconds"] = time.perf_counter() - t0
            return self._last, stats
        self._job_keys = job_keys
        # (the index keeps copy marks, attempt numbers and the census of these very objects)
        trials = [by_path[rel] for rel in self.keys] if full else list(by_path.values())
        exp = self._assemble(names, trials, self.index, problems, label)
        if self._last is not None:
            self._last._delta = None  # one step of history, never a chain of old Experiments
            exp._delta = (self._last, gone_trials + replaced, changed, self.index.touched)
        elif n_read > READ_BATCH:
            give_back_memory()
        self._last = exp
        stats["seconds"] = time.perf_counter() - t0
        return exp, stats

    def _first_read(self, entries: list[walk.Entry], problems: list[str], now: float, changed: list[Trial],
                    progress: ProgressFn) -> tuple[list[Loc], int]:
        """The trial dirs of `entries`, located and read a batch of entries at a time, each
        result.json keyed from the open file (no stat before its read); and the number that
        could not be cached. Once the disk is found slow, the rest are stat'ed at once and read
        as any scan reads them, each next batch hinted to the kernel."""
        locs: list[Loc] = []
        unsaved = at = 0
        progress(0, len(entries), f"reading the trial files of {posixpath.basename(self.job_dir)}")
        while at < len(entries) and not getattr(self.fs, "cold", False):
            part = self._locate(entries[at: at + READ_BATCH], problems, read=True)
            unsaved += self._read(part, now, changed, [], no_progress)
            locs += part
            at += READ_BATCH
            progress(min(at, len(entries)), len(entries), "reading trials")
        if at < len(entries):
            rest = self._locate(entries[at:], problems)
            locs += rest
            unsaved += self._read(rest, now, changed, [], lambda done, total, what: progress(
                at + done, None if total is None else at + total, what))
        return locs, unsaved

    def _read(self, to_read: list[Loc], now: float, changed: list[Trial], replaced: list[Trial],
              progress: ProgressFn) -> int:
        """Read, parse and cache `to_read`, a batch at a time; the number that could not be cached."""
        unsaved = 0
        by_path = self.index.by_path
        for i in range(0, len(to_read), READ_BATCH):
            part = to_read[i: i + READ_BATCH]
            # (the next batch's files come off a cold disk while this one is parsed)
            walk.prefetch_trials(self.fs, self.job_dir, to_read[i if i == 0 else i + READ_BATCH: i + 2 * READ_BATCH])
            put: list[tuple[str, bytes, bytes]] = []
            for loc, (result, config) in zip(part, walk.read_trials(self.fs, self.job_dir, part), strict=True):
                trial = trial_of(loc, result, config)
                rel = loc.rel
                if rel in by_path:
                    replaced.append(by_path[rel])
                changed.append(trial)
                if not loc_settled(loc, now):
                    self.racy.add(rel)
                    continue
                self.racy.discard(rel)
                key = _key(loc)
                if self.cache is not None and loc.error is None and _keeps(key):
                    rec = encode(trial)
                    if rec is None:
                        unsaved += 1
                    else:
                        put.append((rel, record_key(key, _ckey(loc)), rec))
            if self.cache is not None:
                self.cache.store(self.job_dir, put, [])
            progress(min(i + READ_BATCH, len(to_read)), len(to_read), "reading trials")
        return unsaved

    def _remember(self, locs: list[Loc], gone: Iterable[str], full: bool, new_keys: dict[str, int] | None) -> None:
        """Keys, the volatile set and the ring follow what was just seen."""
        for rel in gone:
            self.keys.pop(rel, None)
            self.ckeys.pop(rel, None)
            self.volatile.discard(rel)
            self.racy.discard(rel)
        if full and new_keys is not None:
            self.keys = new_keys
            self._ring = []
        for loc in locs:
            rel, key = loc.rel, _key(loc)
            fresh = rel not in self.keys or full
            self.keys[rel] = key
            ckey = _ckey(loc)
            if ckey is None:
                self.ckeys.pop(rel, None)
            else:
                self.ckeys[rel] = ckey
            if key < 0 or loc.error is not None:
                self.volatile.add(rel)
            elif fresh or rel in self.volatile:
                self.volatile.discard(rel)
                self._ring.append(rel)  # finished since the last scan: joins the rotation
        if full:
            self._cursor, self._turn_began = 0, time.time()
            self._verified_since = self._turn_began

    # -- the Experiment ------------------------------------------------------------------------
    def _assemble(self, names: list[str], trials: list[Trial], index: TrialIndex | SimpleNamespace,
                  problems: list[str], label: str) -> Experiment:
        self.job_files = walk.job_files(self.fs, self.job_dir, names)
        exp = job_experiment(self.job_dir, self.job_files, trials, problems, self.policy, self.source, label,
                             cast(TrialIndex, index))
        exp.__dict__["verified_at"] = self.verified_at
        return exp

    def _from_summary(self, entries: list[walk.Entry], keys: dict[str, int], problems: list[str], label: str,
                      now_mono: float, t0: float) -> tuple[Experiment, dict[str, Any]] | None:
        """A first scan of a job the cache holds a summary of under the same keys: the Experiment
        comes from its census, and the trials from the cache only if something asks for them."""
        assert self.cache is not None
        stored = self.cache.summary(self.job_dir)
        # (a record built from a config.json too never matches a digest of result keys alone:
        # such a job takes the long way)
        if stored is None or stored[0] != keys_digest(keys, {}):
            return None
        try:
            census = Census.from_bytes(stored[1])
        except (ValueError, TypeError, KeyError):
            return None
        names = walk.job_file_names(self.fs, self.job_dir, entries)
        exp = self._assemble(names, [], SimpleNamespace(census=census), problems, label)  # (the census alone)
        exp.__dict__.pop("trials", None)
        order = dict(keys)
        exp._trials_loader = lambda: self._materialize(order)
        self.keys = order
        self.volatile = {rel for rel, key in order.items() if key < 0}
        self._ring = [rel for rel in order if rel not in self.volatile]
        self._cursor, self._last_scan = 0, now_mono
        self._turn_began = self._verified_since = time.time()
        self._job_keys = (*names, *self.fs.stat([f"{self.job_dir}/{n}" for n in names]))
        self._lazy = self._last = exp
        return exp, {"trial_dirs": len(order), "files_read": 0, "cache_hits": len(order), "verified": len(order),
                     "seconds": time.perf_counter() - t0}

    def _from_cache(self, locs: list[Loc]) -> tuple[dict[str, Trial], list[str]]:
        """The cached Trials of `locs` whose files still have the keys their records were built
        from (config.json's is stat'ed for the records that name one), and the trial dirs the
        cache holds records of that are not among `locs`."""
        assert self.cache is not None
        by_rel = {loc.rel: loc for loc in locs}
        out: dict[str, Trial] = {}
        absent: set[str] = set()
        both: list[tuple[Loc, bytes, bytes]] = []
        for row_rel, key, rec in self.cache.rows(self.job_dir):
            loc = by_rel.get(row_rel)
            if loc is None:
                absent.add(row_rel)
                continue
            want = record_key(_key(loc), None)
            if key == want:
                with contextlib.suppress(ValueError, KeyError, TypeError, IndexError):
                    out[loc.rel] = decode(loc.rel, rec)  # (a bad record: read from the files instead)
            elif loc.rkey is not None and key.startswith(want + b":"):
                both.append((loc, key, rec))
        ckeys = self.fs.stat([f"{self.job_dir}/{loc.rel}/config.json" for loc, _, _ in both])
        for (loc, key, rec), ck in zip(both, ckeys, strict=True):
            if ck is not None and key == record_key(_key(loc), ck):
                with contextlib.suppress(ValueError, KeyError, TypeError, IndexError):
                    out[loc.rel] = decode(loc.rel, rec)
                    loc.ckey = ck
        return out, sorted(absent)

    def _materialize(self, order: dict[str, int]) -> list[Trial]:
        """The trials of the summary's answer: the records of the very keys its census was
        checked under, so the two agree. A file changed since is re-verified as any other is,
        by the scans that follow (within verify_window_s)."""
        # (the keys taken in one call: a scan in another thread may be changing them)
        locs = [walk.loc_of_key(rel, key) for rel, key in list(order.items())]
        cached, _ = self._from_cache(locs)
        read: list[Trial] = []  # (a record lost since the summary: read from the files)
        self._read([loc for loc in locs if loc.rel not in cached], self.fs.now(), read, [], no_progress)
        cached.update((t.path, t) for t in read)
        trials = [cached[loc.rel] for loc in locs]
        collapse_copies(trials)
        number_attempts(trials)
        return trials
