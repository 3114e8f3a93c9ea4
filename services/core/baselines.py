"""Alignment baselines: the score a run is expected to reproduce.

A baseline file lives at ``baselines/<name>.json`` (the name is free; the runbooks use
``<benchmark>-<identifier>``). It holds either an aggregate pass rate or a per-task expected
reward, or both::

    {"pass_rate": 0.48}

    {"benchmark": "terminal_bench_2",            # optional: which runs it applies to
     "model": "anthropic/claude-sonnet-4-5",     # optional, shown only
     "source": "leaderboard 2026-11-01",         # optional: where the numbers came from
     "tasks": {"fix-git-history": 1.0, "build-cython-ext": 0.33}}

- ``pass_rate`` is a fraction in [0, 1].
- ``tasks`` maps a task name to its expected reward in [0, 1] (a mean over attempts is fine).
  With per-task rewards the monitor compares like with like: the expected rate is the mean
  expected reward over the attempts that have finished so far, not over the whole benchmark.
- ``benchmark``, when set, limits the baseline to experiments whose benchmark (or run dir
  prefix) starts with it; without it the baseline applies to every monitored experiment.
Unknown keys are ignored so files written for other tools still load.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from services.core.models import Experiment


class BaselineError(ValueError):
    """A one-line, human message naming the file."""


class Baseline(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = ""
    benchmark: str | None = None
    model: str | None = None
    source: str | None = None
    pass_rate: float | None = Field(None, ge=0, le=1)
    tasks: dict[str, float] = Field(default_factory=dict)

    @field_validator("tasks")
    @classmethod
    def _rewards_in_range(cls, v: dict[str, float]) -> dict[str, float]:
        for task, reward in v.items():
            if not math.isfinite(reward) or not 0 <= reward <= 1:
                raise ValueError(f"expected reward of {task!r} is {reward}, not in [0, 1]")
        return v

    @model_validator(mode="after")
    def _has_numbers(self) -> Baseline:
        if self.pass_rate is None and not self.tasks:
            raise ValueError('needs "pass_rate" (a fraction) or "tasks" ({task: expected reward})')
        return self

    def applies_to(self, exp: Experiment) -> bool:
        if not self.benchmark:
            return True
        names = [n for n in (exp.benchmark, exp.benchmark_from_dir, exp.id) if n]
        return any(n.startswith(self.benchmark) for n in names)

    @property
    def aggregate(self) -> float | None:
        """The whole-benchmark expected rate: the stated one, else the mean of the task rewards."""
        if self.pass_rate is not None:
            return self.pass_rate
        return sum(self.tasks.values()) / len(self.tasks) if self.tasks else None


def parse_baseline(data: bytes, name: str, where: str = "baseline") -> Baseline:
    try:
        raw: Any = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BaselineError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: holds a JSON {type(raw).__name__}, not an object")
    raw.setdefault("name", name)
    try:
        return Baseline.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        msg = str(first.get("msg", "")).removeprefix("Value error, ")
        raise BaselineError(f"{where}: {loc + ': ' if loc else ''}{msg}") from None


def load_baseline(path: str | Path) -> Baseline:
    p = Path(path).expanduser()
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise BaselineError(f"{p}: cannot read ({exc.strerror or exc})") from None
    return parse_baseline(data, p.stem, str(p))


def load_baselines_dir(folder: str | Path) -> list[Baseline]:
    """Every ``*.json`` in a baselines folder; a missing folder is simply no baselines."""
    d = Path(folder).expanduser()
    if not d.is_dir():
        return []
    return [load_baseline(p) for p in sorted(d.glob("*.json"))]


def pick_baseline(exp: Experiment, baselines: list[Baseline]) -> Baseline | None:
    """The most specific baseline for an experiment: a benchmark-scoped one beats a global one."""
    scoped = [b for b in baselines if b.benchmark and b.applies_to(exp)]
    if scoped:
        return max(scoped, key=lambda b: len(b.benchmark or ""))
    return next((b for b in baselines if not b.benchmark), None)
