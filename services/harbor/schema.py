"""The fields of a Harbor trial's result.json and config.json that a Trial is built from, typed as
DESIGN 3 reads them, and the one lenient reading of a document into them (`typed`).

A document whose fields all have these types is decoded straight from its bytes, skipping every
other field (a real result.json also holds the trial's whole config, and may hold a step's token
ids). Any other document is read whole and each field of the wrong type is read as absent; the
fields in `said` are named as the problem, the rest (a step's, a side field's) are passed over.
Imported on the first file parsed: a run the parse cache answers never needs msgspec.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

_S = TypeVar("_S", bound=msgspec.Struct)
# a step's odd fields are passed over one at a time; past this many, its steps are
MAX_ODD = 32


class Exception_(msgspec.Struct):
    exception_type: str | None = None
    exception_message: str | None = None


class Verifier(msgspec.Struct):
    rewards: dict[str, Any] | None = None  # (each value judged by the parser: a finite number or dropped)


class Usage(msgspec.Struct):  # (judged by the parser: an integral count, a finite cost)
    n_input_tokens: Any = None
    n_cache_tokens: Any = None
    n_output_tokens: Any = None
    cost_usd: Any = None


class Model(msgspec.Struct):
    name: str | None = None


class Agent(msgspec.Struct):
    name: str | None = None
    model_info: Model | None = None


class Step(msgspec.Struct):
    verifier_result: Verifier | None = None
    exception_info: Exception_ | None = None
    agent_result: Usage | None = None


class Result(Step):  # (a trial's own verifier result, exception and usage, or its steps')
    task_name: str | None = None
    trial_name: str | None = None
    source: str | None = None
    started_at: Any = None  # (an ISO time or a Unix time: judged by the parser)
    finished_at: Any = None
    agent_info: Agent | None = None
    step_results: list[Step] | None = None


class Task(msgspec.Struct):
    name: str | None = None
    path: str | None = None


class AgentConfig(msgspec.Struct):
    name: str | None = None
    model_name: str | None = None


class Config(msgspec.Struct):
    trial_name: str | None = None
    task: Task | None = None
    agent: AgentConfig | None = None


class Raised(Exception_):
    exception_traceback: str | None = None


class Details(msgspec.Struct):  # (what the diagnose panel shows of a result.json)
    exception_info: Raised | None = None


NO_USAGE = Usage()
# the fields whose wrong type is the problem a trial with neither a reward nor an exception names
RESULT_SAID = {"step_results": "not a list", "verifier_result": "not an object", "exception_info": "not an object",
               "agent_result": "not an object", "agent_info": "not an object",
               "verifier_result.rewards": "not an object", "exception_info.exception_type": "not a string",
               "agent_info.model_info": "not an object"}
KINDS: dict[str, type[msgspec.Struct]] = {"Result": Result, "Config": Config}
DECODERS = {kind: msgspec.json.Decoder(cls).decode for kind, cls in KINDS.items()}
Unfit = msgspec.MsgspecError  # the bytes are not JSON, or a field has another type
_AT = re.compile(r" - at `\$((?:\.\w+|\[\d+\])+)`$")
_PART = re.compile(r"\.(\w+)|\[(\d+)\]")


def typed(raw: dict[str, Any], schema: type[_S], said: Mapping[str, str]) -> tuple[_S, list[tuple[str, str]]]:
    """A whole document as `schema`, each field of the wrong type read as absent (an object in a
    list of them: left out), and what the fields in `said` had wrong, the document's own fields
    first: [("verifier_result", "not an object")]. Changes `raw`."""
    top: list[tuple[str, str]] = []
    inner: list[tuple[str, str]] = []
    for n in range(4 * MAX_ODD):  # (the fields outside the steps are fewer than 64)
        try:
            return msgspec.convert(raw, schema), top + inner
        except msgspec.ValidationError as exc:
            at = _AT.search(str(exc))
            if at is None:  # (never for an object and a Struct of optional fields)
                raise ValueError(str(exc)) from None
            path: list[str | int] = [int(i) if i else k for k, i in _PART.findall(at.group(1))]
        if n >= MAX_ODD and isinstance(raw.get("step_results"), list):
            raw["step_results"] = None
            continue
        parent: Any = raw
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(path[-1], int):
            del parent[path[-1]]
        else:
            parent[path[-1]] = None
        field = ".".join(map(str, path))
        if field in said:
            (top if len(path) == 1 else inner).append((field, said[field]))
    raise ValueError("too many fields of the wrong type")
