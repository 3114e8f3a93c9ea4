"""The settings of a Harbor job that a score depends on, read from its config.json for
baseline alignment (config drift is compared field by field against a baseline's)."""

from __future__ import annotations

import math
from typing import Any

import orjson

# agent kwargs names Harbor's agents and LiteLLM use for the sampling settings
_KWARGS: dict[str, tuple[str, ...]] = {
    "temperature": ("temperature",),
    "top_p": ("top_p",),
    "max_tokens": ("max_tokens", "max_output_tokens", "max_completion_tokens"),
    "thinking": ("thinking", "enable_thinking", "reasoning_effort"),
}


def _scalar(v: Any) -> str | float | int | bool | None:
    if isinstance(v, bool | int | str) or v is None:
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    return None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def harbor_run_config(config_bytes: bytes | None, timeout_s: float | None = None) -> dict[str, Any]:
    """model, image, split, sampling kwargs and timeouts from a job config.json; {} when unreadable."""
    if not config_bytes:
        return {}
    try:
        raw = orjson.loads(config_bytes)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    agents = [a for a in _list(raw.get("agents")) if isinstance(a, dict)]
    agent = agents[0] if agents else {}
    if agent.get("model_name"):
        out["model"] = str(agent["model_name"])
    kwargs = _dict(agent.get("kwargs"))
    for field, names in _KWARGS.items():
        for name in names:
            if name in kwargs and _scalar(kwargs[name]) is not None:
                out[field] = _scalar(kwargs[name])
                break
    env = _dict(raw.get("environment"))
    for name in ("docker_image", "image"):
        if env.get(name):
            out["image"] = str(env[name])
            break
    datasets = [d for d in _list(raw.get("datasets")) if isinstance(d, dict)]
    if datasets and datasets[0].get("split"):
        out["split"] = str(datasets[0]["split"])
    if datasets and datasets[0].get("version"):
        out["dataset_version"] = str(datasets[0]["version"])
    if timeout_s:
        out["agent_timeout_s"] = timeout_s
    verifier = _dict(raw.get("verifier"))
    if isinstance(verifier.get("override_timeout_sec"), int | float):
        out["verifier_timeout_s"] = verifier["override_timeout_sec"]
    if isinstance(raw.get("timeout_multiplier"), int | float):
        out["timeout_multiplier"] = raw["timeout_multiplier"]
    return out
