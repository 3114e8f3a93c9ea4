"""The one parser of a Harbor trial: the bytes of its result.json (and config.json, while it runs
or where an older Harbor left the task out of the result) → a `Trial`, with DESIGN 3's validity
rule. It never raises on bad content: what cannot be read becomes an ERRORED trial with the
reason, and a malformed side field (a timestamp, a token count) never hides a reward. It also
turns a Trial into the record the parse cache keeps, and back (`encode`, `decode`).
"""

from __future__ import annotations

import functools
import json
import math
import operator
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Self, TypedDict, TypeVar

import orjson

from services.core.failures import NO_REWARD_NOR_EXCEPTION, failure_class
from services.core.models import Trial, TrialStatus
from services.harbor.walk import Loc, Read, key_mtime

# bump when what a record holds, or how a file becomes one, changes: the parse cache then
# starts afresh (tests/services/harbor/test_parse.py keeps golden records of this version)
VERSION = 1

_intern = sys.intern
_T = TypeVar("_T")
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
    if type(v) is float:
        return v if v - v == 0.0 else None  # (inf - inf and nan - nan are nan)
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


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _whole(v: Any) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return int(v) if isinstance(v, float) and v.is_integer() else None


def _when(v: Any) -> datetime | None:
    try:
        if isinstance(v, str):
            return datetime.fromisoformat(v)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return datetime.fromtimestamp(v, UTC)
    except (ValueError, OverflowError, OSError):
        pass
    return None


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

    def _judged(self, key: str, judge: Callable[[Any], _T | None], what: str) -> _T | None:
        v = self.raw.get(key)
        got = judge(v)
        if v is not None and got is None:
            self._bad(key, what)
        return got

    def text(self, key: str) -> str | None:
        return self._judged(key, _text, "not a string")

    def whole(self, key: str) -> int | None:
        return self._judged(key, _whole, "not an integer")

    def number(self, key: str) -> float | None:
        return self._judged(key, finite, "not a finite number")

    def when(self, key: str) -> datetime | None:
        return self._judged(key, _when, "not a date and time")


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


# The fields parse_trial reads, and nothing else: a real result.json also holds the trial's whole
# config, and may hold a step's token ids, which need not become Python objects. Values are taken
# as they are (the lenient reader judges them); only the nesting is a shape.
class _Exception(TypedDict, total=False):
    exception_type: Any
    exception_message: Any


class _Verifier(TypedDict, total=False):
    rewards: Any


class _Usage(TypedDict, total=False):
    n_input_tokens: Any
    n_cache_tokens: Any
    n_output_tokens: Any
    cost_usd: Any


class _Model(TypedDict, total=False):
    name: Any


class _Agent(TypedDict, total=False):
    name: Any
    model_info: _Model | None


class _Step(TypedDict, total=False):
    verifier_result: _Verifier | None
    exception_info: _Exception | None
    agent_result: _Usage | None


class _Result(_Step, total=False):  # (a trial's own verifier result, exception and usage, or its steps')
    task_name: Any
    trial_name: Any
    source: Any
    started_at: Any
    finished_at: Any
    agent_info: _Agent | None
    step_results: list[_Step] | None


@functools.cache
def _result_reader() -> tuple[Callable[[bytes], Any], type[Exception]]:
    import msgspec  # (imported on the first file parsed: a run the parse cache answers never needs it)

    return msgspec.json.Decoder(_Result).decode, msgspec.MsgspecError


def load_result(data: bytes) -> Any:
    """A result.json as parse_trial reads it: the fields it reads, where the document has their
    nesting; otherwise the whole document (load_json), for the lenient reader to say what is odd."""
    decode, failed = _result_reader()
    try:
        return decode(data)
    except failed:
        return load_json(data)


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


def _odd(bad: list[str], field: str, what: str) -> None:
    bad.append(f"result.json field {field!r}: {what}")


def _per_step(own: dict[str, Any] | None, steps: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    # a multi-step trial keeps its verifier result, exception and usage per step
    if own is not None or not steps:
        return own
    return next((v for s in steps if type(v := s.get(key)) is dict), None)


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
        raw = load_result(result)
    except ValueError as exc:
        return errored(f"result.json is not valid JSON (half-written?): {exc}")
    if not isinstance(raw, dict):
        return errored(f"result.json holds a JSON {type(raw).__name__}, not an object")
    # An object field of the wrong shape is read as absent. The first such field is the reason a
    # trial with neither a reward nor an exception gives: the result's own fields first (`odd`),
    # then those within them (`inner`); a step's odd fields are passed over.
    odd: list[str] = []
    inner: list[str] = []
    got: dict[str, Any] = {}
    for key in ("step_results", "verifier_result", "exception_info", "agent_result", "agent_info"):
        v = raw.get(key)
        if v is not None and type(v) is not (list if key == "step_results" else dict):
            _odd(odd, key, "not a list" if key == "step_results" else "not an object")
            v = None
        got[key] = v
    steps: list[dict[str, Any]] = [s for s in got["step_results"] or () if type(s) is dict]
    verifier: dict[str, Any] | None = got["verifier_result"]
    if verifier is None or verifier.get("rewards") is None:
        verifier = next((v for s in steps if type(v := s.get("verifier_result")) is dict and v.get("rewards")),
                        verifier)
    raw_rewards = verifier.get("rewards") if verifier else None
    if raw_rewards is not None and type(raw_rewards) is not dict:
        _odd(inner, "verifier_result.rewards", "not an object")
        raw_rewards = None
    rewards: dict[str, float] = {}
    for key, value in (raw_rewards or _EMPTY).items():
        f = finite(value)
        if f is not None:
            rewards[key] = f
    rewards = _share(rewards)
    reward = reward_of(rewards)
    raised = _per_step(got["exception_info"], steps, "exception_info")
    exc_type = raised.get("exception_type") if raised else None
    if exc_type is not None and not isinstance(exc_type, str):
        _odd(inner, "exception_info.exception_type", "not a string")
        exc_type = None
    usage = _per_step(got["agent_result"], steps, "agent_result") or _EMPTY
    info = got["agent_info"] or _EMPTY
    model_info = info.get("model_info")
    if model_info is not None and type(model_info) is not dict:
        _odd(inner, "agent_info.model_info", "not an object")
        model_info = None
    problem = odd[0] if odd else inner[0] if inner else None
    trial_name = _text(raw.get("trial_name")) or trial_name
    if trial_name == rel:
        trial_name = rel  # (one string for both: 100k of them stay as long as the console runs)
    return Trial(
        trial_name, _intern(_text(raw.get("task_name")) or _task_of(cfg) or task_from_trial_name(trial_name)),
        rel, TrialStatus.valid if reward is not None else TrialStatus.errored,
        reward=reward, rewards=rewards,
        exception_type=_name(exc_type), exception_message=_text(raised.get("exception_message")) if raised else None,
        failure_class=failure_class(exc_type),
        parse_error=None if reward is not None or exc_type else problem or NO_REWARD_NOR_EXCEPTION,
        started_at=_when(raw.get("started_at")), finished_at=_when(raw.get("finished_at")),
        n_input_tokens=_whole(usage.get("n_input_tokens")), n_cache_tokens=_whole(usage.get("n_cache_tokens")),
        n_output_tokens=_whole(usage.get("n_output_tokens")), cost_usd=finite(usage.get("cost_usd")),
        model_name=_name(_text((model_info or _EMPTY).get("name")) or cfg_model),
        agent_name=_name(_text(info.get("name"))), source=_name(_text(raw.get("source"))), mtime=mtime,
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
_kept = operator.attrgetter(*(_FIELDS[i] for i in _KEPT))
_NAMES = tuple(_AT[f] for f in ("task_name", "exception_type", "failure_class", "model_name", "agent_name", "source"))


def encode(t: Trial) -> bytes | None:
    """The record of a Trial; None when it cannot be kept (a name that is not UTF-8)."""
    try:
        return orjson.dumps(_kept(t))
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
