"""Launch and resume of AISBench tasks, as plans for the write path.

**Launch** (a task asked for but not running: `needs_input`, `blocked`, `pending`, `removed`):
the preflight runs first (read-only, from the eval host); then the steps write the task dir on
the host and start run.sh detached:

    1. mkdir -p -m 700 <task dir> <task dir>/cfg/models
    2. write task.json, cfg/config.py, run.sh                     (previewed in full)
    3. write cfg/models/api_model.py, then chmod 600             (the API key, from an env var,
                                                                   put in on the host only)
    4. docker mode: docker run -d --name ais-bench-eval-<id> … sleep infinity
    5. setsid -f nohup bash <task dir>/run.sh                     (host mode), or
       docker exec -d ais-bench-eval-<id> bash <task dir>/run.sh (docker mode)

**Resume** (a `failed` task evaldesk launched): the last attempt's exit code and pid are kept
under `attempts/<record>/`, then run.sh starts again — with `--reuse <latest run>` for accuracy
and agent runs, so AISBench carries on from the predictions it already has; a perf run measures
again in a new run dir (in perf mode `--reuse` only reloads the old run's metrics).

A plan whose preflight failed is `blocked` (it previews, it never applies); a launch without
max-out-len or batch size asks for them first (`inputs_for`), with the runbook's guidance.
What the preflight found is remembered in the task table (evaldesk's own bookkeeping).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import UTC, datetime
from typing import Any

from services.aisbench import agentcfg, runbook
from services.aisbench.formats import HostEntry, TaskMeta, TaskRow
from services.aisbench.models import LAUNCH, RESUME, TaskExperiment
from services.aisbench.preflight import Preflight, check_api, run_preflight
from services.aisbench.source import AISBenchSource
from services.aisbench.steps import launched_step, model_config_step
from services.aisbench.taskdir import (
    DEFAULT_BATCH,
    DEFAULT_MAX_OUT_LEN,
    HEADROOM_TOKENS,
    RequestError,
    ais_bench_argv,
    container_argv,
    container_name,
    detach_argv,
    meta_json,
    model_abbr,
    paths,
    render_config,
    render_model,
    render_run_sh,
    suite,
)
from services.core.config import Config
from services.core.models import Experiment, State
from services.core.source import Source
from services.remediations.command import command_step
from services.remediations.errors import WriteRefused
from services.remediations.inputs import InputField
from services.remediations.records import Plan, new_record_id
from services.remediations.steps import MoveStep, Step, StepContext, WriteFileStep
from services.transport.process import display

LAUNCHABLE = (State.needs_input, State.blocked, State.pending, State.removed)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def new_task_id(suite_name: str, now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{suite_name}-{stamp}-{secrets.token_hex(2)}"


def _source(source: Source) -> AISBenchSource:
    if not isinstance(source, AISBenchSource):
        raise WriteRefused(f"{source.label} is not an AISBench task root")
    return source


def _task(exp: Experiment) -> TaskExperiment:
    if not isinstance(exp, TaskExperiment):
        raise WriteRefused(f"{exp.id} is not an AISBench task")
    return exp


def _host(src: AISBenchSource) -> HostEntry:
    if src.host_entry is None:
        raise WriteRefused(f"{src.label}: no host entry (image, source dir) to launch with")
    return src.host_entry


# ---- what a person is asked ----------------------------------------------------------------------

def guidance(row: TaskRow, max_model_len: int | None) -> list[InputField]:
    """The runbook's guidance for the two values it never guesses."""
    fields: list[InputField] = []
    mode = row.mode
    if row.max_out_len is None:
        if max_model_len:
            limit = max(1, max_model_len - HEADROOM_TOKENS)
            bound = (f"The server reports max-model-len {max_model_len}: at most {limit} "
                     f"({max_model_len} − 8K).")
        else:
            limit = None
            bound = ("At most the server's --max-model-len − 8K (see its start script; the server did not "
                     "report it).")
        fields.append(InputField(
            name="max_out_len", label="max-out-len (max output tokens per request)",
            guidance=f"{bound} Input + output must fit max-model-len or the server answers 400. Thinking models "
                     "are very sensitive to truncation (gsm8k on one server: 512 → 25%, 2048 → 65%, "
                     "max-model-len − 8K → 90%): a low value makes the score meaningless.",
            suggested=limit or DEFAULT_MAX_OUT_LEN, maximum=max_model_len))
    if row.batch_size is None:
        fields.append(InputField(
            name="batch_size", label="batch size (concurrent requests)",
            guidance="Match the server's --max-num-seqs (its start script): accuracy runs 16–128, fastest when "
                     "equal to max-num-seqs; perf runs per the load you want to measure; agent suites: the "
                     "number of concurrent instances.",
            suggested=DEFAULT_BATCH.get(mode, 16)))
    return fields


async def inputs_for(exp: Experiment, source: Source, config: Config) -> list[InputField]:
    """What a launch of `exp` still needs; asks the model server (from the eval host) for its
    max-model-len so the guidance has a real bound."""
    task = _task(exp)
    src = _source(source)
    row = await src.row(task.id)
    if row is None or not row.missing or task.state not in LAUNCHABLE:
        return []
    max_len = row.max_model_len
    if max_len is None:
        try:
            _, max_len, _ = await check_api(src.runner, row.api_base, row.model)
        except Exception:  # guidance only: the preflight proper reports the failure
            max_len = None
        if max_len:
            await src.put_row(row.model_copy(update={"max_model_len": max_len}))
    return guidance(row, max_len)


async def provide_inputs(exp: Experiment, source: Source, config: Config, values: dict[str, Any]) -> None:
    """Keep a person's answers in the task's row, so the plan (and its re-plan under the lock)
    is made from them."""
    src = _source(source)
    row = await src.row(exp.id)
    if row is None:
        raise WriteRefused(f"{exp.id} is not in the task table")
    update: dict[str, Any] = {}
    for name in ("max_out_len", "batch_size"):
        if name in values and values[name] is not None:
            v = int(values[name])
            if v < 1:
                raise WriteRefused(f"{name.replace('_', '-')} must be at least 1")
            update[name] = v
    if row.max_model_len and update.get("max_out_len", 0) > row.max_model_len:
        raise WriteRefused(f"max-out-len {update['max_out_len']} is over the server's max-model-len "
                           f"{row.max_model_len}: every request would be refused")
    await src.put_row(row.model_copy(update=update))


# ---- plans ------------------------------------------------------------------------------------

def _blocked(pf: Preflight) -> str | None:
    if pf.ok:
        return None
    failed = pf.failed
    if failed is None:
        return "the preflight did not finish"
    return f"preflight failed at '{failed.step}': {failed.evidence}"


def _preflight_lines(pf: Preflight, where: str) -> list[str]:
    lines = [f"Preflight (from {where}):"]
    for s in pf.steps:
        lines.append(f"  {'ok  ' if s.ok else 'FAIL'}  {s.step}: {s.evidence}")
    if len(pf.steps) < 4:
        lines.append("  skipped  the other steps: the host cannot be reached")
    return lines


async def _remember(src: AISBenchSource, row: TaskRow, pf: Preflight, now: datetime) -> TaskRow:
    update: dict[str, Any] = {"preflight": pf.steps, "preflight_at": now}
    if pf.max_model_len:
        update["max_model_len"] = pf.max_model_len
    new = row.model_copy(update=update)
    await src.put_row(new)
    return new


async def plan_launch(exp: Experiment, source: Source, config: Config, now: datetime | None = None) -> Plan:
    task = _task(exp)
    src = _source(source)
    host = _host(src)
    now = now or datetime.now(UTC)
    row = await src.row(task.id)
    if row is None:
        raise WriteRefused(f"{task.id}: not in the task table; launch a new task with `--batch launch`")
    if task.state not in LAUNCHABLE:
        raise WriteRefused(f"{task.id} is {task.state_raw or task.state.value}: "
                           + ("resume it instead" if task.state == State.failed else "nothing to launch"))
    try:
        s = suite(row.suite)
        p = paths(src.task_root, task.id)
    except RequestError as exc:
        raise WriteRefused(f"{task.id}: {exc}") from None
    where = src.host or "this machine"
    if row.missing:
        what = " and ".join(m.replace("_", "-") for m in row.missing)
        fields = guidance(row, row.max_model_len)
        preview = [f"{task.id} needs input: {what} not given. The runbook never guesses them:"]
        preview += [f"  {f.label}: {f.guidance}" for f in fields]
        return Plan(id=new_record_id(LAUNCH, now, _sha(task.id + what)), action=LAUNCH,
                    title=f"Launch AISBench task {task.id}", target=p["dir"], host=src.host,
                    experiment=f"{exp.source_label}::{exp.id}", input_hash=_sha(task.id + what), steps=[],
                    preview=preview, blocked=f"needs input: {what}",
                    meta={"task_id": task.id, "status": "needs_input", "missing": row.missing, "full_paths": True,
                          "ask": [f.model_dump() for f in fields]})
    pf = await run_preflight(src.runner, host, src.task_root, row.api_base, row.model)
    row = await _remember(src, row, pf, now)
    meta = TaskMeta(id=task.id, suite=s.name, mode=s.mode, model=row.model, model_abbr=model_abbr(row.model),
                    api_base=row.api_base, api_key_env=row.api_key_env,
                    max_out_len=row.max_out_len, batch_size=row.batch_size, num_prompts=row.num_prompts,
                    created_at=row.created_at, launched_at=now, host=src.host or "local")
    argv = ais_bench_argv(host, p["dir"], s, row.num_prompts)
    meta.command = argv
    agent = s.mode == "agent"
    try:
        # an agent suite is one whole config (it may hold the key); the others a composed one
        config_py = agentcfg.render(s, meta, host) if agent else render_config(s)
    except RequestError as exc:
        raise WriteRefused(f"{task.id}: {exc}") from None
    model_tpl = "" if agent else render_model(s, meta, host.tokenizer_path if s.mode == "perf" else None)
    run_sh = render_run_sh(host, p["dir"], argv)
    detach = detach_argv(host, task.id, p["dir"], [])
    # launched_at changes with the clock: the digest covers what the steps do, not when
    stable_meta = meta_json(meta.model_copy(update={"launched_at": None}))
    blocked = _blocked(pf)
    digest = _sha(json.dumps([task.id, stable_meta, config_py, model_tpl, run_sh, detach, host.uses_docker,
                              blocked is None]))
    record_id = new_record_id(LAUNCH, now, digest)
    steps: list[Step] = [
        command_step(["mkdir", "-p", "-m", "700", p["dir"], p["cfg"] if agent else p["models"]],
                     "make the task dir (mode 700)"),
        WriteFileStep(path=p["meta"], content=meta_json(meta), new_sha256=_sha(meta_json(meta)), old_sha256=None,
                      backup=f"{p['meta']}.orig", label="task.json"),
    ]
    if agent:
        steps += [model_config_step(p["config"], config_py, row.api_key_env, "cfg/config.py"),
                  command_step(["chmod", "600", p["config"]], "chmod 600 cfg/config.py")]
    else:
        steps += [
            WriteFileStep(path=p["config"], content=config_py, new_sha256=_sha(config_py), old_sha256=None,
                          backup=f"{p['config']}.orig", label="cfg/config.py"),
            model_config_step(p["model"], model_tpl, row.api_key_env),
            command_step(["chmod", "600", p["model"]], "chmod 600 cfg/models/api_model.py")]
    steps += [
        WriteFileStep(path=p["run"], content=run_sh, new_sha256=_sha(run_sh), old_sha256=None,
                      backup=f"{p['run']}.orig", label="run.sh"),
    ]
    if host.uses_docker:
        steps.append(command_step(container_argv(host, task.id), f"start the task's container "
                                                                 f"{container_name(host, task.id)}"))
    steps.append(command_step(detach, "start run.sh detached"))
    steps.append(launched_step(task.id, now.isoformat()))
    key_file = "cfg/config.py" if agent else "cfg/models/api_model.py"
    key_note = (f"read from ${row.api_key_env} here and written only into {key_file} on the host"
                if row.api_key_env else "none (the server needs no key)")
    how = "docker exec in its own container" if host.uses_docker else "setsid/nohup on the host"
    preview = [
        f"Launch AISBench task {task.id} on {where} ({how})",
        f"  task dir:  {p['dir']}",
        (f"  suite:     {s.name} (agent: the whole config of the tool's {s.module} example, dataset {s.variable})"
         if agent else f"  suite:     {s.name} ({s.mode}), datasets {s.variable} of {s.module}"),
        f"  model:     {row.model} at {row.api_base}",
        f"  API key:   {key_note}",
        f"  max-out-len {row.max_out_len}, batch size {row.batch_size}"
        + (f", {row.num_prompts} prompts" if row.num_prompts else ""),
        "",
        *_preflight_lines(pf, where),
        "",
        "Steps:",
    ]
    preview += [f"  {i + 1}. {_describe(step)}" for i, step in enumerate(steps)]
    preview += ["", "The exact command (returns at once; the run goes on in the background):",
                f"  {display(detach, host=src.host)}",
                "run.sh then runs, from the AISBench source dir:",
                f"  cd {host.benchmark_src} && {display(argv)}",
                f"and records its exit code in {p['exit_code']} (a results file decides the outcome, "
                "not that code)."]
    if blocked:
        preview += ["", f"Blocked — {blocked}. Nothing will be written on the host."]
    lock_dir = src.task_root if await src.task_fs().stat(src.task_root) is not None else None
    return Plan(
        id=record_id, action=LAUNCH, title=f"Launch AISBench task {task.id}", target=p["dir"], host=src.host,
        experiment=f"{exp.source_label}::{exp.id}", input_hash=digest, steps=steps, preview=preview,
        lock_dir=lock_dir, record_dir=None, blocked=blocked,
        meta={"task_id": task.id, "task_dir": p["dir"], "command": detach, "ais_bench": argv,
              "status": "blocked" if blocked else "running", "preflight": [s.model_dump() for s in pf.steps],
              "full_paths": True,
              "journal": {"task": task.id, "suite": s.name, "host": where}},
    )


async def plan_resume(exp: Experiment, source: Source, config: Config, now: datetime | None = None) -> Plan:
    task = _task(exp)
    src = _source(source)
    host = _host(src)
    now = now or datetime.now(UTC)
    try:
        p = paths(src.task_root, task.id)
    except RequestError as exc:  # a dir made by hand with a name no shell should see unquoted
        raise WriteRefused(f"{task.id!r}: {exc}") from None
    if not task.task.has_dir:
        raise WriteRefused(f"{task.id} has no task dir: launch it instead")
    if task.state == State.running:
        raise WriteRefused(f"{task.id} is still running")
    if task.state == State.finished:
        raise WriteRefused(f"{task.id} finished with results: nothing to resume")
    if task.task.origin == "runbook":
        return await _plan_runbook_resume(task, src, host, p, now)
    if not task.task.launched_by_evaldesk or not task.task.has_run_sh:
        raise WriteRefused(f"{task.id} was not launched by evaldesk (no task.json/run.sh of its own): resume it "
                           "with the tool that launched it")
    row = await src.row(task.id)
    api_base = (row.api_base if row else None) or task.task.api_base or ""
    model = (row.model if row else None) or task.model
    pf = await run_preflight(src.runner, host, src.task_root, api_base, model)
    if row is not None:
        row = await _remember(src, row, pf, now)
    # in perf mode `--reuse` skips inference and only reloads the broken run's metrics
    # (ais_bench/benchmark/cli/task_manager.py → perf_viz): a perf resume measures again
    perf = task.task.mode == "perf"
    extra = ["--reuse", task.task.run] if task.task.run and not perf else []
    detach = detach_argv(host, task.id, p["dir"], extra)
    blocked = _blocked(pf)
    digest = _sha(json.dumps([task.id, task.task.run, task.task.exit_code, detach, blocked is None]))
    record_id = new_record_id(RESUME, now, digest)
    steps: list[Step] = []
    if task.task.exit_code is not None or task.task.pid is not None:
        # the last attempt's exit code and (dead) pid are kept under attempts/<record>/, by a
        # command rather than as moves: run.sh writes both anew as soon as it starts, so a move's
        # check that its source stays gone would race the run it just started
        steps.append(command_step(
            ["sh", "-c", 'cd "$1" && mkdir -p "attempts/$2" && for f in exit_code pid; do '
                         'if [ -e "$f" ]; then mv -n "$f" "attempts/$2/"; fi; done', "sh", p["dir"], record_id],
            f"keep the last attempt's exit_code ({task.task.exit_code}) and pid under attempts/{record_id}/"))
    if host.uses_docker:
        steps.append(command_step(["docker", "start", container_name(host, task.id)],
                                  f"start the task's container {container_name(host, task.id)}"))
    steps.append(command_step(detach, "start run.sh detached" + (f" with --reuse {task.task.run}" if extra else "")))
    where = src.host or "this machine"
    preview = [
        f"Resume AISBench task {task.id} on {where}: {task.task.reason or task.state_raw}",
        f"  task dir:  {p['dir']}",
        f"  AISBench carries on from run {task.task.run} (--reuse): datasets with predictions are not asked "
        "again" if extra else f"  a perf run measures again: a new run dir beside {task.task.run} (--reuse would only "
        "reload its metrics)" if perf and task.task.run else "  no earlier run dir: AISBench starts a new run",
        "",
        *_preflight_lines(pf, where),
        "",
        "Steps:",
        *(f"  {i + 1}. {_describe(step)}" for i, step in enumerate(steps)),
        "",
        "The exact command (returns at once; the run goes on in the background):",
        f"  {display(detach, host=src.host)}",
    ]
    if blocked:
        preview += ["", f"Blocked — {blocked}. Nothing will change on the host."]
    return Plan(
        id=record_id, action=RESUME, title=f"Resume AISBench task {task.id}", target=p["dir"], host=src.host,
        experiment=f"{exp.source_label}::{exp.id}", input_hash=digest, steps=steps, preview=preview,
        lock_dir=p["dir"], record_dir=None, blocked=blocked,
        meta={"task_id": task.id, "task_dir": p["dir"], "command": detach,
              "status": "blocked" if blocked else "running", "preflight": [s.model_dump() for s in pf.steps],
              "full_paths": True, "journal": {"task": task.id, "reuse": task.task.run, "host": where}},
    )


async def _plan_runbook_resume(task: TaskExperiment, src: AISBenchSource, host: HostEntry, p: dict[str, str],
                               now: datetime) -> Plan:
    """The runbook's own resume (eval_run.py --reuse): its run.sh with `--reuse <run>` on the
    ais_bench line (a perf run: none, it measures again), the last exit code kept aside, the
    task's container started if stopped, then its bootstrap.sh again in the container."""
    if not task.task.has_run_sh:
        raise WriteRefused(f"{task.id}: no run.sh in its task dir: relaunch it with the runbook's eval_run.py")
    container = task.task.container or container_name(host, task.id)
    try:
        old = (await src.task_fs().read_regular(p["run"], 1024 * 1024)).decode("utf-8")
        perf = task.task.mode == "perf"
        # the run eval_status.py anchored wins over the newest dir, as in eval_run.py (a container's
        # clock can be off the host's, and the newest name then the wrong run)
        run = task.task.output_ts or task.task.run
        new = runbook.with_reuse(old, None if perf or not run else run)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise WriteRefused(f"{task.id}: cannot resume its run.sh the runbook's way: {exc}") from None
    pf = await run_preflight(src.runner, host, src.task_root, task.task.api_base or "", task.model)
    blocked = _blocked(pf)
    start = ["docker", "exec", container, "bash", f"{p['dir']}/{runbook.BOOTSTRAP}"]
    digest = _sha(json.dumps([task.id, task.task.run, task.task.exit_code, new, start, blocked is None]))
    record_id = new_record_id(RESUME, now, digest)
    keep = f"attempts/{record_id}"
    steps: list[Step] = []
    if new != old:
        steps.append(WriteFileStep(path=p["run"], content=new, new_sha256=_sha(new), old_sha256=_sha(old),
                                   backup=f"{p['run']}.orig-{record_id}", label="run.sh"))
    steps.append(command_step(
        ["sh", "-c", 'cd "$1" && mkdir -p "$2" && for f in exit_code bootstrap.pid; do '
                     'if [ -e "$f" ]; then mv -n "$f" "$2/"; fi; done', "sh", p["dir"], keep],
        f"keep the last attempt's exit_code ({task.task.exit_code}) and bootstrap.pid under {keep}/"))
    steps.append(command_step(["docker", "start", container], f"start the task's container {container}"))
    steps.append(command_step(start, "start bootstrap.sh in the container (setsid run.sh, returns at once)"))
    where = src.host or "this machine"
    how = ("measures again: a new run dir (in perf mode --reuse would only reload the old run's metrics)"
           if task.task.mode == "perf" else f"carries on from run {run} (--reuse)" if run
           else "starts a new run")
    preview = [
        f"Resume AISBench task {task.id} (made by the runbook's eval_run.py) on {where}: "
        f"{task.task.reason or task.state_raw}",
        f"  task dir:  {p['dir']}", f"  container: {container}", f"  AISBench {how}", "",
        *_preflight_lines(pf, where), "", "Steps:",
        *(f"  {i + 1}. {_describe(step)}" for i, step in enumerate(steps)), "",
        "The exact command (returns at once; the run goes on in the background):",
        f"  {display(start, host=src.host)}",
    ]
    if blocked:
        preview += ["", f"Blocked — {blocked}. Nothing will change on the host."]
    return Plan(
        id=record_id, action=RESUME, title=f"Resume AISBench task {task.id}", target=p["dir"], host=src.host,
        experiment=f"{task.source_label}::{task.id}", input_hash=digest, steps=steps, preview=preview,
        lock_dir=p["dir"], record_dir=None, blocked=blocked,
        meta={"task_id": task.id, "task_dir": p["dir"], "command": start,
              "status": "blocked" if blocked else "running", "preflight": [s.model_dump() for s in pf.steps],
              "full_paths": True, "journal": {"task": task.id, "reuse": run, "host": where,
                                              "origin": "runbook"}},
    )


def _describe(step: Step) -> str:
    if isinstance(step, WriteFileStep):
        return f"write {step.label} ({len(step.content.encode())} bytes)"
    if isinstance(step, MoveStep):
        return f"move {step.label} (undo puts it back)"
    if step.handler == "command":
        return f"run: {display(step.args['argv'])}"
    return step.label


def context(source: Source, config: Config) -> StepContext:
    src = _source(source)
    return StepContext(src.task_fs(), runner=src.runner, table=src.table)


# ---- a new task: a row in the table, then the launch plan --------------------------------------

async def new_task(source: Source, config: Config, *, suite_name: str, model: str, api_base: str,
             max_out_len: int | None, batch_size: int | None, num_prompts: int | None = None,
             api_key_env: str | None = None, task_id: str | None = None,
             now: datetime | None = None) -> TaskRow:
    """Ask for a task: its row in the task table. Launching it is `aisbench_launch`."""
    src = _source(source)
    try:
        s = suite(suite_name)
        from services.aisbench.taskdir import api_url, check_task_id

        api_url(api_base)
        tid = check_task_id(task_id or new_task_id(s.name, now))
    except RequestError as exc:
        raise WriteRefused(str(exc)) from None
    if s.needs_num_prompts and not num_prompts:
        raise WriteRefused(f"suite {s.name} needs --num-prompts")
    if await src.row(tid) is not None:
        raise WriteRefused(f"task {tid} is already in the task table")
    key_env = api_key_env if api_key_env is not None else (src.host_entry.api_key_env if src.host_entry else None)
    if key_env is None:
        key_env = config.aisbench.api_key_env
    row = TaskRow(id=tid, where=src.where, task_root=src.task_root, suite=s.name, model=model, api_base=api_base,
                  api_key_env=key_env or None, mode=s.mode, max_out_len=max_out_len, batch_size=batch_size,
                  num_prompts=num_prompts, created_at=now or datetime.now(UTC))
    await src.put_row(row)
    return row
