"""A finished trial's cache record straight from its result.json, with nothing but the standard
library and orjson: `--batch audit` starts reading a job on a second core before pydantic and the
domain models load (services/harbor/early_read.py), and the scanner's own fast decoder
(services/harbor/records.py `fast_trial`) is built on the same `fast_values`, so the two agree
by construction (tests compare their records byte for byte).
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson

from services.core.failures import NO_REWARD_NOR_EXCEPTION, failure_class
from services.core.stamps import key_mtime, key_size

MAX_RESULT_BYTES = 64 * 1024 * 1024
# services.core.models.Trial's fields in order (a test holds them equal), and the record's: the
# cache leaves out what a scan derives (attempt, copy_of) and what it knows (path)
FIELDS: tuple[str, ...] = (
    "trial_name", "task_name", "path", "status", "reward", "rewards", "exception_type", "exception_message",
    "failure_class", "parse_error", "started_at", "finished_at", "n_input_tokens", "n_cache_tokens",
    "n_output_tokens", "cost_usd", "model_name", "agent_name", "source", "mtime", "attempt", "copy_of",
    "state_raw",
)
RECORD: tuple[str, ...] = tuple(f for f in FIELDS if f not in ("path", "attempt", "copy_of"))


def task_from_trial_name(trial_name: str) -> str:
    # Harbor names trial dirs f"{task_name[:32].rstrip('_-')}__{7 random chars}"
    head, sep, _ = trial_name.rpartition("__")
    return head if sep else trial_name


def read_file(path: str, key: int | None = None) -> tuple[bytes | None, str | None]:
    name = os.path.basename(path)
    try:
        if key is None or key < 0:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                # never open a fifo or device: the read would block the scan
                kind = "Is a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
                return None, f"{name} unreadable: {kind}"
            size = st.st_size
        else:
            size = key_size(key)
        if size > MAX_RESULT_BYTES:
            return None, f"{name} is larger than {MAX_RESULT_BYTES >> 20} MiB"
        # os.open/os.read: a third of what a buffered file object costs per small file
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # never wait on a fifo
        try:
            data = os.read(fd, size + 1)
            if len(data) > size:  # it grew since the stat: read the rest
                chunks = [data]
                while True:
                    more = os.read(fd, 1 << 20)
                    if not more:
                        break
                    chunks.append(more)
                    if sum(map(len, chunks)) > MAX_RESULT_BYTES:
                        return None, f"{name} is larger than {MAX_RESULT_BYTES >> 20} MiB"
                data = b"".join(chunks)
            return data, None
        finally:
            os.close(fd)
    except FileNotFoundError:
        if os.path.lexists(path):
            return None, f"{name} unreadable: a symlink to a missing file"
        return None, None
    except OSError as exc:
        return None, f"{name} unreadable: {exc.strerror or exc}"


_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})?")
_date = datetime.fromisoformat
_match = _DATE_RE.fullmatch


class Slow(Exception):
    """This file needs the pydantic path."""


def _d(v: Any) -> datetime | None:
    if v is None:
        return None
    if type(v) is not str or _match(v) is None:
        raise Slow
    try:
        return _date(v)
    except ValueError:
        raise Slow from None


def _s(v: Any) -> str | None:
    if v is None or type(v) is str:
        return v
    raise Slow


def _i(v: Any) -> int | None:
    if v is None or type(v) is int:
        return v
    raise Slow


def _f(v: Any) -> float | None:
    t = type(v)
    if v is None or t is float:
        return v
    if t is int:
        return float(v)
    raise Slow


def _obj(v: Any) -> dict[str, Any] | None:
    if v is None or type(v) is dict:
        return v
    raise Slow


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def fast_values(rel: str, dir_name: str, raw: dict[str, Any], mtime: float | None, intern: Callable[[str], str],
                share: Callable[[dict[str, float]], dict[str, float]], valid: str, errored: str) -> tuple[Any, ...]:
    """A Trial's values in `FIELDS` order from its result.json's dict, when every field Harbor's
    TrialResult declares has a shape the lenient pydantic mirror would take as is; raises `Slow`
    otherwise. `intern`, `share`, `valid` and `errored` let the caller share strings and reward
    dicts and name the status its own way."""
    g = raw.get
    _i(g("schema_version"))
    _s(g("trial_uri"))
    rv = g("reward_valid")
    if rv is not None and type(rv) is not bool:
        raise Slow
    if g("step_results") is not None:
        raise Slow
    task_name = _s(g("task_name"))
    trial_name = _s(g("trial_name"))
    source = _s(g("source"))
    started, finished = _d(g("started_at")), _d(g("finished_at"))
    ae = _obj(g("agent_execution"))
    if ae:
        _d(ae.get("started_at"))
        _d(ae.get("finished_at"))
    ai = _obj(g("agent_info"))
    model = agent_name = None
    if ai is not None:
        agent_name = _s(ai.get("name"))
        _s(ai.get("version"))
        mi = _obj(ai.get("model_info"))
        if mi is not None:
            model = _s(mi.get("name"))
            _s(mi.get("provider"))
    ar = _obj(g("agent_result"))
    n_in = n_cache = n_out = cost = None
    if ar is not None:
        n_in, n_cache, n_out = _i(ar.get("n_input_tokens")), _i(ar.get("n_cache_tokens")), _i(ar.get("n_output_tokens"))
        cost = _f(ar.get("cost_usd"))
    vr = _obj(g("verifier_result"))
    raw_rewards = _obj(vr.get("rewards")) if vr is not None else None
    ei = _obj(g("exception_info"))
    exc_type = exc_msg = None
    if ei is not None:
        exc_type, exc_msg = _s(ei.get("exception_type")), _s(ei.get("exception_message"))
        _s(ei.get("exception_traceback"))
        _d(ei.get("occurred_at"))

    rewards: dict[str, float] = {}
    for key, value in (raw_rewards or {}).items():
        f = _finite(value)
        if f is not None:
            rewards[str(key)] = f
    shared = share(rewards)
    reward = shared.get("reward")  # the shared dict's float: one object for all the 1.0s
    if reward is None and len(shared) == 1 and "reward" not in (raw_rewards or {}):
        reward = next(iter(shared.values()))
    own_name = trial_name or dir_name
    if own_name == rel:
        own_name = rel  # one string for both
    task = task_name or task_from_trial_name(dir_name)
    return (
        own_name, intern(task), rel,
        valid if reward is not None else errored,
        reward, shared,
        intern(exc_type) if exc_type else exc_type, exc_msg,
        failure_class(exc_type),
        None if reward is not None or exc_type else NO_REWARD_NOR_EXCEPTION,
        started, finished, n_in, n_cache, n_out, cost,
        intern(model) if model else None, intern(agent_name) if agent_name else agent_name,
        intern(source) if source else source,
        mtime, 1, None, None,
    )


def _same(v: Any) -> Any:
    return v


def _pick_record() -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    from operator import itemgetter

    return itemgetter(*(FIELDS.index(f) for f in RECORD))


_record_values = _pick_record()


_OPEN = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK  # (never wait on a fifo)


def early_record(job_fd: int, rel: str, name: str, rkey: int) -> bytes | None:
    """The cache record (records.py `encode`) of the finished trial `rel` of the job dir open as
    `job_fd`, whose result.json has key `rkey`; None when it is anything but the plain case (its
    size changed, it needs its config or the pydantic mirror, it cannot be read): the scanner
    reads that one itself. Paths are opened relative to the job dir (~1 µs less per trial)."""
    size = key_size(rkey)
    if size > MAX_RESULT_BYTES:
        return None
    try:
        fd = os.open(rel + "/result.json", _OPEN, dir_fd=job_fd)
    except OSError:
        return None
    try:
        rbytes = os.read(fd, size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(rbytes) != size or b'"task_name"' not in rbytes:
        return None
    mtime = key_mtime(rkey)
    try:
        st = os.stat(rel + "/config.json", dir_fd=job_fd)
        if stat.S_ISREG(st.st_mode):
            mtime = max(mtime, st.st_mtime_ns / 1e9)  # (as key_mtime reads a key's mtime)
    except OSError:
        pass
    try:
        raw = orjson.loads(rbytes)
        if type(raw) is not dict:
            return None
        return orjson.dumps(_record_values(fast_values(rel, name, raw, mtime or None, _same, _same, "valid",
                                                       "errored")))
    except (orjson.JSONDecodeError, Slow, TypeError):
        return None


