"""Retry a Rock experiment's failed tasks with regression.py, as a plan for the write path.

`regression.py retry EXP --from-config configs/EXP.json` re-runs the chosen tasks as a new
experiment (a new results file); the old one is never touched. The tasks are chosen the way
the runbook does it: by Rock status (`--filter error`), by exception type (`--exception-type
T`), or by name (`--tasks a,b`). `--from-config` semantics: the saved JSON is the base and
every explicit option (`retry_options` of the `[[rock]]` entry) overrides it; the preview
shows both the exact command and the settings that result.

One step: the shared `command` step (services/remediations/command.py), run in the work dir.
A command cannot be un-run; a second plan of the same retry after it was applied has nothing
to do (the record says it ran).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from services.core.config import Config, RockConfig
from services.core.models import Experiment, State, Trial, TrialStatus, experiment_key
from services.core.source import Source
from services.remediations.command import command_step
from services.remediations.errors import WriteRefused
from services.remediations.records import Plan, RecordIndex, new_record_id
from services.remediations.steps import StepContext
from services.transport.fs import LocalFS
from services.transport.process import LocalRunner, display

ACTION = "retry"
LIVE = (State.running, State.dispatched, State.pending)


class RetryFilter(BaseModel):
    """Which tasks to retry: Rock's status word, an exception type, or an explicit list."""

    status: str | None = Field("error", description="regression.py's --filter value")
    exception_type: str | None = None
    tasks: list[str] | None = Field(None, description="explicit task ids: --tasks a,b (the other fields are ignored)")

    def matches(self, t: Trial) -> bool:
        if self.tasks is not None:
            return t.task_name in self.tasks
        if t.status == TrialStatus.running:
            return False
        if self.status and (t.state_raw or "").lower() != self.status.lower():
            return False
        return not (self.exception_type and t.exception_type != self.exception_type)

    def args(self) -> list[str]:
        if self.tasks is not None:
            return ["--tasks", ",".join(self.tasks)]
        out: list[str] = []
        if self.status:
            out += ["--filter", self.status]
        if self.exception_type:
            out += ["--exception-type", self.exception_type]
        return out

    def describe(self) -> str:
        if self.tasks is not None:
            return f"the {len(self.tasks)} named task(s)"
        what = f"tasks Rock marks {self.status}" if self.status else "finished tasks"
        return what + (f" with {self.exception_type}" if self.exception_type else "")


def option_args(options: Mapping[str, Any]) -> list[str]:
    """Explicit options as regression.py flags: `window_size = 10` → `--window-size 10`."""
    out: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False:
            out.append("--no-" + key.replace("_", "-"))
        else:
            out += [flag, str(value)]
    return out


def effective_settings(base: Mapping[str, Any] | None, options: Mapping[str, Any]) -> list[str]:
    """--from-config: what each explicit option changes in the saved JSON."""
    base = base or {}
    lines = []
    for key, value in options.items():
        before = base.get(key, base.get(key.replace("-", "_")))
        lines.append(f"  {key}: {json.dumps(before)} → {json.dumps(value)} (explicit option)" if key in base
                     or key.replace("-", "_") in base else f"  {key}: {json.dumps(value)} (explicit option, "
                     "not in the saved config)")
    return lines


def _settings(source: Source) -> RockConfig | None:
    s = getattr(source, "settings", None)
    return s if isinstance(s, RockConfig) else None


def _saved_config(workdir: str, exp_id: str) -> tuple[dict[str, Any] | None, str | None]:
    path = os.path.join(workdir, "configs", f"{exp_id}.json")
    from services.core.input_files import read_json

    try:
        data = read_json(path, max_bytes=8 * 1024 * 1024)
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"configs/{exp_id}.json cannot be read ({exc})"
    return (data if isinstance(data, dict) else None), None


def build_plan(exp: Experiment, settings: RockConfig, flt: RetryFilter | None = None, *,
               experiment: str | None = None, now: datetime | None = None,
               index: RecordIndex | None = None) -> Plan:
    """The retry plan: pure apart from reading the saved config and this machine's records."""
    flt = flt or RetryFilter()
    workdir = exp.path
    chosen = [t for t in exp.trials if t.copy_of is None and flt.matches(t)]
    base, cfg_problem = _saved_config(workdir, exp.id)
    script = settings.regression
    argv = [settings.python, os.path.expanduser(script) if script else "regression.py", "retry", exp.id]
    if base is not None:
        argv += ["--from-config", f"configs/{exp.id}.json"]
    argv += flt.args() + option_args(settings.retry_options)
    digest = hashlib.sha256(json.dumps(
        {"exp": exp.id, "tasks": [(t.task_name, t.state_raw, t.exception_type) for t in chosen], "argv": argv},
        sort_keys=True).encode()).hexdigest()
    key = experiment_key(exp)
    plan = Plan(
        id=new_record_id(ACTION, now, digest), action=ACTION,
        title=f"Retry {len(chosen)} task(s) of {exp.id} with regression.py",
        target=workdir, experiment=key, input_hash=digest, lock_dir=workdir, record_dir=None,
        # verbatim: the preview names the work dir itself (the command runs there), not the experiment
        meta={"verbatim": True, "command": argv, "cwd": workdir, "tasks": [t.task_name for t in chosen],
              "filter": flt.model_dump(), "journal": {"experiment": exp.id, "tasks": len(chosen)}},
    )
    if not chosen:
        plan.preview = [f"{exp.id}: no task matches ({flt.describe()}); nothing to retry"]
        return plan
    done = [e for e in (index or RecordIndex()).all()
            if e.get("action") == ACTION and e.get("experiment") == key and e.get("status") == "applied"
            and str(e.get("id", "")).endswith(digest[:6])]
    if done:
        plan.preview = [f"{exp.id}: this retry already ran (record {done[0]['id']}); its tasks are in the "
                        "newer experiment regression.py wrote"]
        plan.meta["already"] = done[0]["id"]
        return plan
    plan.steps = [command_step(argv, f"regression.py retry {exp.id}", cwd=workdir)]
    blocked = []
    if not script:
        blocked.append('regression.py is not configured: set regression = "/path/to/regression.py" in the '
                       "[[rock]] entry for this work dir")
    elif not os.path.isfile(os.path.expanduser(script)):
        blocked.append(f"{script} does not exist")
    if exp.state in LIVE:
        blocked.append(f"{exp.id} is still {exp.state.value}: sync it and wait for it to end before retrying")
    if base is None and not {"bench", "agent"} <= set(settings.retry_options):
        blocked.append(cfg_problem or f"configs/{exp.id}.json is missing: add bench and agent to retry_options")
    kinds = sorted({t.exception_type or t.state_raw or "?" for t in chosen})
    plan.preview = [
        f"Retry {len(chosen)} task(s) of {exp.id} ({exp.benchmark or '?'}) as a new experiment — "
        f"{flt.describe()}:",
        f"  {display(argv, workdir)}",
        f"Tasks ({len(chosen)}; {', '.join(kinds)}): " + ", ".join(t.task_name for t in chosen[:12])
        + (f" … +{len(chosen) - 12}" if len(chosen) > 12 else ""),
    ]
    if base is not None:
        plan.preview.append(f"Settings: configs/{exp.id}.json is the base; explicit options override it"
                            + (":" if settings.retry_options else " (none given)"))
        plan.preview += effective_settings(base, settings.retry_options)
    plan.preview.append(f"results/{exp.id}.json is not changed; regression.py writes the retry as a new "
                        "results/<new id>.json.")
    if blocked:
        plan.blocked = "; ".join(blocked)
        plan.preview.append(f"Cannot run yet: {plan.blocked}")
    return plan


async def plan_for(exp: Experiment, source: Source, config: Config, now: datetime | None = None,
                   flt: RetryFilter | None = None) -> Plan:
    settings = _settings(source)
    if exp.source != "rock" or settings is None or exp.path.startswith("rock://"):
        raise WriteRefused(f"{exp.id}: retry re-runs tasks of a Rock regression.py work dir; this experiment "
                           "is not one")
    return build_plan(exp, settings, flt, now=now)


def context(source: Source, config: Config) -> StepContext:
    return StepContext(LocalFS(), runner=LocalRunner())


def batch_json(plan: Plan, applied: bool, record: str | None = None) -> dict[str, Any]:
    return {"id": plan.meta.get("journal", {}).get("experiment"), "retry": plan.meta.get("tasks", []),
            "command": plan.meta.get("command"), "host": plan.host, "applied": applied, "record": record,
            "blocked": plan.blocked}
