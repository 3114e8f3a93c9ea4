"""The audit replay: `--batch audit` of job dirs whose every input is unchanged prints what the
last such run printed, without loading the rest of evaldesk.

A cron job audits the same finished jobs every few minutes. The audit of a finished Harbor job
is a pure function of its files, evaldesk's code and its settings (services/audit/verdict.py
uses no clock for it), so the last run's output is exact as long as none of those changed.
What is compared, before anything but the standard library is imported:

- the command line, the working directory, the environment (hashed: secrets in it never reach
  the disk), the Python and the installed packages, and the stat keys of evaldesk's own modules;
- the config file and the baselines, and the write records this machine keeps;
- per job dir: the stat key of every trial's result.json (services/harbor/walk.py, the walk the
  scanner itself uses), of the job's own files, and of its quarantines.

A run is remembered only when it had nothing else to say: local Harbor job dirs, each one
finished (no running trial, no odd or unreadable file), no leaderboard, no problem, no
unfinished write; and only for output that is not a terminal. Anything else, `--no-cache`
included, runs the audit in full. The replay files live in `$XDG_CACHE_HOME/evaldesk/replay/`;
a corrupt, missing or unwritable one only costs the full run.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any, cast

from services.core.stamps import file_stamp, tree_stamp
from services.core.xdg import cache_dir

FORMAT = 1
MAX_FILES = 256  # replay files kept (least recently used go first)
STALE_S = 30 * 86400
# options that do not change what a replayable audit reads or prints beyond the key (name → takes a value)
_OPTIONS = {"--batch": True, "--format": True, "--baseline": True, "--config": True, "--read-only": False}
# shell bookkeeping that changes between two runs of the same command
_VOLATILE_ENV = frozenset({"_", "OLDPWD", "PWD", "SHLVL"})
_ROOT = Path(__file__).resolve().parent.parent
_PACKAGES = ("services", "tui", "widgets")


def candidate(argv: list[str], stdout: IO[str]) -> bool:
    """Whether this command line may be answered by a replay (and so may leave one)."""
    if stdout.isatty():
        return False
    command = None
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("-"):
            if "://" in token:
                return False  # a remote source: its state is not on this disk
            i += 1
            continue
        name, eq, value = token.partition("=")
        if name not in _OPTIONS:
            return False
        if _OPTIONS[name] and not eq:
            i += 1
            if i >= len(argv):
                return False
            value = argv[i]
        if name == "--batch":
            command = value
        elif name == "--format" and value not in ("json", "jsonl", "table"):
            return False
        i += 1
    return command == "audit"


def replay_path(argv: list[str]) -> Path:
    return cache_dir() / "replay" / f"{static_key(argv)}.json"


def static_key(argv: list[str]) -> str:
    h = hashlib.blake2b(digest_size=20)
    h.update(json.dumps([FORMAT, sys.version, sys.executable, os.getcwd(), argv,
                         _code_stamp(), _packages_stamp()]).encode("utf-8", "surrogateescape"))
    for name in sorted(os.environ):
        if name not in _VOLATILE_ENV and not name.startswith("SSH_"):
            h.update(f"{name}\0{os.environ[name]}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _code_stamp() -> str:
    h = hashlib.blake2b(digest_size=16)
    stack = [str(_ROOT / p) for p in _PACKAGES]
    while stack:
        top = stack.pop()
        try:
            entries = sorted(os.scandir(top), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    stack.append(e.path)
            elif e.name.endswith((".py", ".tcss")):
                st = e.stat()
                h.update(f"{e.path}\0{st.st_mtime_ns}\0{st.st_size}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _packages_stamp() -> str:
    # what is installed, by name and version (the dist-info folder names) in every site dir on the
    # import path; evaldesk's own code is _code_stamp's, and other folders (the working directory)
    # do not count
    h = hashlib.blake2b(digest_size=16)
    for p in sys.path:
        if os.path.basename(p) in ("site-packages", "dist-packages"):
            try:
                names = sorted(n for n in os.listdir(p) if n.endswith((".dist-info", ".egg-info", ".pth")))
            except OSError:
                continue
            h.update("\0".join([p, *names]).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


# -- what is watched ---------------------------------------------------------------------------

STAMPS: dict[str, Callable[[str], str]] = {"file": file_stamp, "tree": tree_stamp}


def stamper(kind: str) -> Callable[[str], str]:
    """A watch's stamp function: a file, a tree, or a backend's own ("module:function", named
    by its source, so that this module imports no backend)."""
    found = STAMPS.get(kind)
    if found is not None:
        return found
    module, _, name = kind.partition(":")
    if not module.startswith("services.") or not name:
        raise ValueError(f"not a stamp: {kind!r}")
    # only what a module declares a stamp is ever called (a replay file is data, not code)
    found_module = importlib.import_module(module)
    if name not in getattr(found_module, "REPLAY_STAMPS", ()):
        raise ValueError(f"not a stamp: {kind!r}")
    return cast(Callable[[str], str], getattr(found_module, name))


# -- the fast path -----------------------------------------------------------------------------

def replay(argv: list[str], out: IO[str], err: IO[str]) -> int | None:
    """Print the remembered audit and return its exit code; None when it cannot be replayed."""
    if not candidate(argv, out):
        return None
    try:
        path = replay_path(argv)
        memo = json.loads(path.read_bytes())
        if memo.get("format") != FORMAT:
            return None
        # cheap watches first: a changed config is found before 20k stats
        for kind, where, stamp in memo["watch"]:
            if stamper(kind)(where) != stamp:
                return None
        text, code, at = str(memo["out"]), int(memo["code"]), float(memo["at"])
    except (OSError, ValueError, KeyError, TypeError, ImportError, AttributeError):
        return None
    reconfigure = getattr(out, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")
    out.write(text)
    out.flush()
    if err.isatty():
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
        err.write(f"evaldesk: nothing the audit reads changed since {when}; printed that run's audit "
                  "(--no-cache runs it again)\n")
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: kept when the folder is trimmed
    return code


# -- remembering a run -------------------------------------------------------------------------

class Tee:
    """The output stream, with what went through it kept for the replay file."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return int(self._stream.write(text) or 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Counted:
    """The error stream, counting what was written to it (a run with anything to say there is
    not remembered: a replay would not say it)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.lines = 0

    def write(self, text: str) -> int:
        self.lines += 1
        return int(self._stream.write(text) or 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Recorder:
    """What a full run of a replayable audit collects on the way, to leave a replay file."""

    def __init__(self, argv: list[str], watch: list[tuple[str, str, str]], sources: Iterable[str]) -> None:
        from services.remediations.records import QUARANTINE_DIR, aside_root

        self.argv = argv
        # taken before anything is read: a change during the run makes the file stale, never wrong
        self.watch = watch
        self.pre: dict[str, list[tuple[str, str, str]]] = {}
        for s in sources:
            job = os.path.abspath(os.path.expanduser(s))
            # where the job's write records are kept: inside it, and beside it (a resume's)
            self.pre[job] = [("tree", q, tree_stamp(q)) for q in (os.path.join(job, QUARANTINE_DIR), aside_root(job))]
        self.jobs: dict[str, tuple[str, str] | None] = {}  # job dir → (stamper, stamp); None: not replayable
        self.settled = True  # no unfinished write, no leaderboard: cleared by whoever finds one

    def job(self, job_dir: str, stamped: tuple[str, str] | None) -> None:
        """What the source that read `job_dir` says will tell it unchanged (None: nothing can)."""
        self.jobs[job_dir] = stamped

    def remember(self, text: str, code: int) -> bool:
        if not self.settled or not self.jobs or code not in (0, 1):
            return False
        watch = list(self.watch)
        jobs: list[tuple[str, str, str]] = []
        for job, stamped in self.jobs.items():
            pre = self.pre.get(job)
            if stamped is None or pre is None:  # (a folder of jobs, or a job that is not settled)
                return False
            watch += pre
            jobs.append((stamped[0], job, stamped[1]))
        if any(s in ("unwatchable",) for _, _, s in watch):
            return False
        memo = {"format": FORMAT, "at": time.time(), "code": code, "out": text, "watch": watch + jobs}
        return _write(replay_path(self.argv), json.dumps(memo).encode("utf-8", "surrogateescape"))


def pre_watch(config_file: str, baselines: str, records: str) -> list[tuple[str, str, str]]:
    return [("file", config_file, file_stamp(config_file)),
            ("file", baselines, file_stamp(baselines)) if os.path.isfile(baselines)
            else ("tree", baselines, tree_stamp(baselines)),
            ("tree", records, tree_stamp(records))]


def _write(path: Path, data: bytes) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".replay-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)  # whole or not at all, whoever reads it meanwhile
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _trim(path.parent)
        return True
    except OSError:
        return False  # a read-only or full disk: the next run is a full one, that is all


def _trim(folder: Path) -> None:
    with contextlib.suppress(OSError):
        now = time.time()
        files = []
        for e in os.scandir(folder):
            if e.name.endswith(".json"):
                st = e.stat()
                if now - st.st_mtime > STALE_S:
                    os.unlink(e.path)
                else:
                    files.append((st.st_mtime, e.path))
        for _, p in sorted(files)[: max(0, len(files) - MAX_FILES)]:
            os.unlink(p)
