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
from datetime import UTC, datetime
from typing import Any

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


def whole_number(v: Any) -> int | None:
    """An integral count (an int, or a float with no fraction; not a bool); None for anything else."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return int(v) if isinstance(v, float) and v.is_integer() else None


def when(v: Any) -> datetime | None:
    """A time written as ISO 8601 text or as Unix seconds; None for anything else."""
    try:
        if isinstance(v, str):
            return datetime.fromisoformat(v)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return datetime.fromtimestamp(v, UTC)
    except (ValueError, OverflowError, OSError):
        pass
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


@functools.cache
def _schema() -> Any:
    from services.harbor import schema  # (imports msgspec: on the first file parsed, never from the cache)

    return schema


def read_doc(data: bytes, kind: str) -> tuple[Any, list[tuple[str, str]]]:
    """A result.json ("Result") or config.json ("Config") as the schema's Struct, and what its
    said fields had wrong (schema.typed). Raises ValueError (not JSON), TypeError (not an object)."""
    schema = _schema()
    try:
        return schema.DECODERS[kind](data), []
    except schema.Unfit:
        return read_whole(data, kind)


def read_whole(data: bytes, kind: str) -> tuple[Any, list[tuple[str, str]]]:
    """read_doc by the whole document, each field judged by the lenient reading alone."""
    schema = _schema()
    raw = load_json(data)
    if not isinstance(raw, dict):
        raise TypeError(f"a JSON {type(raw).__name__}, not an object")
    return schema.typed(raw, schema.KINDS[kind], schema.RESULT_SAID if kind == "Result" else {})


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


def _config(data: bytes | None) -> Any:
    if not data:
        return None
    try:
        return read_doc(data, "Config")[0]
    except (ValueError, TypeError):
        return None


def _task_of(cfg: Any) -> str | None:
    task = cfg.task if cfg is not None else None
    if task is None:
        return None
    if task.name:
        return task.name.rsplit("/", 1)[-1]
    if task.path:
        return task.path.rstrip("/").rsplit("/", 1)[-1] or None
    return None


def _per_step(own: Any, steps: Any, field: str) -> Any:
    # a multi-step trial keeps its verifier result, exception and usage per step
    if own is not None or not steps:
        return own
    return next((v for s in steps if (v := getattr(s, field)) is not None), None)


def _errored(rel: str, trial_name: str, cfg: Any, mtime: float | None, reason: str | None,
             status: TrialStatus = TrialStatus.errored) -> Trial:
    agent = cfg.agent if cfg is not None else None
    return Trial(trial_name, _intern(_task_of(cfg) or task_from_trial_name(trial_name)), rel, status,
                 parse_error=reason, mtime=mtime, model_name=_name(agent.model_name if agent else None),
                 agent_name=_name(agent.name if agent else None))


def parse_trial(rel: str, dir_name: str, result: bytes | None, config: bytes | None,
                mtime: float | None, result_error: str | None = None) -> Trial:
    """The Trial of one trial dir from the bytes of its files. `result` None (and no
    `result_error`) means the trial is running."""
    cfg = _config(config)
    trial_name = (cfg.trial_name if cfg is not None else None) or dir_name
    if result is None or result_error is not None:
        return _errored(rel, trial_name, cfg, mtime, result_error,
                        TrialStatus.errored if result_error is not None else TrialStatus.running)
    if not result.strip():
        return _errored(rel, trial_name, cfg, mtime, "result.json is empty")
    try:
        doc, odd = read_doc(result, "Result")
    except ValueError as exc:
        return _errored(rel, trial_name, cfg, mtime, f"result.json is not valid JSON (half-written?): {exc}")
    except TypeError as exc:
        return _errored(rel, trial_name, cfg, mtime, f"result.json holds {exc}")
    steps = doc.step_results
    verifier = doc.verifier_result
    if (verifier is None or verifier.rewards is None) and steps:
        verifier = next((s.verifier_result for s in steps
                         if s.verifier_result is not None and s.verifier_result.rewards), verifier)
    rewards: dict[str, float] = {}
    for key, value in ((verifier.rewards if verifier is not None else None) or _EMPTY).items():
        f = finite(value)
        if f is not None:
            rewards[key] = f
    rewards = _share(rewards)
    reward = reward_of(rewards)
    raised = _per_step(doc.exception_info, steps, "exception_info")
    exc_type = raised.exception_type if raised is not None else None
    usage = _per_step(doc.agent_result, steps, "agent_result")
    if usage is None:
        usage = _schema().NO_USAGE
    info = doc.agent_info
    model = info.model_info if info is not None else None
    agent_cfg = cfg.agent if cfg is not None else None
    trial_name = doc.trial_name or trial_name
    if trial_name == rel:
        trial_name = rel  # (one string for both: 100k of them stay as long as the console runs)
    return Trial(
        trial_name, _intern(doc.task_name or _task_of(cfg) or task_from_trial_name(trial_name)),
        rel, TrialStatus.valid if reward is not None else TrialStatus.errored,
        reward=reward, rewards=rewards,
        exception_type=_name(exc_type), exception_message=raised.exception_message if raised is not None else None,
        failure_class=failure_class(exc_type),
        parse_error=None if reward is not None or exc_type else (
            f"result.json field {odd[0][0]!r}: {odd[0][1]}" if odd else NO_REWARD_NOR_EXCEPTION),
        started_at=when(doc.started_at), finished_at=when(doc.finished_at),
        n_input_tokens=whole_number(usage.n_input_tokens), n_cache_tokens=whole_number(usage.n_cache_tokens),
        n_output_tokens=whole_number(usage.n_output_tokens), cost_usd=finite(usage.cost_usd),
        model_name=_name((model.name if model is not None else None) or (agent_cfg.model_name if agent_cfg else None)),
        agent_name=_name(info.name if info is not None else None), source=_name(doc.source), mtime=mtime,
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
    schema = _schema()
    try:
        raw = load_json(result or b"")
    except ValueError:
        return None, None, None
    exc = schema.typed(raw, schema.Details, {})[0].exception_info if isinstance(raw, dict) else None
    if exc is None:
        return None, None, None
    return exc.exception_type, exc.exception_message, exc.exception_traceback


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
