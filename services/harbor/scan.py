"""Reading Harbor job dirs on local disk: discovery of job and trial dirs, and the scanner.

A scan stats every trial's result.json/config.json and re-reads only files whose
(mtime, size) changed since the last scan, so refreshing a large live job is cheap.
"""

from __future__ import annotations

import gc
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

from services.core.models import Experiment, Trial
from services.core.policy import Policy
from services.core.source import ProgressFn, SourceUnavailable, no_progress
from services.harbor.assemble import TrialIndex, assemble_experiment
from services.harbor.files import parse_trial

QUARANTINE_DIR = ".evaldesk-quarantine"
MAX_RESULT_BYTES = 64 * 1024 * 1024
_FileKey = tuple[int, int] | None  # (mtime_ns, size)


def _key(path: str) -> _FileKey:
    try:
        st = os.stat(path)
    except OSError:
        # a dangling symlink named result.json is an unreadable result, not a running trial
        return (-2, -2) if os.path.lexists(path) else None
    if not stat.S_ISREG(st.st_mode):
        return (-1, -1)  # a dir or fifo named result.json: read it to get the error
    return (st.st_mtime_ns, st.st_size)


def _read(path: str, key: _FileKey = None) -> tuple[bytes | None, str | None]:
    name = os.path.basename(path)
    try:
        if key is None or key[0] < 0:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                # never open a fifo or device: the read would block the scan
                kind = "Is a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
                return None, f"{name} unreadable: {kind}"
            size = st.st_size
        else:
            size = key[1]
        if size > MAX_RESULT_BYTES:
            return None, f"{name} is larger than {MAX_RESULT_BYTES >> 20} MiB"
        with open(path, "rb") as fh:
            return fh.read(), None
    except FileNotFoundError:
        if os.path.lexists(path):
            return None, f"{name} unreadable: a symlink to a missing file"
        return None, None
    except OSError as exc:
        return None, f"{name} unreadable: {exc.strerror or exc}"


def _is_trial_dir(path: str) -> bool:
    return os.path.lexists(os.path.join(path, "config.json")) or os.path.lexists(
        os.path.join(path, "result.json")
    )


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
                if entry.is_dir(follow_symlinks=False) and _is_trial_dir(entry.path):
                    child = _json_keys(os.path.join(entry.path, "config.json")) | _json_keys(
                        os.path.join(entry.path, "result.json")
                    )
                    return job_files_say(child) is not True
    except OSError:
        return False
    return False


def find_job_dirs(root: str) -> list[str]:
    if not os.path.isdir(root):
        raise SourceUnavailable(root, "no such directory" if not os.path.exists(root) else "not a directory")
    if looks_like_job_dir(root):
        return [root]
    jobs = []
    with os.scandir(root) as it:
        for entry in sorted(it, key=lambda e: e.name):
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            if looks_like_job_dir(entry.path):
                jobs.append(entry.path)
    return jobs


@dataclass
class TrialLoc:
    rel: str
    abs: str
    name: str
    rkey: _FileKey = None  # result.json (mtime_ns, size), None when absent


def _trial_key(path: str) -> tuple[bool, _FileKey]:
    """(is a trial dir, result.json key) with one stat in the common case."""
    rkey = _key(path + "/result.json")
    if rkey is not None:
        return True, rkey
    return os.path.lexists(os.path.join(path, "config.json")) or os.path.lexists(
        os.path.join(path, "result.json")
    ), None


def discover_trials(job_dir: str, problems: list[str]) -> Iterator[TrialLoc]:
    """Trial dirs at depth 1, and staged copies one level deeper under a non-trial folder.

    Every result.json is stat'ed on every scan: a result rewritten in place (by hand, or by a
    tool regrading a run) must show on the next refresh, so nothing is trusted unchecked."""
    real_job = os.path.realpath(job_dir)
    try:
        top = sorted(os.scandir(job_dir), key=lambda e: e.name)
    except OSError as exc:
        problems.append(f"cannot list {job_dir}: {exc.strerror or exc}")
        return
    for entry in top:
        if entry.name == QUARANTINE_DIR:
            continue
        # hidden folders (.git, caches) are skipped, but a task may legitimately start with a dot
        hidden = entry.name.startswith(".")
        if hidden and not (entry.is_dir(follow_symlinks=False) and _is_trial_dir(entry.path)):
            continue
        if entry.is_symlink():
            target = os.path.realpath(entry.path)
            if not (target + os.sep).startswith(real_job + os.sep):
                problems.append(f"{entry.name}: symlink to {target}, outside the job dir; not followed")
            else:
                problems.append(f"{entry.name}: symlink inside the job dir; not followed (counted once)")
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        is_trial, rkey = _trial_key(entry.path)
        if is_trial:
            yield TrialLoc(entry.name, entry.path, entry.name, rkey)
            continue
        try:
            inner = sorted(os.scandir(entry.path), key=lambda e: e.name)
        except OSError:
            continue
        for sub in inner:
            if sub.is_symlink():
                problems.append(f"{entry.name}/{sub.name}: symlink; not followed")
                continue
            if sub.is_dir(follow_symlinks=False):
                rel = f"{entry.name}/{sub.name}"
                is_trial, rkey = _trial_key(sub.path)
                if is_trial:
                    yield TrialLoc(rel, sub.path, sub.name, rkey)


@dataclass
class _Cached:
    result_key: _FileKey
    config_key: _FileKey
    trial: Trial


@dataclass
class JobScanState:
    trials: dict[str, _Cached] = field(default_factory=dict)
    files_read: int = 0


def _load_trial(loc: TrialLoc, ckey: _FileKey) -> _Cached:
    rkey = loc.rkey
    rbytes, rerr = _read(os.path.join(loc.abs, "result.json"), rkey) if rkey is not None else (None, None)
    cbytes = None
    # A finished trial names itself and its task in result.json; its config is read only when needed.
    if rbytes is None or b'"task_name"' not in rbytes:
        cbytes, _ = _read(os.path.join(loc.abs, "config.json"), ckey) if ckey is not None else (None, None)
    mtime = max((k[0] for k in (rkey, ckey) if k is not None), default=0) / 1e9 or None
    trial = parse_trial(loc.rel, loc.name, rbytes, cbytes, mtime, rerr)
    return _Cached(rkey, ckey, trial)


_JOB_FILES = ("config.json", "result.json", "eval_config.json", "meta.env", "configs")

PROCESS_POOL_MIN = 4000


class HarborScanner:
    """Incremental scanner of one job dir. Not thread-safe; one per job dir."""

    def __init__(self, job_dir: str, policy: Policy) -> None:
        self.job_dir = job_dir
        self.policy = policy
        self.state = JobScanState()
        self._last: Experiment | None = None
        self._job_keys: tuple[_FileKey, ...] = ()
        self.index = TrialIndex(policy)

    def scan(self, source_label: str = "", progress: ProgressFn = no_progress) -> tuple[Experiment, dict]:
        # A scan allocates one object per trial while 100k older ones are alive; letting the
        # cyclic GC walk them all mid-scan costs more than the scan itself.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._scan(source_label, progress)
        except BaseException:
            # a scan cut short may leave the cache and the index out of step: start afresh
            self.state, self._last, self._job_keys = JobScanState(), None, ()
            self.index = TrialIndex(self.policy)
            raise
        finally:
            if was_enabled:
                gc.enable()

    def _scan(self, source_label: str, progress: ProgressFn) -> tuple[Experiment, dict]:
        t0 = time.perf_counter()
        problems: list[str] = []
        locs = list(discover_trials(self.job_dir, problems))
        old = self.state.trials
        new: dict[str, _Cached] = {}
        todo: list[tuple[TrialLoc, _FileKey]] = []
        for loc in locs:
            cached = old.get(loc.rel)
            if cached is not None and loc.rkey is not None and cached.result_key == loc.rkey:
                new[loc.rel] = cached  # a finished trial's config no longer matters
                continue
            ckey = _key(loc.abs + "/config.json")
            if cached is not None and cached.result_key == loc.rkey and cached.config_key == ckey:
                new[loc.rel] = cached
                continue
            todo.append((loc, ckey))
        total = len(todo)
        if todo:
            progress(0, total, f"reading {total} trial files in {os.path.basename(self.job_dir)}")
            chunk = 2000
            for i in range(0, total, chunk):
                for loc, ckey in todo[i : i + chunk]:
                    new[loc.rel] = _load_trial(loc, ckey)
                progress(min(i + chunk, total), total, "reading trials")
        self.state.trials = new
        self.state.files_read += total
        removed = old.keys() - new.keys()
        if self._last is None:
            self.index.rebuild(c.trial for c in new.values())
        else:
            gone = [old[rel].trial for rel in removed]
            gone += [old[loc.rel].trial for loc, _ in todo if loc.rel in old]
            self.index.apply(gone, (new[loc.rel].trial for loc, _ in todo))
        job_keys = tuple(_key(os.path.join(self.job_dir, n)) for n in _JOB_FILES)
        if not todo and not removed and job_keys == self._job_keys and self._last is not None:
            # nothing on disk changed: the last Experiment is still exact
            return self._last, {"trial_dirs": len(locs), "files_read": 0, "seconds": time.perf_counter() - t0}
        self._job_keys = job_keys

        def job_file(name: str) -> bytes | None:
            data, err = _read(os.path.join(self.job_dir, name))
            if err:
                problems.append(err)
            return data

        eval_cfg = job_file("eval_config.json")
        if eval_cfg is None:
            cfg_dir = os.path.join(self.job_dir, "configs")
            if os.path.isdir(cfg_dir):
                for name in sorted(os.listdir(cfg_dir)):
                    if name.endswith("_eval_config.json"):
                        eval_cfg, _ = _read(os.path.join(cfg_dir, name))
                        break
        # the index keeps copy marks, attempt numbers and the census of these very objects
        trials = [c.trial for c in new.values()]
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
            index=self.index,
        )
        self._last = exp
        stats = {"trial_dirs": len(locs), "files_read": total, "seconds": time.perf_counter() - t0}
        return exp, stats


