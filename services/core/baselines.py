"""Alignment baselines: the score a run is expected to reproduce, and the config it was got with.

A baseline is a file ``<config dir>/baselines/<benchmark>-<id>.json`` (``$XDG_CONFIG_HOME/
evaldesk/baselines/``, or ``baselines_dir`` in the config; never the current directory). It
holds an aggregate expected score, a per-task expected reward, or both, and optionally the
configuration the score was obtained with, so a run can be checked for config drift::

    {"benchmark": "terminal_bench_2",            # which runs it applies to (prefix of the benchmark)
     "model": "laion/OpenThinker-Agent-8B",      # optional: only runs of this model (bare names compare)
     "source": "leaderboard 2026-11-01",         # optional: where the numbers came from
     "pass_rate": 0.46,                          # or "score" / "expected_score"
     "n": 267,                                   # optional: attempts behind the expected score
     "config": {"model": "hosted_vllm/laion/OpenThinker-Agent-8B", "image": "tb2:2026-10",
                "split": "test", "temperature": 0.6, "top_p": 0.95, "thinking": true,
                "max_tokens": 32768, "agent_timeout_s": 1500, "verifier_timeout_s": 600},
     "tasks": {"fix-git-history": 1.0, "build-cython-ext": 0.33}}

- ``pass_rate`` is a fraction in [0, 1]; ``tasks`` maps a task name to its expected reward in
  [0, 1] (a mean over attempts is fine). With per-task rewards, actual and expected are
  compared on the same attempts (the expected rate is the mean expected reward over the
  attempts that have finished), and the tasks furthest below expectation are named.
- ``config`` is a flat map of the settings the score depends on; each key is compared with
  the run's own (`Experiment.run_config`) field by field. A key the run does not record is
  reported as unknown, never as drift.
Unknown top-level keys are ignored so files written for other tools still load.

The monitor's rule (c) and the audit's `alignment` check read the same files through
`load_baselines` and compare through `services.core.alignment`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import orjson

from services.core.config import Config
from services.core.models import Experiment
from services.core.plain import validate
from services.core.xdg import default_baselines_dir

ConfigValue = str | float | int | bool | None


class BaselineError(ValueError):
    """A one-line, human message naming the file."""


def bare_model(name: str | None) -> str:
    """`hosted_vllm/laion/X` and `laion/X` name the same model: compare the last segment."""
    return (name or "").rstrip("/").rsplit("/", 1)[-1].lower()


@dataclass(kw_only=True)
class Baseline:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "ignore"}

    name: str = ""
    benchmark: str | None = None
    model: str | None = None
    source: str | None = None
    # a file may call it "score" or "expected_score" (parse_baseline)
    pass_rate: float | None = field(default=None, metadata={"ge": 0, "le": 1})
    n: int | None = field(default=None, metadata={"ge": 1, "description": "attempts behind the expected score"})
    config: dict[str, ConfigValue] = field(default_factory=dict)
    tasks: dict[str, float] = field(default_factory=dict)
    path: str | None = field(default=None, metadata={"description": "the file it was read from"})

    def __post_init__(self) -> None:
        for task, reward in self.tasks.items():
            if not math.isfinite(reward) or not 0 <= reward <= 1:
                raise ValueError(f"expected reward of {task!r} is {reward}, not in [0, 1]")
        if self.pass_rate is None and not self.tasks:
            raise ValueError('needs "pass_rate" (a fraction) or "tasks" ({task: expected reward})')

    def applies_to(self, exp: Experiment) -> bool:
        if self.model and bare_model(self.model) != bare_model(exp.model):
            return False
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

    @property
    def expected_config(self) -> dict[str, ConfigValue]:
        """The config to compare against; the top-level model stands in when the config names none."""
        cfg = dict(self.config)
        if "model" not in cfg and self.model:
            cfg["model"] = self.model
        return cfg


def parse_baseline(data: bytes, name: str, where: str = "baseline") -> Baseline:
    try:
        raw: Any = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BaselineError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: holds a JSON {type(raw).__name__}, not an object")
    raw.setdefault("name", name)
    raw["path"] = where if where != "baseline" else None
    for alias in ("score", "expected_score"):
        if "pass_rate" not in raw and alias in raw:
            raw["pass_rate"] = raw.pop(alias)
    from pydantic import ValidationError

    try:
        return validate(Baseline, raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        msg = str(first.get("msg", "")).removeprefix("Value error, ")
        raise BaselineError(f"{where}: {loc + ': ' if loc else ''}{msg}") from None


def load_baseline(path: str | Path) -> Baseline:
    from services.core.input_files import InputFileError, read_bytes

    p = Path(path).expanduser()
    try:
        data = read_bytes(p)
    except InputFileError as exc:
        raise BaselineError(str(exc).removeprefix(f"{p}: ").join([f"{p}: ", ""])) from None
    except OSError as exc:
        raise BaselineError(f"{p}: cannot read ({exc.strerror or exc})") from None
    return parse_baseline(data, p.stem, str(p))


def load_baselines_dir(folder: str | Path) -> list[Baseline]:
    """Every ``*.json`` in a baselines folder; a missing folder is simply no baselines."""
    d = Path(folder).expanduser()
    if not d.is_dir():
        return []
    return [load_baseline(p) for p in sorted(d.glob("*.json"))]


def load_baselines(folders: Iterable[str | Path]) -> tuple[list[Baseline], list[str]]:
    """The baselines of several folders; a bad file is one error line and does not hide the others."""
    found: list[Baseline] = []
    errors: list[str] = []
    for folder in folders:
        d = Path(folder).expanduser()
        if not d.is_dir():
            continue
        for p in sorted(d.glob("*.json")):
            try:
                found.append(load_baseline(p))
            except BaselineError as exc:
                errors.append(f"baseline {exc}")
    return found, errors


def configured_baselines(config: Config, extra: Iterable[str | Path] = ()) -> tuple[list[Baseline], list[str]]:
    """The baselines the config points at (`baselines_dir`, else the config dir's), plus `extra` folders."""
    return load_baselines([Path(config.baselines_dir) if config.baselines_dir else default_baselines_dir(), *extra])


def source_baseline_dirs(specs: Iterable[str]) -> list[str]:
    """The `baselines/` folder a local SOURCE folder brings with it (the demo's does): the
    console and every batch command read a SOURCE's baselines the same way, beside the
    config's."""
    out: list[str] = []
    for spec in specs:
        if "://" in spec and not spec.startswith("file://"):
            continue
        d = Path(spec.removeprefix("file://")).expanduser() / "baselines"
        try:
            found = d.is_dir()
        except OSError:  # a SOURCE that cannot be searched: the scan names it
            found = False
        if found and str(d) not in out:
            out.append(str(d))
    return out


def baselines_for(config: Config, specs: Iterable[str]) -> tuple[list[Baseline], list[str]]:
    """Every baseline that applies to a run over `specs`: the config's and the SOURCEs' own."""
    return configured_baselines(config, source_baseline_dirs(specs))


def pick_baseline(exp: Experiment, baselines: list[Baseline]) -> Baseline | None:
    """The most specific baseline for an experiment: a benchmark-scoped one beats a global one,
    a model-scoped one beats one for any model."""
    scoped = [b for b in baselines if b.benchmark and b.applies_to(exp)]
    if scoped:
        return max(scoped, key=lambda b: (len(b.benchmark or ""), bool(b.model)))
    return next((b for b in baselines if not b.benchmark and b.applies_to(exp)), None)
