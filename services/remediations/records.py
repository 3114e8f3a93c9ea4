"""Plans and their write-ahead records: what will be done, and how far it got.

A record lives in files beside what it changed (`record.json`, written once before the first
change; `steps.log`, one fsync'd line per step done or undone and per status change;
`listing.json`, the watched dirs' entries when apply ended), and in this machine's index
(`$XDG_STATE_HOME/evaldesk/records/`) so an unfinished one is found at the next start. After
an undo (or a complete roll-back) the files move from the target into the index's folder:
the target is left exactly as it was, and the story stays on this machine and in the journal.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from services.core.plain import dump, validate
from services.core.statefile import write_atomic
from services.core.xdg import state_dir
from services.remediations.steps import MAX_READ_BYTES, Step
from services.transport.fs import JobFS

QUARANTINE_DIR = ".evaldesk-quarantine"


def aside_root(job_dir: str) -> str:
    """Where a job's set-aside trials and records live: beside it, never inside it."""
    return posixpath.join(posixpath.dirname(job_dir.rstrip("/")), QUARANTINE_DIR,
                          posixpath.basename(job_dir.rstrip("/")))


def job_of_record_dir(record_dir: str) -> str:
    """The job dir a record dir belongs to, for either quarantine layout."""
    q = posixpath.dirname(record_dir.rstrip("/"))
    if posixpath.basename(q) == QUARANTINE_DIR:
        return posixpath.dirname(q)  # <job>/.evaldesk-quarantine/<record>
    top = posixpath.dirname(q)
    if posixpath.basename(top) == QUARANTINE_DIR:
        return posixpath.join(posixpath.dirname(top), posixpath.basename(q))
    return q


RECORD_FILE = "record.json"


STEPS_LOG = "steps.log"


LISTING_FILE = "listing.json"


RecordStatus = Literal["applying", "applied", "failed", "rolled_back", "undone"]


FINAL: frozenset[str] = frozenset({"applied", "rolled_back", "undone"})


# a record in one of these states left its target half changed: finish it or roll it back
UNFINISHED: frozenset[str] = frozenset({"applying", "failed"})


# what `undo` of a job dir looks for: the newest record that still has changes in place
UNDOABLE: frozenset[str] = frozenset({"applied", "applying", "failed"})


def _doc(text: str) -> dict[str, Any]:
    return {"description": text}


def new_record_id(action: str, now: datetime | None = None, salt: str | None = None) -> str:
    """Sortable by time, unique, and safe as a dir name. With `salt` (the plan's input hash)
    the same plan at the same instant gets the same id, so a preview is reproducible."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{stamp}-{action}-{(salt or uuid.uuid4().hex)[:6]}"


@dataclass(kw_only=True)
class Plan:
    """What a remediation will do, exactly; the same object previews, applies and undoes."""

    id: str = field(metadata=_doc("the record id this plan will be written under"))
    action: str
    title: str
    target: str = field(metadata=_doc("the job dir, or what the write touches, for people"))
    host: str | None = field(default=None, metadata=_doc("the SSH host the target lives on; None: here"))
    store: str | None = field(default=None, metadata=_doc(
        "the bucket the target lives in (gs://name, s3://name), its paths being /<name>/<key>; None: a filesystem"))
    experiment: str | None = field(default=None, metadata=_doc("the experiment key (source label::id)"))
    input_hash: str = field(metadata=_doc("digest of everything the planner read"))
    steps: list[Step] = field(default_factory=list)
    preview: list[str] = field(default_factory=list)
    lock_dir: str | None = field(default=None, metadata=_doc("the dir whose lock guards the target"))
    record_dir: str | None = field(default=None, metadata=_doc(
        "where the record lives on the target's fs; None: locally"))
    meta: dict[str, Any] = field(default_factory=dict, metadata=_doc("the remediation's figures for batch JSON"))
    blocked: str | None = field(default=None, metadata=_doc("why this plan may be previewed but not applied"))
    watch: list[str] = field(default_factory=list, metadata=_doc(
        "dirs whose entries are recorded when apply ends; undo refuses when entries appeared since "
        "(a trial added after a dedupe), naming them"))

    @property
    def nothing_to_do(self) -> bool:
        return not self.steps

    def preview_text(self) -> str:
        return "\n".join(self.preview)


@dataclass(kw_only=True)
class Record:
    """The write-ahead record: the plan, who ran it, and how far it got."""

    id: str
    action: str
    target: str
    host: str | None = None
    experiment: str | None = None
    user: str
    machine: str
    pid: int
    created_at: datetime
    status: RecordStatus = "applying"
    done: list[bool] = field(default_factory=list, metadata=_doc("per step: done (and not undone)"))
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    finished_at: datetime | None = None
    undone_at: datetime | None = None
    plan: Plan
    listing: dict[str, list[str]] | None = field(default=None, metadata=_doc(
        "the watched dirs' entries when apply ended"))
    notes: list[str] = field(default_factory=list, metadata=_doc("what a person should know, e.g. a lock taken over"))

    @property
    def n_done(self) -> int:
        return sum(self.done)


def dump_json(obj: Any) -> bytes:
    # stdlib json: names that are not UTF-8 survive as \udcXX escapes and read back the same
    return (json.dumps(obj, ensure_ascii=True, indent=1, default=str) + "\n").encode("ascii")


def json_line(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=str) + "\n").encode("ascii")


class RecordStore:
    """A record's files on the target's fs: `record.json` written once, `steps.log` appended."""

    def __init__(self, fs: JobFS, record_dir: str) -> None:
        self.fs = fs
        self.dir = record_dir

    @property
    def record_path(self) -> str:
        return posixpath.join(self.dir, RECORD_FILE)

    @property
    def log_path(self) -> str:
        return posixpath.join(self.dir, STEPS_LOG)

    @property
    def listing_path(self) -> str:
        return posixpath.join(self.dir, LISTING_FILE)

    async def write_listing(self, listing: dict[str, list[str]]) -> None:
        await self.fs.write_bytes_atomic(self.listing_path, dump_json(listing))

    async def create(self, record: Record) -> None:
        await self.fs.makedirs(self.dir)
        await self.fs.write_bytes_atomic(self.record_path, dump_json(dump(record, json=True)))

    async def mark(self, **event: Any) -> None:
        await self.fs.append_durable(self.log_path, json_line({"at": datetime.now(UTC).isoformat(), **event}))

    async def load(self) -> Record:
        raw = json.loads(await self.fs.read_regular(self.record_path, MAX_READ_BYTES))
        record = validate(Record, raw)
        try:
            log = await self.fs.read_regular(self.log_path, MAX_READ_BYTES)
        except FileNotFoundError:
            log = b""
        for line in log.decode("utf-8", "surrogateescape").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a torn last line after a crash: the step it marks is re-checked on disk
            if "step" in ev and 0 <= int(ev["step"]) < len(record.done):
                record.done[int(ev["step"])] = ev.get("state") == "done"
                if isinstance(ev.get("result"), dict):
                    i = int(ev["step"])
                    record.results[i] = ev["result"]
                    step = record.plan.steps[i]
                    if step.kind == "external":
                        step.result = ev["result"]
            if "status" in ev:
                record.status = ev["status"]
                record.error = ev.get("error", record.error)
                if ev["status"] in ("applied", "failed", "rolled_back"):
                    record.finished_at = datetime.fromisoformat(ev["at"])
                if ev["status"] == "undone":
                    record.undone_at = datetime.fromisoformat(ev["at"])
        return record

    async def load_listing(self) -> dict[str, list[str]] | None:
        """The watched dirs' entries when apply ended (read only by undo: it can be large)."""
        try:
            listing = json.loads(await self.fs.read_regular(self.listing_path, MAX_READ_BYTES))
        except FileNotFoundError:
            return None
        if not isinstance(listing, dict):
            return None
        return {str(k): [str(n) for n in v] for k, v in listing.items() if isinstance(v, list)}


class RecordIndex:
    """This machine's list of records (`$XDG_STATE_HOME/evaldesk/records/`): where each lives,
    and its last known status, so an unfinished one is found at the next start."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or state_dir() / "records"

    def _path(self, record_id: str) -> Path:
        return self.root / f"{record_id}.json"

    def put(self, record: Record, location: Mapping[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        entry = {
            "id": record.id, "action": record.action, "target": record.target, "host": record.host,
            "experiment": record.experiment, "status": record.status, "created_at": record.created_at,
            "n_steps": len(record.plan.steps), "n_done": record.n_done, "location": dict(location),
        }
        write_atomic(self._path(record.id), dump_json(entry))

    def forget(self, record_id: str) -> None:
        """Drop an entry whose record never took effect (its write refused before any change)."""
        self._path(record_id).unlink(missing_ok=True)

    def get(self, record_id: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._path(record_id).read_bytes())
        except (FileNotFoundError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def all(self) -> list[dict[str, Any]]:
        if not self.root.exists():
            return []
        out = []
        for p in sorted(self.root.glob("*.json"), reverse=True):
            try:
                data = json.loads(p.read_bytes())
            except ValueError:
                continue
            if isinstance(data, dict):
                out.append(data)
        return out

    def unfinished(self) -> list[dict[str, Any]]:
        """Records a crash left applying, or a failure left half rolled back."""
        return [e for e in self.all() if e.get("status") in ("applying", "failed")]

    def find(self, prefix: str) -> dict[str, Any] | None:
        hits = [e for e in self.all() if str(e.get("id", "")).startswith(prefix)]
        return hits[0] if len(hits) == 1 else None


async def records_in(fs: JobFS, job_dir: str, problems: list[str] | None = None) -> list[Record]:
    """The records kept in a job dir's quarantine, newest first. One that cannot be read is
    skipped, and said in `problems` when given."""
    root = posixpath.join(job_dir, QUARANTINE_DIR)
    try:
        names = await fs.list_dir(root)
    except FileNotFoundError:
        return []
    except OSError as exc:
        if problems is not None:
            problems.append(f"cannot list {root}: {exc.strerror or exc}")
        return []
    out = []
    for name in sorted(names, reverse=True):
        store = RecordStore(fs, posixpath.join(root, name))
        try:
            out.append(await store.load())
        except FileNotFoundError:
            continue  # not a record dir (or one an undo is tidying away right now)
        except (OSError, ValueError) as exc:
            if problems is not None:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                problems.append(f"cannot read the record in {store.dir}: {why}")
            continue
    return out


async def aside_records(fs: JobFS, job_dir: str) -> list[Record]:
    """Records kept beside a job (resumes), newest first; unreadable ones skipped."""
    root = aside_root(job_dir)
    try:
        names = await fs.list_dir(root)
    except OSError:
        return []
    out = []
    for name in sorted(names, reverse=True):
        if name.startswith("."):
            continue
        try:
            out.append(await RecordStore(fs, posixpath.join(root, name)).load())
        except (OSError, ValueError):
            continue
    return out
