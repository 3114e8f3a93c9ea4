"""csbench plan files and its local YAML config, read as csbench reads them.

Two plan shapes (clousight-bench 0.7):

- `csbench run-plan PLAN` (cli/run.py): `domain`, `platform`, `target`, and `tasks` entries
  `{task: "suite:<id>", repeat: 1, warmup: 0, params: {}}`;
- `csbench submit PLAN` (core/campaign/prod_submit.py `_load_plan`): `platform`, `cost_budget`,
  `driver: {…}` and `tasks` entries `{task_id: "suite:<id>", params: {}}` — an entry with `task:`
  instead is refused ("that is the csbench run-plan shape, not the submit shape").

The local config (`--config`, gitignored) holds `target:` (mode, region, blob_bucket, auth_env,
arms_license_key …) and `params:`. Reading never raises: what is wrong is said in `problems`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

MAX_PLAN_BYTES = 1024 * 1024
Shape = Literal["run-plan", "submit", "unknown"]


@dataclass
class PlanTask:
    task_id: str
    shape: Shape
    repeat: int = 1
    warmup: int = 0
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def suite(self) -> bool:
        return self.task_id.startswith("suite:")

    @property
    def agent_kind(self) -> str:
        return str(self.params.get("agent_kind") or "")


@dataclass
class PlanFile:
    path: str
    sha256: str = ""
    domain: str = ""
    platform: str = ""
    target: dict[str, Any] = field(default_factory=dict)
    tasks: list[PlanTask] = field(default_factory=list)
    driver: dict[str, Any] = field(default_factory=dict)
    cost_budget: float | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def suite_tasks(self) -> list[PlanTask]:
        return [t for t in self.tasks if t.suite]


def _count(value: Any, default: int) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return default
    return n if n >= 0 else default


def _load_yaml(path: str) -> tuple[Any, bytes, str | None]:
    from services.core.input_files import InputFileError, read_bytes

    try:
        raw = read_bytes(path, max_bytes=MAX_PLAN_BYTES)
    except InputFileError as exc:
        return None, b"", str(exc).removeprefix(f"{path}: ")
    except FileNotFoundError:
        return None, b"", "does not exist"
    except IsADirectoryError:
        return None, b"", "is a directory"
    except OSError as exc:
        return None, b"", f"cannot be read: {exc.strerror or exc}"
    if len(raw) > MAX_PLAN_BYTES:
        return None, raw, f"is larger than {MAX_PLAN_BYTES >> 10} KiB"
    try:
        return yaml.safe_load(raw.decode("utf-8")), raw, None
    except UnicodeDecodeError:
        return None, raw, "is not UTF-8"
    except yaml.YAMLError as exc:
        return None, raw, f"is not valid YAML: {' '.join(str(exc).split())[:160]}"


def read_plan(path: str) -> PlanFile:
    plan = PlanFile(path=path)
    doc, raw, problem = _load_yaml(path)
    plan.sha256 = hashlib.sha256(raw).hexdigest() if raw else ""
    if problem:
        plan.problems.append(f"the plan file {problem}")
        return plan
    if not isinstance(doc, dict):
        plan.problems.append("the plan file is not a YAML mapping")
        return plan
    plan.domain = str(doc.get("domain") or "")
    plan.platform = str(doc.get("platform") or "")
    plan.target = dict(doc.get("target") or {}) if isinstance(doc.get("target"), dict) else {}
    plan.driver = dict(doc.get("driver") or {}) if isinstance(doc.get("driver"), dict) else {}
    budget = doc.get("cost_budget")
    if budget is not None:
        try:
            plan.cost_budget = float(budget)
        except (TypeError, ValueError):
            plan.problems.append(f"cost_budget {budget!r} is not a number")
    entries = doc.get("tasks")
    if not isinstance(entries, list) or not entries:
        plan.problems.append("the plan has no tasks")
        return plan
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            plan.problems.append(f"task {i} is not a mapping")
            continue
        raw_params = entry.get("params")
        params: dict[str, Any] = dict(raw_params) if isinstance(raw_params, dict) else {}
        if "task_id" in entry:
            plan.tasks.append(PlanTask(str(entry["task_id"]), "submit", params=params))
        elif "task" in entry:
            plan.tasks.append(PlanTask(str(entry["task"]), "run-plan", _count(entry.get("repeat", 1), 1) or 1,
                                       _count(entry.get("warmup", 0), 0), params))
        else:
            plan.problems.append(f"task {i} has neither task_id (submit) nor task (run-plan)")
    return plan


def resolve_plan_file(plan_file: str, results_dir: str) -> str | None:
    """Where a campaign's `plan_file` (as it was given to run-plan, relative to where it ran) is
    now: as written when absolute, else beside the results dir or inside it."""
    if not plan_file:
        return None
    if os.path.isabs(plan_file):
        return plan_file if os.path.isfile(plan_file) else None
    for base in (os.path.dirname(results_dir.rstrip("/")), results_dir):
        candidate = os.path.join(base, plan_file)
        if os.path.isfile(candidate):
            return candidate
    return None


def run_plan_tasks(plan_file: str, results_dir: str, task_ids: list[str]) -> list[PlanTask] | None:
    """The run-plan entries of a campaign's own plan file, when it can be found and still lists
    exactly the campaign's tasks (else it was edited since, and says nothing about this run)."""
    path = resolve_plan_file(plan_file, results_dir)
    if path is None:
        return None
    plan = read_plan(path)
    if [t.task_id for t in plan.tasks] != task_ids or any(t.shape != "run-plan" for t in plan.tasks):
        return None
    return plan.tasks


@dataclass
class LocalConfig:
    """csbench's `--config` YAML: only what evaldesk checks before a submit is kept."""

    path: str
    sha256: str = ""
    target: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None

    @property
    def mode(self) -> str:
        return str(self.target.get("mode", "") or "")


def read_config(path: str) -> LocalConfig:
    cfg = LocalConfig(path=path)
    doc, raw, problem = _load_yaml(path)
    cfg.sha256 = hashlib.sha256(raw).hexdigest() if raw else ""
    if problem:
        cfg.problem = f"the csbench config {path} {problem}"
    elif doc is not None and not isinstance(doc, dict):
        cfg.problem = f"the csbench config {path} is not a YAML mapping"
    elif isinstance(doc, dict):
        target = doc.get("target")
        if target is not None and not isinstance(target, dict):
            cfg.problem = f"target: in {path} is not a mapping"
        else:
            cfg.target = dict(target or {})
    return cfg
