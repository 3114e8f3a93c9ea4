"""evaldesk's own records are plain dataclasses: defining one costs microseconds, so a command
that reads an unchanged job does not pay for a validation library it never uses. Data from
outside (a config file, a record on disk) is checked by pydantic at that boundary, `validate()`,
which reads the dataclass's own field types and `field(metadata=...)` constraints (gt, pattern,
description …) and its `__pydantic_config__`.

A field with `metadata={"exclude": True}` is left out of `dump()`, as pydantic's `exclude=True`.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import date, datetime, time
from enum import Enum
from pathlib import PurePath
from typing import Any, TypeVar

T = TypeVar("T")

EXCLUDE: dict[str, Any] = {"exclude": True}

_ADAPTERS: dict[Any, Any] = {}
_DUMPED: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    names = _DUMPED.get(cls)
    if names is None:
        names = _DUMPED[cls] = tuple(f.name for f in dataclasses.fields(cls) if not f.metadata.get("exclude"))
    return names


def _when(v: date | time, as_json: bool) -> Any:
    if not as_json:
        return v
    text = v.isoformat()
    # as pydantic writes an aware time in UTC
    return text[:-6] + "Z" if isinstance(v, datetime | time) and text.endswith("+00:00") else text


def dump(obj: Any, *, json: bool = False, exclude_none: bool = False, include: set[str] | None = None) -> Any:
    """A dataclass (and what it holds) as dicts, lists and scalars; `json=True`: only JSON types
    (enums by value, times as ISO 8601, paths as text)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for name in _names(type(obj)):
            if include is not None and name not in include:
                continue
            v = getattr(obj, name)
            if v is None and exclude_none:
                continue
            out[name] = dump(v, json=json, exclude_none=exclude_none)
        return out
    if isinstance(obj, Enum):
        return obj.value if json else obj
    if isinstance(obj, dict):
        return {(dump(k, json=json) if json else k): dump(v, json=json, exclude_none=exclude_none)
                for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        items = [dump(v, json=json, exclude_none=exclude_none) for v in obj]
        return items if json or isinstance(obj, list) else type(obj)(items)
    if isinstance(obj, date | time):
        return _when(obj, json)
    if json and isinstance(obj, PurePath):
        return str(obj)
    dump_model = getattr(obj, "model_dump", None)
    if dump_model is not None:  # a pydantic model held in a record
        return dump_model(mode="json" if json else "python", exclude_none=exclude_none)
    return obj


def copy_with(obj: T, **update: Any) -> T:
    """A shallow copy with some fields replaced, as pydantic's model_copy: nothing is checked
    again, and what the object keeps beside its fields (a census, a loader) comes along."""
    new = copy.copy(obj)
    new.__dict__.update(update)
    return new


def validate(cls: type[T], data: Any, *, strict: bool = False) -> T:
    """`data` (parsed JSON or TOML) as a `cls`, checked by pydantic; raises pydantic's
    ValidationError."""
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    result: T = adapter.validate_python(data, strict=strict)
    return result
