"""Compact Trials: the fast decoder of a trial's result.json, and the record the parse cache keeps.

A 100k-trial job holds 100k Trials for as long as the console runs, and a cold scan parses
100k files. Two things make that cheap without changing a single figure:

- `fast_trial` reads only the fields a Trial needs, straight from orjson's dict
  (services/harbor/fast_record.py `fast_values`, shared with the early reader), after checking
  that every field Harbor's TrialResult declares has a shape the lenient pydantic mirror
  (`files.TrialResultFile`) would take as is. Anything else (a malformed side field,
  `step_results`, a timestamp in an unusual form, a trial that needs its config) goes through
  `files.parse_trial`, so both paths give the same Trial (tests compare them field by field).
- `build_trial` makes the Trial by setting its attributes one by one in field order, which lets
  CPython share one key table among all Trials (~300 bytes each instead of ~900); the strings
  that repeat across trials (task, model, agent, exception names) are shared too.

`encode`/`decode` turn a Trial into the cache's record (an orjson array in field order, without
the marks a scan derives: attempt, copy_of) and back.
"""

from __future__ import annotations

import math
import sys
from datetime import datetime
from operator import attrgetter
from typing import Any

import orjson

from services.core.models import Trial, TrialStatus
from services.harbor.fast_record import FIELDS, Slow, fast_values
from services.harbor.fast_record import RECORD as _RECORD
from services.harbor.files import parse_trial

if tuple(Trial.model_fields) != FIELDS:  # (fast_record.py names them without importing pydantic)
    raise RuntimeError("services/harbor/fast_record.py FIELDS must list Trial's fields in order")
_ALL_FIELDS: set[str] = set(FIELDS)
_set = object.__setattr__
_intern = sys.intern
_STATUS = {s.value: s for s in TrialStatus}
_VALID, _ERRORED = TrialStatus.valid, TrialStatus.errored
_DATES = {"started_at", "finished_at"}
_SHARED_STR = {"task_name", "exception_type", "failure_class", "model_name", "agent_name", "source"}


def _make_builder() -> Any:
    # one straight-line function: 22 attribute writes in field order, no loop, no validation
    lines = ["def build(t, v):"]
    lines += [f"    _set(t, {name!r}, v[{i}])" for i, name in enumerate(FIELDS)]
    lines += ["    _set(t, '__pydantic_fields_set__', _ALL)",
              "    _set(t, '__pydantic_extra__', None)",
              "    _set(t, '__pydantic_private__', None)",
              "    return t"]
    ns: dict[str, Any] = {"_set": _set, "_ALL": _ALL_FIELDS}
    exec("\n".join(lines), ns)
    return ns["build"]


_build = _make_builder()
_new = Trial.__new__


def build_trial(values: list[Any] | tuple[Any, ...]) -> Trial:
    """A Trial from already-valid values in `FIELDS` order (no validation: callers check)."""
    return _build(_new(Trial), values)  # type: ignore[no-any-return]


# CPython keeps one shared key table per class once the first instance sets its attributes in
# one order; make that first instance here, before anything builds a Trial another way.
build_trial([None] * len(FIELDS))

_EMPTY: dict[str, float] = {}
_ONE_REWARD: dict[tuple[str, float], dict[str, float]] = {}


def _share_rewards(rewards: dict[str, float]) -> dict[str, float]:
    # Trials never change their rewards; the common one-key dicts are shared, not copied 100k times
    if not rewards:
        return _EMPTY
    if len(rewards) == 1:
        (k, v), = rewards.items()
        if v == v and not (v == 0.0 and math.copysign(1.0, v) < 0):
            shared = _ONE_REWARD.get((k, v))
            if shared is None and len(_ONE_REWARD) < 4096:
                shared = _ONE_REWARD[(k, v)] = {_intern(k): v}
            if shared is not None:
                return shared
    return rewards


_get_all = attrgetter(*FIELDS)


def compact(t: Trial) -> Trial:
    """The same Trial, built the compact way (for trials that came through the pydantic path)."""
    values = list(_get_all(t))
    for i, f in enumerate(FIELDS):
        v = values[i]
        if f in _SHARED_STR and type(v) is str:
            values[i] = _intern(v)
        elif f == "rewards":
            values[i] = _share_rewards(v)
    if values[0] == values[2]:
        values[0] = values[2]  # trial_name and path: one string
    return build_trial(values)


# -- the fast decoder ----------------------------------------------------------------------

def _fast(rel: str, dir_name: str, raw: dict[str, Any], mtime: float | None) -> Trial:
    return build_trial(fast_values(rel, dir_name, raw, mtime, _intern, _share_rewards, _VALID, _ERRORED))


def fast_trial(
    rel: str,
    dir_name: str,
    result_bytes: bytes | None,
    config_bytes: bytes | None,
    mtime: float | None,
    result_error: str | None = None,
) -> Trial:
    """`files.parse_trial`, faster on the common shape; the same Trial either way."""
    if result_bytes is not None and result_error is None and config_bytes is None:
        try:
            raw = orjson.loads(result_bytes)
        except orjson.JSONDecodeError:
            raw = None
        if type(raw) is dict:
            try:
                return _fast(rel, dir_name, raw, mtime)
            except Slow:
                pass
    return compact(parse_trial(rel, dir_name, result_bytes, config_bytes, mtime, result_error))


# -- the cache's record --------------------------------------------------------------------

_date = datetime.fromisoformat

_DATE_POS = tuple(i for i, f in enumerate(_RECORD) if f in _DATES)
_STATUS_POS = _RECORD.index("status")
_SHARED_POS = tuple(i for i, f in enumerate(_RECORD) if f in _SHARED_STR)
_REWARDS_POS = _RECORD.index("rewards")
_NAME_POS = _RECORD.index("trial_name")
_REWARD_POS = _RECORD.index("reward")


_get_record = attrgetter(*_RECORD)


def _make_placer() -> Any:
    # a record's values in FIELDS order as one tuple display (a loop costs a microsecond a record)
    derived = {"path": "rel", "attempt": "1"}
    at = {f: i for i, f in enumerate(_RECORD)}
    items = [derived.get(f) or (f"r[{at[f]}]" if f in at else "None") for f in FIELDS]
    ns: dict[str, Any] = {}
    exec(f"def place(r, rel):\n    return ({', '.join(items)},)", ns)
    return ns["place"]


_place = _make_placer()


def encode(t: Trial) -> bytes:
    row = _get_record(t)  # (t.__dict__ would give each Trial a dict of its own)
    try:
        # orjson writes datetimes as RFC 3339 and the status enum as its value, as decode reads them
        return orjson.dumps(row)
    except TypeError:  # a tzinfo orjson does not know
        out = list(row)
        for i in _DATE_POS:
            if out[i] is not None:
                out[i] = out[i].isoformat()
        out[_STATUS_POS] = out[_STATUS_POS].value
        return orjson.dumps(out)


def decode(rel: str, data: bytes) -> Trial:
    """The Trial a record holds; raises ValueError (or KeyError, TypeError) for a bad record."""
    row = orjson.loads(data)
    if type(row) is not list or len(row) != len(_RECORD):
        raise ValueError("not a trial record")
    for i in _DATE_POS:
        if row[i] is not None:
            row[i] = _date(row[i])
    row[_STATUS_POS] = _STATUS[row[_STATUS_POS]]
    for i in _SHARED_POS:
        if row[i] is not None:
            row[i] = _intern(row[i])
    shared = row[_REWARDS_POS] = _share_rewards(row[_REWARDS_POS])
    reward = row[_REWARD_POS]
    if reward is not None and shared.get("reward") == reward:
        row[_REWARD_POS] = shared["reward"]
    if row[_NAME_POS] == rel:
        row[_NAME_POS] = rel
    return build_trial(_place(row, rel))
