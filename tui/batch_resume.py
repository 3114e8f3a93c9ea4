"""`evaldesk --batch resume [--exception TYPE…] [--apply] JOB…` (DESIGN 7).

Without --apply: the plan of each job — the trials it would set aside, where to, and the exact
command with its host — and exit 1 when any job has something to resume. With --apply: set
them aside, run the command (its output streams to stderr as it comes), wait for it (a local
`harbor jobs resume` to the end, an `sbatch` until it prints the job id) and exit 0 when every
command exited 0; 1 when a job was refused or its command failed (the trials set aside are
offered back: `--batch undo RECORD`); 2 for a type that matches nothing anywhere, an
unreadable source, or a host that dropped mid-run.
"""

from __future__ import annotations

import json
from typing import IO, TYPE_CHECKING, Any

from services.core.config import Config
from services.core.journal import Journal
from services.core.models import Experiment
from services.core.source import Source, SourceUnavailable
from services.remediations import registry, resume
from services.remediations.base import WritePath
from services.remediations.errors import LockHeld, StepFailed, WriteRefused
from services.remediations.job_commands import printable
from services.remediations.job_step import command_failed
from services.remediations.records import Plan, Record
from services.remediations.steps import StepContext

if TYPE_CHECKING:
    from rich.console import Console

EXIT_OK, EXIT_ACTION, EXIT_USAGE = 0, 1, 2


def _types(args: Any) -> list[str]:
    return [x.strip() for e in (getattr(args, "exception", None) or []) for x in str(e).split(",") if x.strip()]


def _last_result(record: Record | None) -> dict[str, Any]:
    if record is None:
        return {}
    for r in record.results.values():
        if "exit_code" in r or "error" in r:
            return r
    return {}


async def run_resume(args: Any, config: Config, exps: list[tuple[Source, Experiment]], fmt: str,
                     console: Console, out: IO[str], progress: Any) -> int:
    err: IO[str] = progress.err
    types = _types(args)
    read_only = bool(args.read_only or config.read_only)
    write_path = WritePath(Journal(config.journal_path), read_only=read_only)
    results: list[tuple[Plan, Record | None]] = []
    worst = EXIT_OK
    matched_somewhere = not types

    def bump(code: int) -> None:
        nonlocal worst
        worst = max(worst, code)

    for src, exp in exps:
        try:
            plan = await registry.plan("resume", exp, src, config, options={"types": types} if types else None)
        except WriteRefused as exc:
            err.write(f"evaldesk: {exp.id}: {exc}\n")
            bump(EXIT_ACTION)
            continue
        unmatched = set(plan.meta.get("unmatched") or [])
        if types and len(unmatched) < len({resume.normalise_type(t): t for t in types}):
            matched_somewhere = True
        if unmatched:
            err.write(f"evaldesk: {exp.id}: no errored trial has the type(s) {', '.join(sorted(unmatched))}\n")
        record: Record | None = None
        if plan.nothing_to_do:
            pass
        elif plan.blocked:
            bump(EXIT_ACTION)
            if args.apply:
                err.write(f"evaldesk: {exp.id}: resume refused, nothing moved: {plan.blocked}\n")
        elif args.apply:
            record = await _apply(plan, exp, src, config, write_path, err, progress, bump,
                                  break_lock=bool(getattr(args, "break_lock", False)))
        else:
            bump(EXIT_ACTION)
        results.append((plan, record))
    if not matched_somewhere:
        err.write(f"evaldesk: --exception {' '.join(types)}: no errored trial of any job has that type\n")
        bump(EXIT_USAGE)
    if fmt == "json":
        out.write(json.dumps({"plans": [resume.batch_json(p, r) for p, r in results]}, default=str) + "\n")
    elif fmt == "jsonl":
        for p, r in results:
            out.write(json.dumps(resume.batch_json(p, r), default=str) + "\n")
    else:
        for p, r in results:
            for line in p.preview:
                # never wrapped: the command and its paths must read exactly as they will run
                console.print(line, highlight=False, markup=False, soft_wrap=True)
            status = _status(p, r, args.apply)
            if status:
                console.print(status, highlight=False, markup=False)
            console.print()
    return worst


async def _apply(plan: Plan, exp: Experiment, src: Source, config: Config, write_path: WritePath, err: IO[str],
                 progress: Any, bump: Any, break_lock: bool = False) -> Record | None:
    progress(0, len(plan.steps), f"resume of {exp.id}: {len(plan.steps) - 1} trial dir(s), then the command")

    def on_output(stream: str, text: str) -> None:
        err.write(printable(text))
        err.flush()

    async def run() -> Record:
        return await registry.apply("resume", plan, exp.id, src, config, write_path,
                                    progress=lambda i, n, m: progress(i, n, m), resources={"on_output": on_output})

    try:
        try:
            record = await run()
        except LockHeld as held:
            if not (break_lock and held.can_break and plan.lock_dir):
                raise
            # the lock of a writer that died before its write began, with what it left half made
            ctx = StepContext(src.fs())
            owner = await write_path.clear_dead_lock(ctx, plan.lock_dir, record_root=plan.lock_dir, stale=True)
            if owner is None:
                raise
            err.write(f"evaldesk: broke the stale lock on {plan.lock_dir} held by {owner.describe()}: "
                      f"{held.stale_reason}\n")
            record = await run()
    except WriteRefused as exc:
        err.write(f"evaldesk: {exp.id}: resume refused, nothing moved: {exc}\n")
        bump(EXIT_ACTION)
        return None
    except StepFailed as exc:
        err.write(f"evaldesk: {exp.id}: {exc}\n")
        bump(EXIT_ACTION)
        return None
    except SourceUnavailable as exc:
        err.write(f"evaldesk: {exp.id}: cannot reach {exc.where}: {exc.message}\n")
        bump(EXIT_USAGE)
        return None
    result = _last_result(record)
    failed = command_failed(result)
    n = len(plan.meta.get("rerun", []))
    if failed:
        dropped = result.get("exit_code") is None
        how = (f"`evaldesk --batch undo {record.id}` asks {plan.host or 'this machine'} whether the command still "
               "runs and puts them back once it has ended" if dropped else
               f"`evaldesk --batch undo {record.id}` puts them back while the job has no new trials")
        err.write(f"evaldesk: {exp.id}: the resume command failed ({failed}); the {n} trial(s) set aside stay in "
                  f"{plan.meta.get('aside')} — {how}\n")
        bump(EXIT_USAGE if dropped else EXIT_ACTION)
    elif result.get("slurm_job_id"):
        err.write(f"evaldesk: {exp.id}: submitted SLURM job {result['slurm_job_id']} on "
                  f"{plan.host or 'this machine'}; `evaldesk --batch monitor` follows it\n")
    return record


def _status(plan: Plan, record: Record | None, apply: bool) -> str:
    if plan.nothing_to_do:
        return ""
    if record is not None:
        result = _last_result(record)
        failed = command_failed(result)
        if failed:
            return f"applied: record {record.id}; the command failed ({failed}) — undo puts the trials back"
        sid = f", SLURM job {result['slurm_job_id']}" if result.get("slurm_job_id") else ""
        return f"applied: record {record.id}; the command exited {result.get('exit_code')}{sid}"
    if plan.blocked:
        return "refused: nothing moved"
    return "" if apply else "dry run: nothing moved; add --apply to carry it out"
