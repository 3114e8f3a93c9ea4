"""`evaldesk --batch launch SOURCE …`: launch an AISBench task, or carry one on, headless.

    --batch launch aisbench+ssh://eval-a --suite gsm8k --model M --api-base http://ip:port/v1 \\
        [--max-out-len N] [--batch-size N] [--num-prompts N] [--api-key-env VAR] [--task-id ID] [--apply]
    --batch launch aisbench+ssh://eval-a --reuse TASK_ID [--max-out-len N --batch-size N] [--apply]

A new task is first a row in the task table; then, like `--reuse`, the task's own audit names
the remediation (`aisbench_launch` for a task not running, `aisbench_resume` for a failed one)
and it is planned through the remediation registry: the preflight runs from the eval host and
each step is reported. Without `--apply` the plan is printed and nothing changes on the host.
Missing max-out-len or batch size → `needs_input` with the guidance; a failed preflight →
`blocked` naming what is missing. Exit 0 when the launch (or the dry run) went through, 1 for
needs_input / blocked / a failed step, 2 for usage errors and unreachable hosts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.journal import Journal
from services.core.models import Experiment, experiment_key
from services.core.registry import backend, open_sources
from services.core.source import Source, SourceUnavailable
from services.remediations import inputs, registry
from services.remediations.base import WritePath
from services.remediations.errors import StepFailed, WriteRefused

if TYPE_CHECKING:
    from rich.console import Console

EXIT_OK, EXIT_ACTION, EXIT_USAGE = 0, 1, 2
ProgressFn = Any


def _result(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"ok": False, "status": None, "task_id": None, "source": None, "task_dir": None,
                            "action": None, "command": None, "preflight": [], "ask": [], "record": None,
                            "message": "", "preview": []}
    base.update(kw)
    return base


async def _find(source: Source, task_id: str) -> Experiment | None:
    snap = await source.scan()
    for exp in snap.experiments:
        if exp.id == task_id:
            if not exp.source_label:
                exp.source_label = source.label
            return exp
    return None


async def run_launch(args: Any, config: Config, fmt: str, progress: ProgressFn, console: Console,
                     out: IO[str], err: IO[str]) -> int:
    result = await _launch(args, config, progress)
    code = EXIT_OK if result["ok"] else (EXIT_USAGE if result["status"] == "usage" else EXIT_ACTION)
    if fmt in ("json", "jsonl"):
        out.write(json.dumps(result, ensure_ascii=False, default=str) + "\n")
    else:
        for line in result["preview"]:
            console.print(line, highlight=False, markup=False)
        if result["ask"]:
            for f in result["ask"]:
                console.print(f"  {f['label']}: {f['guidance']} (suggested {f['suggested']})", highlight=False,
                              markup=False)
        console.print(f"{result['status']}: {result['message']}", highlight=False, markup=False)
    return code


async def _launch(args: Any, config: Config, progress: ProgressFn) -> dict[str, Any]:
    if len(args.sources) != 1:
        return _result(status="usage", message="launch takes one SOURCE: an AISBench task root "
                                               "(aisbench+ssh://host/task_root, a hosts-file name as host, or a path)")
    spec = args.sources[0]
    try:
        aisbench = backend("aisbench")
        found = [s for s in open_sources(spec, config) if s.kind in aisbench.KINDS]
    except (SourceUnavailable, ValueError, KeyError) as exc:
        return _result(status="usage", message=str(getattr(exc, "message", None) or exc))
    if not found:
        return _result(status="usage", message=f"{spec} is not an AISBench task root")
    source = found[0]
    try:
        return await _launch_on(args, config, source, aisbench, progress)
    except SourceUnavailable as exc:
        return _result(status="blocked", source=source.label, message=f"{exc.where}: {exc.message}")
    finally:
        await source.close()


async def _launch_on(args: Any, config: Config, source: Source, aisbench: Any, progress: ProgressFn) -> dict[str, Any]:
    now = datetime.now(UTC)
    if args.reuse:
        task_id = args.reuse
    else:
        missing = [f"--{n.replace('_', '-')}" for n in ("suite", "model", "api_base") if not getattr(args, n, None)]
        if missing:
            return _result(status="usage", source=source.label,
                           message=f"a new task needs {', '.join(missing)} (or --reuse TASK_ID)")
        try:
            task_id = await aisbench.new_task(
                source, config, suite_name=args.suite, model=args.model, api_base=args.api_base,
                max_out_len=args.max_out_len, batch_size=args.batch_size, num_prompts=args.num_prompts,
                api_key_env=args.api_key_env, task_id=args.task_id, now=now)
        except WriteRefused as exc:
            return _result(status="usage", source=source.label, message=str(exc))
        progress(0, None, f"task {task_id} asked for on {source.label}")
    exp = await _find(source, task_id)
    if exp is None:
        return _result(status="usage", task_id=task_id, source=source.label,
                       message=f"no task {task_id} in {source.label}")
    report = audit_experiment(exp, config.policy, now)
    action = report.check("finished").remediation
    base = {"task_id": task_id, "source": source.label, "task_dir": exp.path}
    if action is None:
        return _result(status=exp.state_raw or exp.state.value, ok=exp.state.value in ("running", "finished"), **base,
                       message=f"{task_id} is {exp.state_raw or exp.state.value}: nothing to launch or resume")
    base["action"] = action
    given = {k: v for k, v in (("max_out_len", args.max_out_len), ("batch_size", args.batch_size)) if v is not None}
    if args.reuse and given:
        try:
            await inputs.provide(action, exp, source, config, given)
        except WriteRefused as exc:
            return _result(status="usage", **base, message=str(exc))
        exp = await _find(source, task_id) or exp
    fields = await inputs.needed(action, exp, source, config)
    if fields:
        names = " and ".join(f"--{f.name.replace('_', '-')}" for f in fields)
        return _result(status="needs_input", **base, ask=[f.model_dump() for f in fields],
                       message=f"{names} not given: the runbook never guesses them; run again with them "
                               f"(--reuse {task_id})")
    progress(0, 4, f"preflight of {task_id} from {getattr(source, 'host', None) or 'this machine'}")
    plan = await registry.plan(action, exp, source, config, now)
    steps = plan.meta.get("preflight", [])
    for i, s in enumerate(steps):
        # every step is reported: no total, so the throttle of busy progress never drops one
        progress(i + 1, None, f"preflight {i + 1}/4: {s['step']}: {'ok' if s['ok'] else 'FAIL'} — {s['evidence']}")
    base.update(preflight=steps, command=plan.meta.get("command"), preview=list(plan.preview))
    if plan.blocked:
        status = plan.meta.get("status") or "blocked"
        return _result(status=status, **base, ask=plan.meta.get("ask", []), message=plan.blocked)
    if not args.apply:
        return _result(ok=True, status="planned", **base,
                       message="dry run: nothing changed on the host; add --apply to launch")
    write_path = WritePath(Journal(config.journal_path), read_only=bool(args.read_only or config.read_only))
    try:
        record = await registry.apply(action, plan, exp.id, source, config, write_path,
                                      progress=lambda i, n, m: progress(i, n, m))
    except (WriteRefused, StepFailed) as exc:
        return _result(status="failed", **base, message=str(exc))
    progress(len(plan.steps), len(plan.steps), f"{task_id}: started")
    after = await _find(source, task_id)
    state = (after.state_raw or after.state.value) if after is not None else "running"
    return _result(ok=True, status="running" if state in ("running", "finished") else state, **base,
                   record=record.id, experiment=experiment_key(exp),
                   message=f"{task_id} launched on {getattr(source, 'host', None) or 'this machine'}: poll it with "
                           f"`evaldesk --batch list {source.label}` (run state now: {state})")
