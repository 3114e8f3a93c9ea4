"""Where csbench puts things on local disk, and reading them.

Two layouts hold records:

    <results>/                         csbench run-plan PLAN --results <results>
      campaigns/<campaign_id>.json     the campaign file (every task slot and its state)
      <domain>/<adapter>/<task>-run-<id>.json   one record per run
      artifacts/<subdir>/…             the suite's files, hashed in the record's manifest
      .progress/<run_id>/state.json, stream.jsonl
    <dest>/                            csbench fetch CID --dest <dest>
      <task_id>--<run_id>.json         one record per completed task (no artifacts)

Which dirs are results dirs is find.py's question, answered with a few `stat`s. Every read here
is bounded and never follows a fifo.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from dataclasses import dataclass, field

from services.csbench.find import MAX_JSON_BYTES, is_record_name
from services.csbench.formats import (
    PROGRESS_GRACE_S,
    RESERVED_SUBTREES,
    CampaignFile,
    PlanAggregate,
    ProgressState,
    Record,
    parse_aggregate,
    parse_campaign,
    parse_progress,
    parse_record,
)
from services.csbench.model import ArtifactCheck, Inspection

MAX_ARTIFACT_BYTES = 2 * 1024 * 1024 * 1024
CONTROLLER_LOG = "controller.log"
# a running task with nothing in flight that has written nothing for this long has stopped
# (csbench's own reaper waits as long before it sweeps a finished or dead run's dir)
STALE_AFTER_S = PROGRESS_GRACE_S

_Key = tuple[int, int]  # (mtime_ns, size)


def _regular(path: str) -> os.stat_result | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def read_bounded(path: str, limit: int = MAX_JSON_BYTES) -> bytes:
    """A regular file's bytes; OSError for a fifo, a device or one over `limit`."""
    from services.core.input_files import InputFileError, read_bytes

    try:
        return read_bytes(path, max_bytes=limit)
    except InputFileError as exc:
        raise OSError(str(exc).replace(path, os.path.basename(path))) from None


@dataclass
class RecordFile:
    rel: str
    record: Record | None
    problem: str | None
    mtime: float


@dataclass
class ProgressDir:
    rel: str  # .progress/<run_id>
    state: ProgressState
    stale: str | None  # why it is not really running: its process is gone
    mtime: float = 0.0  # of state.json


@dataclass
class ResultsDir:
    path: str
    campaigns: list[tuple[str, CampaignFile]] = field(default_factory=list)
    campaign_mtimes: dict[str, float] = field(default_factory=dict)  # rel → mtime of the campaign file
    records: list[RecordFile] = field(default_factory=list)
    aggregates: dict[str, PlanAggregate] = field(default_factory=dict)  # plan id → csbench's aggregate
    progress: dict[str, ProgressDir] = field(default_factory=dict)
    controller_log: str | None = None
    problems: list[str] = field(default_factory=list)
    files_read: int = 0

    @property
    def fetched(self) -> bool:
        """The flat layout of `csbench fetch --dest` (no campaign file, no run-plan tree)."""
        return not self.campaigns and all("/" not in r.rel for r in self.records) and bool(self.records)


def _pid_alive(pid: int) -> bool:
    """csbench's probe (core/progress.py `_pid_alive`): no pid, or none by that number, is dead."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


class DirReader:
    """Reads one results dir, re-parsing only files whose (mtime, size) changed."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self._records: dict[str, tuple[_Key, RecordFile]] = {}
        self._campaigns: dict[str, tuple[_Key, CampaignFile | None, str | None]] = {}
        self._aggregates: dict[str, tuple[_Key, PlanAggregate | None]] = {}
        self._hashes: dict[str, tuple[_Key, str | None, str | None]] = {}

    # ---- discovery -------------------------------------------------------------------------
    def _record_paths(self) -> list[str]:
        """Record files: depth ≤ 3, outside csbench's reserved subtrees and every dot dir."""
        out: list[str] = []

        def walk(rel: str, depth: int) -> None:
            here = os.path.join(self.path, rel) if rel else self.path
            try:
                with os.scandir(here) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                return
            for e in entries:
                if e.name.startswith("."):
                    continue
                child = f"{rel}/{e.name}" if rel else e.name
                if e.is_dir(follow_symlinks=False):
                    if depth < 2 and not (depth == 0 and e.name in RESERVED_SUBTREES):
                        walk(child, depth + 1)
                elif e.name.endswith(".json") and e.is_file(follow_symlinks=False):
                    out.append(child)

        walk("", 0)
        return out

    # ---- reading ---------------------------------------------------------------------------
    def read(self) -> ResultsDir:
        rd = ResultsDir(self.path)
        self._read_campaigns(rd)
        self._read_records(rd)
        self._read_aggregates(rd)
        self._read_progress(rd)
        if _regular(os.path.join(self.path, CONTROLLER_LOG)) is not None:
            rd.controller_log = CONTROLLER_LOG
        return rd

    def _read_campaigns(self, rd: ResultsDir) -> None:
        cdir = os.path.join(self.path, "campaigns")
        try:
            names = sorted(n for n in os.listdir(cdir) if n.endswith(".json") and not n.startswith("."))
        except OSError:
            return
        seen = set()
        for name in names:
            rel = f"campaigns/{name}"
            st = _regular(os.path.join(self.path, rel))
            if st is None:
                if os.path.lexists(os.path.join(self.path, rel)):
                    rd.problems.append(f"{rel}: not a regular file; evaldesk reads only regular files")
                continue
            seen.add(rel)
            rd.campaign_mtimes[rel] = st.st_mtime
            key = (st.st_mtime_ns, st.st_size)
            cached = self._campaigns.get(rel)
            if cached is None or cached[0] != key:
                try:
                    camp, problem = parse_campaign(read_bounded(os.path.join(self.path, rel)))
                except OSError as exc:
                    camp, problem = None, str(exc)
                rd.files_read += 1
                cached = self._campaigns[rel] = (key, camp, problem)
            if cached[1] is not None:
                rd.campaigns.append((rel, cached[1]))
            elif cached[2]:
                rd.problems.append(f"{rel}: {cached[2]}")
        for gone in set(self._campaigns) - seen:
            del self._campaigns[gone]

    def _read_records(self, rd: ResultsDir) -> None:
        seen = set()
        for rel in self._record_paths():
            path = os.path.join(self.path, rel)
            st = _regular(path)
            if st is None:
                continue
            key = (st.st_mtime_ns, st.st_size)
            cached = self._records.get(rel)
            if cached is None or cached[0] != key:
                try:
                    record, problem = parse_record(read_bounded(path))
                except OSError as exc:
                    record, problem = None, str(exc)
                rd.files_read += 1
                if record is None and not is_record_name(os.path.basename(rel)):
                    problem = None  # some other JSON file (a plan's aggregate elsewhere, notes): not ours
                cached = self._records[rel] = (key, RecordFile(rel, record, problem, st.st_mtime))
            seen.add(rel)
            rf = cached[1]
            if rf.record is not None:
                rd.records.append(rf)
            elif rf.problem:
                rd.records.append(rf)
                rd.problems.append(f"{rel}: {rf.problem}")
        for gone in set(self._records) - seen:
            del self._records[gone]

    def _read_aggregates(self, rd: ResultsDir) -> None:
        """`aggregates/<domain>/<adapter>/*.json`: one per plan whose last run ended."""
        root = os.path.join(self.path, "aggregates")
        if not os.path.isdir(root):
            self._aggregates.clear()
            return
        seen = set()
        for dirpath, dirnames, filenames in os.walk(root):
            depth = 0 if dirpath == root else os.path.relpath(dirpath, root).count(os.sep) + 1
            # <domain>/<adapter>/ below aggregates/, no deeper
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if depth < 2 else []
            for name in sorted(filenames):
                if not name.endswith(".json") or name.startswith("."):
                    continue
                path = os.path.join(dirpath, name)
                st = _regular(path)
                if st is None:
                    continue
                seen.add(path)
                key = (st.st_mtime_ns, st.st_size)
                cached = self._aggregates.get(path)
                if cached is None or cached[0] != key:
                    try:
                        agg = parse_aggregate(read_bounded(path, 8 * 1024 * 1024))
                    except OSError:
                        agg = None
                    rd.files_read += 1
                    cached = self._aggregates[path] = (key, agg)
                if cached[1] is not None:
                    rd.aggregates[cached[1].plan_id] = cached[1]
        for gone in set(self._aggregates) - seen:
            del self._aggregates[gone]

    def _read_progress(self, rd: ResultsDir) -> None:
        pdir = os.path.join(self.path, ".progress")
        try:
            names = sorted(os.listdir(pdir))
        except OSError:
            return
        now = time.time()
        for name in names:
            rel = f".progress/{name}"
            path = os.path.join(self.path, rel, "state.json")
            st = _regular(path)
            if st is None:
                continue
            try:
                state = parse_progress(read_bounded(path))
            except OSError:
                state = None
            rd.files_read += 1
            if state is None:
                continue
            stale = None
            # csbench's own reading (core/progress.py read_state): a run still saying running
            # whose process is gone is abandoned — its run-plan was killed
            if state.status == "running" and not _pid_alive(state.pid or 0):
                idle = now - st.st_mtime
                stale = (f"its process (pid {state.pid}) is gone (csbench calls the run abandoned); its state.json "
                         f"last changed {idle:.0f} s ago")
            rd.progress[state.run_id or name] = ProgressDir(rel, state, stale, st.st_mtime)

    # ---- artifacts -------------------------------------------------------------------------
    def inspect(self, record: Record) -> Inspection:
        """Every manifest entry (and listed artifact) hashed against its sha256, and the
        instance ids of a SWE-bench results artifact."""
        subdir = record.observations.artifacts_subdir
        art_root = os.path.join(self.path, "artifacts")
        local = os.path.isdir(art_root)
        if not subdir or not local:
            return Inspection(local=local)
        wanted: dict[str, tuple[str, str, int | None]] = {}
        for name, entry in sorted(record.observations.manifest.items()):
            if entry.path:
                wanted[f"{subdir}/{entry.path}"] = (name, entry.sha256, entry.rows)
        for art in record.artifacts:
            if art.path and art.path not in wanted:
                wanted[art.path] = (art.kind or art.path, art.sha256, None)
        checks = []
        for rel_art, (name, expected, rows) in wanted.items():
            checks.append(self._check_one(f"artifacts/{rel_art}", name, expected, rows))
        ids: list[str] = []
        results = next((c for c in checks if c.name == "results" and c.status != "missing"), None)
        if results is not None:
            ids = self._instance_ids(os.path.join(self.path, results.rel))
        return Inspection(checks=checks, local=True, instance_ids=ids)

    @staticmethod
    def _instance_ids(path: str) -> list[str]:
        """`results.json` in the suite's canonical shape: {"per_instance": {iid: …}, …}."""
        try:
            data = json.loads(read_bounded(path, 8 * 1024 * 1024))
        except (OSError, ValueError):
            return []
        per = data.get("per_instance") if isinstance(data, dict) else None
        return sorted(str(k) for k in per) if isinstance(per, dict) else []

    def _check_one(self, rel: str, name: str, expected: str, rows: int | None) -> ArtifactCheck:
        parts = rel.split("/")
        if ".." in parts or rel.startswith("/"):
            return ArtifactCheck(name=name, rel=rel, expected=expected, status="unreadable",
                                 detail="the manifest path leaves the results dir")
        path = os.path.join(self.path, rel)
        try:
            st = os.stat(path)
        except OSError:
            return ArtifactCheck(name=name, rel=rel, expected=expected, status="missing", rows=rows)
        if not stat.S_ISREG(st.st_mode):
            return ArtifactCheck(name=name, rel=rel, expected=expected, status="unreadable", rows=rows,
                                 detail="not a regular file")
        key = (st.st_mtime_ns, st.st_size)
        cached = self._hashes.get(rel)
        if cached is None or cached[0] != key:
            digest: str | None = None
            problem: str | None = None
            if st.st_size > MAX_ARTIFACT_BYTES:
                problem = f"larger than {MAX_ARTIFACT_BYTES >> 30} GiB: not hashed"
            else:
                try:
                    h = hashlib.sha256()
                    with open(path, "rb") as fh:
                        for chunk in iter(lambda: fh.read(1 << 20), b""):
                            h.update(chunk)
                    digest = "sha256:" + h.hexdigest()
                except OSError as exc:
                    problem = exc.strerror or str(exc)
            cached = self._hashes[rel] = (key, digest, problem)
        _, digest, problem = cached
        if digest is None:
            return ArtifactCheck(name=name, rel=rel, expected=expected, status="unreadable", rows=rows,
                                 detail=problem)
        want = expected if expected.startswith("sha256:") else f"sha256:{expected}"
        return ArtifactCheck(name=name, rel=rel, expected=expected, actual=digest, rows=rows,
                             status="ok" if digest == want else "mismatch")
