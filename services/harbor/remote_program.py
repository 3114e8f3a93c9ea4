"""One round trip per scan of Harbor job dirs on a remote host.

`REMOTE_PROGRAM` is sent on stdin to the remote `python3` (3.6 or newer, standard library
only) through a one-line bootstrap; nothing is written on the remote. The request (roots and
what the client already holds) follows the program on stdin as JSON, so remote paths travel
as data and never through a shell string.

The remote program mirrors services/sources/harbor.py exactly: the same job-dir detection,
the same trial discovery (depth-1 trial dirs, staged copies one level deeper under a
non-trial folder, symlinks never followed, `.evaldesk-quarantine` and hidden dirs skipped),
the same (mtime_ns, size) keys and the same error wording, so the client can feed the bytes
through `parse_trial` and `assemble_experiment` and get the figures a local scan gets.

Incremental protocol. For each job it already holds, the client sends per-bucket digests of
its trials' fingerprints (a trial's fingerprint is its path plus the key of result.json, or
of config.json while result.json is missing — the local scanner's reuse rule). A trial's
bucket comes from a hash of its path. The remote recomputes the digests and sends the file
bytes of every trial in a bucket whose digest differs; an unchanged job costs only the
digests (about half a byte per trial up, a few hundred bytes down). Job-level files are sent
only when their key changed. The reply is a zlib stream of compact JSON lines.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from services.core.models import Experiment, Trial
from services.core.policy import Policy
from services.harbor.assemble import assemble_experiment
from services.harbor.files import parse_trial

PROTOCOL_VERSION = 1
FileKey = tuple[int, int] | None

REMOTE_PROGRAM = r'''
import base64, hashlib, json, os, stat, sys, time, zlib

QUAR = ".evaldesk-quarantine"
MAXB = 64 * 1024 * 1024
JOB_KEYS = {"n_total_trials", "stats", "n_attempts", "agents", "datasets", "jobs_dir", "job_name"}
TRIAL_KEYS = {"trial_name", "task_name", "task", "trial_uri"}
JOB_FILES = ("eval_config.json", "config.json", "result.json", "meta.env")

_z = zlib.compressobj(6)
_out = sys.stdout.buffer
_pending = []
_pending_n = [0]
_sent = [0]
_last_flush = [time.time()]


def emit(obj):
    line = json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n"
    _pending.append(line)
    _pending_n[0] += len(line)
    if _pending_n[0] > 262144 or time.time() - _last_flush[0] > 0.25:
        flush()


def flush(final=False):
    data = _z.compress(b"".join(_pending))
    del _pending[:]
    _pending_n[0] = 0
    data += _z.flush(zlib.Z_FINISH if final else zlib.Z_SYNC_FLUSH)
    _sent[0] += len(data)
    _out.write(data)
    _out.flush()
    _last_flush[0] = time.time()


def fkey(path):
    try:
        st = os.stat(path)
    except OSError:
        return [-2, -2] if os.path.lexists(path) else None
    if not stat.S_ISREG(st.st_mode):
        return [-1, -1]
    return [st.st_mtime_ns, st.st_size]


def read(path, key=None):
    try:
        if key is None or key[0] < 0:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                kind = "Is a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
                return None, "%s unreadable: %s" % (os.path.basename(path), kind)
            size = st.st_size
        else:
            size = key[1]
        if size > MAXB:
            return None, "%s is larger than %d MiB" % (os.path.basename(path), MAXB >> 20)
        with open(path, "rb") as fh:
            return fh.read(), None
    except FileNotFoundError:
        if os.path.lexists(path):
            return None, "%s unreadable: a symlink to a missing file" % os.path.basename(path)
        return None, None
    except OSError as exc:
        return None, "%s unreadable: %s" % (os.path.basename(path), exc.strerror or exc)


def blob(data):
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode("ascii")}


def is_trial_dir(path):
    return os.path.lexists(os.path.join(path, "config.json")) or os.path.lexists(
        os.path.join(path, "result.json"))


def trial_key(path):
    result = path + "/result.json"
    try:
        st = os.stat(result)
    except PermissionError as exc:
        return True, [-3, -3], "trial dir unreadable: %s" % (exc.strerror or exc)
    except OSError:
        if os.path.lexists(result):
            return True, [-2, -2], None
        return os.path.lexists(path + "/config.json"), None, None
    if not stat.S_ISREG(st.st_mode):
        return True, [-1, -1], None
    return True, [st.st_mtime_ns, st.st_size], None


def unreadable_reason(path):
    try:
        it = os.scandir(path)
        next(it, None)
        it.close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def json_keys(path):
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return set()
        with open(path, "rb") as fh:
            data = json.loads(fh.read(4 * 1024 * 1024).decode("utf-8"))
        return set(data) if isinstance(data, dict) else set()
    except (OSError, ValueError):
        return set()


def looks_like_job_dir(path):
    keys = json_keys(os.path.join(path, "result.json")) | json_keys(os.path.join(path, "config.json"))
    if keys & JOB_KEYS and not keys & TRIAL_KEYS:
        return True
    if keys:
        return False
    try:
        for entry in os.scandir(path):
            if entry.is_dir(follow_symlinks=False) and is_trial_dir(entry.path):
                child = json_keys(os.path.join(entry.path, "config.json")) | json_keys(
                    os.path.join(entry.path, "result.json"))
                return not (child & JOB_KEYS and not child & TRIAL_KEYS)
    except OSError:
        return False
    return False


def find_job_dirs(root, unreadable):
    why = unreadable_reason(root)
    if why is not None:
        raise OSError(why)
    if looks_like_job_dir(root):
        return [root]
    jobs = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        if looks_like_job_dir(entry.path):
            jobs.append(entry.path)
            continue
        why = unreadable_reason(entry.path)
        if why is not None:
            unreadable.append([entry.path, why])
    return jobs


def discover(job_dir, problems):
    real_job = os.path.realpath(job_dir)
    try:
        top = sorted(os.scandir(job_dir), key=lambda e: e.name)
    except OSError as exc:
        problems.append("cannot list %s: %s" % (job_dir, exc.strerror or exc))
        return
    for entry in top:
        if entry.name == QUAR:
            continue
        hidden = entry.name.startswith(".")
        if hidden and not (entry.is_dir(follow_symlinks=False) and is_trial_dir(entry.path)):
            continue
        if entry.is_symlink():
            target = os.path.realpath(entry.path)
            if not (target + os.sep).startswith(real_job + os.sep):
                problems.append("%s: symlink to %s, outside the job dir; not followed" % (entry.name, target))
            else:
                problems.append("%s: symlink inside the job dir; not followed (counted once)" % entry.name)
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        is_trial, rkey, err = trial_key(entry.path)
        if is_trial:
            yield entry.name, entry.path, entry.name, rkey, err
            continue
        try:
            inner = sorted(os.scandir(entry.path), key=lambda e: e.name)
        except OSError:
            continue
        for sub in inner:
            if sub.is_symlink():
                problems.append("%s/%s: symlink; not followed" % (entry.name, sub.name))
                continue
            if sub.is_dir(follow_symlinks=False):
                is_trial, rkey, err = trial_key(sub.path)
                if is_trial:
                    yield entry.name + "/" + sub.name, sub.path, sub.name, rkey, err


def fingerprint(rel, kind, key):
    text = "%s\0%s\0%s" % (rel, kind, "-" if key is None else "%d:%d" % (key[0], key[1]))
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).digest()


def bucket_of(rel, nb):
    h = hashlib.blake2b(rel.encode("utf-8", "surrogateescape"), digest_size=4).digest()
    return int.from_bytes(h, "big") % nb


def digest(fps):
    return hashlib.blake2b(b"".join(sorted(fps)), digest_size=4).digest()


def job_file_entry(path, name, known, problems=None):
    key = fkey(path)
    entry = {"k": key}
    if key is not None and known.get(name) == key:
        entry["same"] = 1
        return entry, None
    data, err = read(path)
    entry["d"] = blob(data)
    if err:
        entry["e"] = err
    return entry, data


def scan_job(job_dir, have):
    problems = []
    locs = list(discover(job_dir, problems))
    nb = int(have.get("nb") or 0)
    dig = base64.b64decode(have["dig"]) if nb else b""
    known_files = have.get("files") or {}
    files = {}
    for name in JOB_FILES:
        entry, data = job_file_entry(os.path.join(job_dir, name), name, known_files)
        files[name] = entry
    ev = files["eval_config.json"]
    ev_missing = ev.get("d") is None and not ev.get("same")
    if ev.get("same") and known_files.get("eval_config.json:has") is False:
        ev_missing = True
    if ev_missing:
        cfg_dir = os.path.join(job_dir, "configs")
        if os.path.isdir(cfg_dir):
            for name in sorted(os.listdir(cfg_dir)):
                if name.endswith("_eval_config.json"):
                    entry, _ = job_file_entry(os.path.join(cfg_dir, name), "configs/" + name, known_files)
                    entry.pop("e", None)
                    entry["name"] = "configs/" + name
                    files["configs"] = entry
                    break
    rows = []
    buckets = {}
    errs = {}
    for rel, path, name, rkey, err in locs:
        if err is not None:
            errs[rel] = err
            problems.append("%s: %s; counted as errored" % (rel, err))
        ckey = None
        if rkey is None:
            ckey = fkey(os.path.join(path, "config.json"))
            fp = fingerprint(rel, "c", ckey)
        else:
            fp = fingerprint(rel, "r", rkey)
        b = bucket_of(rel, nb) if nb else 0
        buckets.setdefault(b, []).append(fp)
        rows.append((rel, path, name, rkey, ckey, b))
    stale = set()
    if nb:
        for b in range(nb):
            if digest(buckets.get(b, [])) != dig[4 * b: 4 * b + 4]:
                stale.add(b)
    emit({"t": "job", "path": job_dir, "n": len(locs), "nb": nb, "stale": sorted(stale) if nb else None,
          "problems": problems, "files": files})
    for rel, path, name, rkey, ckey, b in rows:
        if nb and b not in stale:
            continue
        if rkey is not None:
            ckey = fkey(path + "/config.json")
        row = {"t": "tr", "rel": rel, "name": name, "rk": rkey, "ck": ckey}
        rdata = None
        if rel in errs:
            row["re"] = errs[rel]
        elif rkey is not None:
            rdata, err = read(os.path.join(path, "result.json"), rkey)
            row["r"] = blob(rdata)
            if err:
                row["re"] = err
        # a finished trial names itself and its task in result.json; its config is not needed
        if ckey is not None and (rdata is None or b'"task_name"' not in rdata):
            data, _ = read(os.path.join(path, "config.json"), ckey)
            row["c"] = blob(data)
        emit(row)


def main():
    req = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    started = time.time()
    emit({"t": "hello", "v": 1, "py": sys.version.split()[0], "now": started})
    have_jobs = req.get("jobs") or {}
    for root in req["roots"]:
        full = os.path.abspath(os.path.expanduser(root))
        if not os.path.isdir(full):
            emit({"t": "root", "root": root, "abs": full,
                  "err": "no such directory" if not os.path.exists(full) else "not a directory"})
            continue
        unreadable = []
        try:
            jobs = find_job_dirs(full, unreadable)
        except OSError as exc:
            emit({"t": "root", "root": root, "abs": full, "err": "cannot read: %s" % (exc.strerror or exc)})
            continue
        emit({"t": "root", "root": root, "abs": full, "jobs": jobs, "unreadable": unreadable})
        for job in jobs:
            scan_job(job, have_jobs.get(job) or {})
    emit({"t": "done", "seconds": time.time() - started})
    flush(final=True)


main()
'''

# Reads the program's length, then the program, from stdin; the request follows it.
BOOTSTRAP = (
    "import sys,zlib;n=int(sys.stdin.buffer.readline());"
    "exec(compile(zlib.decompress(sys.stdin.buffer.read(n)),'<evaldesk-scan>','exec'))"
)
_PROGRAM_Z = zlib.compress(REMOTE_PROGRAM.encode("utf-8"), 9)

PYTHON_MISSING_RC = 127


def remote_command(python: str = "python3") -> str:
    import shlex

    return f"{shlex.quote(python)} -c {shlex.quote(BOOTSTRAP)}"


def _fingerprint(rel: str, kind: str, key: FileKey) -> bytes:
    text = "{}\0{}\0{}".format(rel, kind, "-" if key is None else f"{key[0]}:{key[1]}")
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).digest()


def _bucket_of(rel: str, nb: int) -> int:
    h = hashlib.blake2b(rel.encode("utf-8", "surrogateescape"), digest_size=4).digest()
    return int.from_bytes(h, "big") % nb


def _digest(fps: list[bytes]) -> bytes:
    return hashlib.blake2b(b"".join(sorted(fps)), digest_size=4).digest()


def _n_buckets(n: int) -> int:
    # Up to eight trials per bucket: a changed trial costs re-sending its few neighbours, an
    # unchanged job about half a byte per trial upstream (< 1% of what a cold read brings down).
    nb = 1
    while nb * 8 < n and nb < 65536:
        nb *= 2
    return nb


def _key(raw: Any) -> FileKey:
    if raw is None:
        return None
    return (int(raw[0]), int(raw[1]))


def _unblob(raw: Any) -> bytes | None:
    if raw is None:
        return None
    if isinstance(raw, dict):
        return base64.b64decode(raw["b64"])
    return str(raw).encode("utf-8")


@dataclass
class CachedTrial:
    rel: str
    name: str
    result_key: FileKey
    config_key: FileKey
    trial: Trial

    @property
    def fingerprint(self) -> bytes:
        if self.result_key is not None:
            return _fingerprint(self.rel, "r", self.result_key)
        return _fingerprint(self.rel, "c", self.config_key)


@dataclass
class CachedFile:
    key: FileKey
    data: bytes | None
    error: str | None
    name: str = ""


@dataclass
class JobCache:
    path: str
    trials: dict[str, CachedTrial] = field(default_factory=dict)
    files: dict[str, CachedFile] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    n_reported: int = 0


class ProtocolError(Exception):
    """The remote reply does not follow the protocol (truncated, garbled, wrong version)."""


@dataclass
class ScanResult:
    roots: dict[str, list[str]] = field(default_factory=dict)
    root_errors: dict[str, str] = field(default_factory=dict)
    remote_seconds: float = 0.0
    python: str = ""
    trials_sent: int = 0
    files_sent: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, why) under a root


class RemoteScanClient:
    """Holds what earlier scans received and builds each request and decodes each reply."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.jobs: dict[str, JobCache] = {}

    def request_bytes(self, roots: list[str]) -> bytes:
        """Program + request, ready for the bootstrap's stdin."""
        jobs: dict[str, Any] = {}
        for path, cache in self.jobs.items():
            nb = _n_buckets(len(cache.trials))
            groups: list[list[bytes]] = [[] for _ in range(nb)]
            for ct in cache.trials.values():
                groups[_bucket_of(ct.rel, nb)].append(ct.fingerprint)
            dig = b"".join(_digest(g) for g in groups)
            files: dict[str, Any] = {}
            for name, cf in cache.files.items():
                if cf.key is not None and cf.error is None:
                    files[cf.name or name] = list(cf.key)
            ev = cache.files.get("eval_config.json")
            files["eval_config.json:has"] = bool(ev and ev.data is not None)
            jobs[path] = {"nb": nb, "dig": base64.b64encode(dig).decode("ascii"), "files": files}
        body = {"v": PROTOCOL_VERSION, "roots": roots, "jobs": jobs}
        try:
            req = orjson.dumps(body)
        except TypeError:  # a path that is not UTF-8 travels as a \udcXX escape, read back as its bytes
            import json

            req = json.dumps(body).encode("ascii")
        return str(len(_PROGRAM_Z)).encode() + b"\n" + _PROGRAM_Z + req

    def decode(self, stream: bytes, progress: Callable[[int, str], None] | None = None) -> ScanResult:
        """Apply one complete reply to the cache."""
        z = zlib.decompressobj()
        try:
            raw = z.decompress(stream)
        except zlib.error as exc:
            raise ProtocolError(f"reply is not a valid zlib stream: {exc}") from None
        if not z.eof:
            raise ProtocolError("reply ended early (connection dropped mid-scan?)")
        out = ScanResult()
        seen_jobs: set[str] = set()
        job: JobCache | None = None
        stale: set[int] | None = None
        received: set[str] = set()
        nb = 0
        done = False
        for n, line in enumerate(raw.splitlines()):
            if not line:
                continue
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError:
                import json

                try:
                    msg = json.loads(line.decode("utf-8", "surrogateescape"))
                except ValueError:
                    raise ProtocolError(f"reply line {n + 1} is not JSON") from None
            t = msg.get("t")
            if t == "hello":
                if msg.get("v") != PROTOCOL_VERSION:
                    raise ProtocolError(f"remote program speaks version {msg.get('v')}")
                out.python = str(msg.get("py", ""))
            elif t == "root":
                if "err" in msg:
                    out.root_errors[msg["abs"]] = msg["err"]
                else:
                    out.roots[msg["abs"]] = list(msg["jobs"])
                    out.unreadable += [(str(p), str(why)) for p, why in msg.get("unreadable") or ()]
            elif t == "job":
                self._finish_job(job, stale, nb, received)
                path = msg["path"]
                seen_jobs.add(path)
                job = self.jobs.get(path)
                nb = int(msg.get("nb") or 0)
                if job is None or not nb:
                    job = self.jobs[path] = JobCache(path)
                    stale = None
                else:
                    stale = set(msg.get("stale") or [])
                received = set()
                job.problems = list(msg.get("problems") or [])
                job.n_reported = int(msg["n"])
                self._apply_files(job, msg.get("files") or {})
                if progress:
                    progress(len(seen_jobs), f"scanned {path}")
            elif t == "tr":
                if job is None:
                    raise ProtocolError("trial line before any job line")
                rel = msg["rel"]
                received.add(rel)
                rkey, ckey = _key(msg.get("rk")), _key(msg.get("ck"))
                old = job.trials.get(rel)
                if old is not None and old.result_key == rkey and (rkey is not None or old.config_key == ckey):
                    continue
                rbytes = _unblob(msg.get("r"))
                cbytes = _unblob(msg.get("c"))
                mtime = max((k[0] for k in (rkey, ckey) if k is not None and k[0] >= 0), default=0) / 1e9 or None
                trial = parse_trial(rel, msg["name"], rbytes, cbytes, mtime, msg.get("re"))
                job.trials[rel] = CachedTrial(rel, msg["name"], rkey, ckey, trial)
                out.trials_sent += 1
            elif t == "done":
                out.remote_seconds = float(msg.get("seconds") or 0.0)
                done = True
        self._finish_job(job, stale, nb, received)
        if not done:
            raise ProtocolError("reply has no end marker")
        for path in set(self.jobs) - seen_jobs:
            del self.jobs[path]
        return out

    def _finish_job(self, job: JobCache | None, stale: set[int] | None, nb: int, received: set[str]) -> None:
        if job is None:
            return
        if stale:
            for rel in [r for r in job.trials if r not in received and _bucket_of(r, nb) in stale]:
                del job.trials[rel]
        if len(job.trials) != job.n_reported:
            # A digest collision or a protocol slip: forget this job so the next scan is cold.
            n_have = len(job.trials)
            del self.jobs[job.path]
            raise ProtocolError(f"{job.path}: expected {job.n_reported} trials, assembled {n_have}")

    @staticmethod
    def _apply_files(job: JobCache, files: dict[str, Any]) -> None:
        fresh: dict[str, CachedFile] = {}
        for name, entry in files.items():
            key = _key(entry.get("k"))
            label = entry.get("name", name)
            prev = job.files.get(name)
            if entry.get("same") and prev is not None and prev.name == label:
                fresh[name] = prev
                continue
            fresh[name] = CachedFile(key, _unblob(entry.get("d")), entry.get("e"), label)
        job.files = fresh

    def experiment(self, path: str, source: str, source_label: str) -> Experiment:
        """The Experiment for one job dir, built exactly as the local scanner builds it."""
        job = self.jobs[path]
        problems = list(job.problems)

        def data(name: str, report: bool = True) -> bytes | None:
            cf = job.files.get(name)
            if cf is None:
                return None
            if cf.error and report:
                problems.append(cf.error)
            return cf.data

        eval_cfg = data("eval_config.json")
        if eval_cfg is None:
            eval_cfg = data("configs", report=False)
        config_bytes = data("config.json")
        result_bytes = data("result.json")
        env_bytes = data("meta.env")
        ordered = sorted(job.trials.values(), key=lambda c: tuple(c.rel.split("/")))
        trials = [c.trial.model_copy() for c in ordered]
        return assemble_experiment(
            job_id=path.rstrip("/").rsplit("/", 1)[-1] or path,
            path=path,
            source=source,
            source_label=source_label,
            trials=trials,
            policy=self.policy,
            config_bytes=config_bytes,
            result_bytes=result_bytes,
            eval_config_bytes=eval_cfg,
            env_bytes=env_bytes,
            problems=problems,
        )
