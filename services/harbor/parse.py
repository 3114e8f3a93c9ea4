"""The one parser of a Harbor trial: the bytes of its result.json (and config.json, while it runs
or where an older Harbor left the task out of the result) → a `Trial`, with DESIGN 3's validity
rule. It never raises on bad content: what cannot be read becomes an ERRORED trial with the
reason, and a malformed side field (a timestamp, a token count) never hides a reward. It also
turns a Trial into the record the parse cache keeps, and back (`encode`, `decode`).
"""

from __future__ import annotations

import json
import math
import sys
from datetime import UTC, datetime
from typing import Any, Self

import orjson

from services.core.failures import NO_REWARD_NOR_EXCEPTION, failure_class
from services.core.models import Trial, TrialStatus
from services.harbor.walk import Loc, Read, key_mtime

# bump when what a record holds, or how a file becomes one, changes: the parse cache then
# starts afresh (tests/services/harbor/test_parse.py keeps golden records of this version)
VERSION = 1

_intern = sys.intern
_EMPTY: dict[str, float] = {}
_SHARED: dict[tuple[str, float], dict[str, float]] = {}


class _Bad(Exception):
    """A field whose value has the wrong shape: read as absent, and said when nothing else is."""


def task_from_trial_name(trial_name: str) -> str:
    # Harbor names trial dirs f"{task_name[:32].rstrip('_-')}__{7 random chars}"
    head, sep, _ = trial_name.rpartition("__")
    return head if sep else trial_name


def finite(v: Any) -> float | None:
    """A finite number (not a bool), as a float; None for anything else."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def reward_of(rewards: dict[str, float]) -> float | None:
    """DESIGN 3: a trial is VALID iff its verifier's `reward` is a finite number."""
    return rewards.get("reward")


class _Doc:
    """A JSON object read leniently: each getter gives the value or None, and remembers the
    first field whose value had the wrong shape. `file` names the file in that problem; the
    objects within are read the same way (of the same class, naming the same file)."""

    __slots__ = ("file", "problem", "raw", "where")

    def __init__(self, raw: dict[str, Any], where: str = "", file: str = "result.json") -> None:
        self.raw, self.where, self.file = raw, where, file
        self.problem: str | None = None

    def _bad(self, key: str, what: str) -> None:
        if self.problem is None:
            self.problem = f"{self.file} field {self.where + key!r}: {what}"

    def obj(self, key: str) -> Self | None:
        v = self.raw.get(key)
        if v is None:
            return None
        if not isinstance(v, dict):
            self._bad(key, "not an object")
            return None
        return self.__class__(v, f"{self.where}{key}.", self.file)

    def text(self, key: str) -> str | None:
        v = self.raw.get(key)
        if v is None or isinstance(v, str):
            return v
        self._bad(key, "not a string")
        return None

    def whole(self, key: str) -> int | None:
        v = self.raw.get(key)
        if v is None or (isinstance(v, int) and not isinstance(v, bool)):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        self._bad(key, "not an integer")
        return None

    def number(self, key: str) -> float | None:
        v = self.raw.get(key)
        f = finite(v)
        if v is not None and f is None:
            self._bad(key, "not a finite number")
        return f

    def when(self, key: str) -> datetime | None:
        v = self.raw.get(key)
        if v is None:
            return None
        try:
            if isinstance(v, str):
                return datetime.fromisoformat(v)
            if isinstance(v, int | float) and not isinstance(v, bool):
                return datetime.fromtimestamp(v, UTC)
        except (ValueError, OverflowError, OSError):
            pass
        self._bad(key, "not a date and time")
        return None


def load_json(data: bytes) -> Any:
    """JSON as Python's own reader takes it: orjson, and where orjson refuses what `json` reads
    (NaN and Infinity literals, a lone surrogate escape), `json` itself. Raises ValueError."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            raise exc from None


def _share(rewards: dict[str, float]) -> dict[str, float]:
    # Trials never change their rewards: the common one-key dicts are shared, not made 100k times
    if not rewards:
        return _EMPTY
    if len(rewards) == 1:
        ((k, v),) = rewards.items()
        if not (v == 0.0 and math.copysign(1.0, v) < 0):
            shared = _SHARED.get((k, v))
            if shared is None and len(_SHARED) < 4096:
                shared = _SHARED[(k, v)] = {_intern(k): v}
            if shared is not None:
                return shared
    return rewards


def _name(v: str | None) -> str | None:
    return _intern(v) if v else v


def _config(data: bytes | None) -> _Doc | None:
    if not data:
        return None
    try:
        raw = load_json(data)
    except ValueError:
        return None
    return _Doc(raw) if isinstance(raw, dict) else None


def _task_of(cfg: _Doc | None) -> str | None:
    task = cfg.obj("task") if cfg else None
    if task is None:
        return None
    name, path = task.text("name"), task.text("path")
    if name:
        return name.rsplit("/", 1)[-1]
    if path:
        return path.rstrip("/").rsplit("/", 1)[-1] or None
    return None


def parse_trial(rel: str, dir_name: str, result: bytes | None, config: bytes | None,
                mtime: float | None, result_error: str | None = None) -> Trial:
    """The Trial of one trial dir from the bytes of its files. `result` None (and no
    `result_error`) means the trial is running."""
    cfg = _config(config)
    agent_cfg = cfg.obj("agent") if cfg else None
    trial_name = (cfg.text("trial_name") if cfg else None) or dir_name
    cfg_model = agent_cfg.text("model_name") if agent_cfg else None

    def errored(reason: str | None, status: TrialStatus = TrialStatus.errored) -> Trial:
        return Trial(trial_name, _intern(_task_of(cfg) or task_from_trial_name(trial_name)), rel, status,
                     parse_error=reason, mtime=mtime, model_name=_name(cfg_model),
                     agent_name=_name(agent_cfg.text("name") if agent_cfg else None))

    if result is None or result_error is not None:
        return errored(result_error, TrialStatus.errored if result_error is not None else TrialStatus.running)
    if not result.strip():
        return errored("result.json is empty")
    try:
        raw = load_json(result)
    except ValueError as exc:
        return errored(f"result.json is not valid JSON (half-written?): {exc}")
    if not isinstance(raw, dict):
        return errored(f"result.json holds a JSON {type(raw).__name__}, not an object")
    doc = _Doc(raw)
    listed = raw.get("step_results")
    if listed is not None and not isinstance(listed, list):
        doc._bad("step_results", "not a list")
        listed = None
    steps = [_Doc(s) for s in listed or () if isinstance(s, dict)]

    def first(key: str) -> _Doc | None:
        # a multi-step trial keeps its verifier result, exception and usage per step
        own = doc.obj(key)
        if own is not None or not steps:
            return own
        return next((s.obj(key) for s in steps if s.obj(key) is not None), None)

    rewards: dict[str, float] = {}
    verifier = doc.obj("verifier_result")
    if verifier is None or verifier.raw.get("rewards") is None:
        verifier = next((v for s in steps if (v := s.obj("verifier_result")) and v.raw.get("rewards")),
                        verifier)
    raw_rewards = verifier.obj("rewards") if verifier else None
    for key, value in (raw_rewards.raw if raw_rewards else {}).items():
        f = finite(value)
        if f is not None:
            rewards[str(key)] = f
    rewards = _share(rewards)
    reward = reward_of(rewards)
    raised = first("exception_info")
    exc_type = raised.text("exception_type") if raised else None
    usage = first("agent_result")
    info = doc.obj("agent_info")
    model_info = info.obj("model_info") if info else None
    problem = next((d.problem for d in (doc, verifier, raw_rewards, raised, usage, info, model_info)
                    if d is not None and d.problem), None)
    trial_name = doc.text("trial_name") or trial_name
    if trial_name == rel:
        trial_name = rel  # (one string for both: 100k of them stay as long as the console runs)
    return Trial(
        trial_name, _intern(doc.text("task_name") or _task_of(cfg) or task_from_trial_name(trial_name)), rel,
        TrialStatus.valid if reward is not None else TrialStatus.errored,
        reward=reward, rewards=rewards,
        exception_type=_name(exc_type), exception_message=raised.text("exception_message") if raised else None,
        failure_class=failure_class(exc_type),
        parse_error=None if reward is not None or exc_type else problem or NO_REWARD_NOR_EXCEPTION,
        started_at=doc.when("started_at"), finished_at=doc.when("finished_at"),
        n_input_tokens=usage.whole("n_input_tokens") if usage else None,
        n_cache_tokens=usage.whole("n_cache_tokens") if usage else None,
        n_output_tokens=usage.whole("n_output_tokens") if usage else None,
        cost_usd=usage.number("cost_usd") if usage else None,
        model_name=_name((model_info.text("name") if model_info else None) or cfg_model),
        agent_name=_name(info.text("name") if info else None),
        source=_name(doc.text("source")), mtime=mtime,
    )


def trial_of(loc: Loc, result: Read, config: Read) -> Trial:
    """The Trial of a located trial dir from its files as walk.read_trials gave them."""
    if loc.error is not None:
        return parse_trial(loc.rel, loc.name, None, None, None, loc.error)
    key = loc.rkey if loc.rkey is not None else loc.ckey
    finished = loc.rkey is not None
    return parse_trial(loc.rel, loc.name, result[0] if finished else None, config[0],
                       key_mtime(key) if key is not None and key >= 0 else None, result[1] if finished else None)


def exception_details(result: bytes | None) -> tuple[str | None, str | None, str | None]:
    """(type, message, traceback) of a result.json's exception, for the diagnose panel."""
    try:
        raw = load_json(result or b"")
    except ValueError:
        return None, None, None
    exc = _Doc(raw).obj("exception_info") if isinstance(raw, dict) else None
    if exc is None:
        return None, None, None
    return exc.text("exception_type"), exc.text("exception_message"), exc.text("exception_traceback")


# -- the parse cache's record: the Trial's fields in order, less what a scan derives ------------

_FIELDS = tuple(Trial.__dataclass_fields__)
_KEPT = tuple(i for i, f in enumerate(_FIELDS) if f not in ("path", "attempt", "copy_of"))
_AT = {f: _KEPT.index(i) for i, f in enumerate(_FIELDS) if i in _KEPT}
_DATES = (_AT["started_at"], _AT["finished_at"])
_STATUS = {s.value: s for s in TrialStatus}
_PATH, _ATTEMPT = _FIELDS.index("path"), _FIELDS.index("attempt")
_NAMES = tuple(_AT[f] for f in ("task_name", "exception_type", "failure_class", "model_name", "agent_name", "source"))


def encode(t: Trial) -> bytes | None:
    """The record of a Trial; None when it cannot be kept (a name that is not UTF-8)."""
    values = [getattr(t, _FIELDS[i]) for i in _KEPT]
    try:
        return orjson.dumps(values)
    except TypeError:  # a surrogate-escaped name
        return None


def decode(rel: str, data: bytes) -> Trial:
    """The Trial a record holds; raises ValueError (or KeyError, TypeError) for a bad record."""
    row = orjson.loads(data)
    if type(row) is not list or len(row) != len(_KEPT):
        raise ValueError("not a trial record")
    for i in _DATES:
        if row[i] is not None:
            row[i] = datetime.fromisoformat(row[i])
    row[_AT["status"]] = _STATUS[row[_AT["status"]]]
    row[_AT["rewards"]] = _share(row[_AT["rewards"]])
    for i in _NAMES:
        if row[i] is not None:
            row[i] = _intern(row[i])
    values: list[Any] = [None] * len(_FIELDS)
    for j, i in enumerate(_KEPT):
        values[i] = row[j]
    values[_PATH] = rel
    values[_ATTEMPT] = 1
    t = Trial(*values)
    if t.trial_name == rel:
        t.trial_name = rel  # one string for both
    return t
