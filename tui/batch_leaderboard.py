"""Batch commands over the leaderboard and the write path's records (DESIGN 7):

    evaldesk --batch fix CHECK_ID [--apply] SOURCE…   the remediation a failing check names
    evaldesk --batch journal [--since ISO]             every write evaldesk made, newest first
    evaldesk --batch undo RECORD_ID                    also for records kept on this machine

and the leaderboard context every batch audit reads once. No Textual import here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from services.audit.context import AuditContext
from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.journal import Journal
from services.core.models import CORE_CHECK_IDS, CheckStatus, Experiment, JournalEntry
from services.core.source import Source
from services.core.text import term_safe
from services.leaderboard.client import redact
from services.remediations.base import WritePath
from services.remediations.errors import StepFailed, WriteRefused
from services.remediations.records import Plan, Record

if TYPE_CHECKING:
    from rich.console import Console

EXIT_OK, EXIT_ACTION, EXIT_USAGE = 0, 1, 2


def _dump(obj: Any) -> str:
    return redact(json.dumps(obj, default=str, ensure_ascii=False))


async def leaderboard_context(config: Config, exps: list[Experiment], err: IO[str]) -> AuditContext | None:
    """The leaderboard, read once for a batch run (None when none is configured)."""
    from services.leaderboard import configured

    if not configured(config):
        return None  # and the leaderboard's modules are never imported
    from services.leaderboard.view import audit_context, load_view

    view = await load_view(config, exps)
    if view.error:
        err.write(f"evaldesk: leaderboard: {view.error}\n")
    return audit_context(view, config)


def known_checks() -> set[str]:
    from services.leaderboard.enrichment import LEADERBOARD_CHECK_IDS

    return set(CORE_CHECK_IDS) | set(LEADERBOARD_CHECK_IDS)


def step_json(step: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": step.kind, "label": getattr(step, "label", "")}
    if step.kind == "move":
        d.update(src=step.src, dst=step.dst)
    elif step.kind == "write_file":
        d.update(path=step.path)
    else:
        d.update(handler=step.handler, inverse=step.inverse,
                 **{k: v for k, v in step.args.items() if k in ("op", "table", "key", "values", "repo_id")})
    return d


def plan_json(exp: Experiment, check: str, status: str, plan: Plan | None, applied: Record | None,
              message: str | None = None, evidence: str | None = None) -> dict[str, Any]:
    return {
        "id": exp.id, "check": check, "status": status, "evidence": evidence, "action": plan.action if plan else None,
        "title": plan.title if plan else None, "steps": [step_json(s) for s in plan.steps] if plan else [],
        "preview": plan.preview if plan else ([message] if message else []),
        "blocked": plan.blocked if plan else None, "applied": applied is not None,
        "record": applied.id if applied else None, "message": message,
    }


async def run_fix(args: Any, config: Config, exps: list[tuple[Source, Experiment]], check_id: str, fmt: str,
                  console: Console, out: IO[str], err: IO[str], progress: Any) -> int:
    from services.remediations import inputs, registry
    # (as tui.batch_records.write_path_for makes it; that module imports this one)
    why = config.read_only_why or ("--read-only" if args.read_only else "read_only = true in the config")
    write_path = WritePath(Journal(config.journal_path), read_only=bool(args.read_only or config.read_only),
                           read_only_why=why)
    context = await leaderboard_context(config, [e for _, e in exps], err)
    now = datetime.now(UTC)
    worst = EXIT_OK
    results: list[dict[str, Any]] = []
    audits = [(src, exp, audit_experiment(exp, config.policy, now, context)) for src, exp in exps]
    seen = {c.id for _, _, r in audits for c in r.checks}
    if check_id not in seen and check_id not in known_checks():
        err.write(f"evaldesk: {check_id!r} is not a check of these experiments (their checks: "
                  f"{', '.join(sorted(seen))})\n")
        return EXIT_USAGE
    given = {k: v for k in ("max_out_len", "batch_size") if (v := getattr(args, k, None)) is not None}
    for src, exp, report in audits:
        check = next((c for c in report.checks if c.id == check_id), None)
        if check is None:
            results.append(plan_json(exp, check_id, "skip", None, None, f"{exp.id}: no {check_id} check here"))
            continue
        if not check.remediation:
            # a refusal says why: the check's evidence names the rows it read
            done = check.status in (CheckStatus.pass_, CheckStatus.skip)
            what = "nothing to do" if done else "nothing evaldesk can run"
            msg = (f"{exp.id}: {check_id} {check.status.value}: {what}. Why: {check.evidence}"
                   + (f". Recommended: {check.action}" if check.action else ""))
            if check.status == CheckStatus.fail:
                worst = EXIT_ACTION
            results.append(plan_json(exp, check_id, check.status.value, None, None, msg, check.evidence))
            continue
        fields = await inputs.needed(check.remediation, exp, src, config)
        if fields and given and args.apply:
            # the values a person gave on the command line, kept where the remediation keeps them
            await inputs.provide(check.remediation, exp, src, config, given)
            exp = await registry.rescan(src, exp.id)
            fields = await inputs.needed(check.remediation, exp, src, config)
        if fields:
            names = " and ".join(f"--{f.name.replace('_', '-')}" for f in fields)
            msg = (f"{exp.id}: {check_id} {check.status.value}: {check.remediation} needs {names} (the runbook never "
                   f"guesses them); run again with them and --apply")
            worst = EXIT_ACTION
            results.append(plan_json(exp, check_id, check.status.value, None, None, msg, check.evidence))
            continue
        plan = await registry.plan(check.remediation, exp, src, config)
        applied: Record | None = None
        message = None
        if args.apply and plan.steps and not plan.blocked:
            progress(0, len(plan.steps), f"{plan.action} of {exp.id}: {len(plan.steps)} step(s)")
            try:
                applied = await registry.apply(check.remediation, plan, exp.id, src, config, write_path,
                                               progress=lambda i, n, m: progress(i, n, m))
            except WriteRefused as exc:
                message = f"refused, nothing changed: {exc}"
                worst = EXIT_ACTION
            except StepFailed as exc:
                message = f"failed: {exc}"
                worst = EXIT_ACTION
        elif plan.steps or plan.blocked:
            worst = EXIT_ACTION
        results.append(plan_json(exp, check_id, check.status.value, plan, applied, message, check.evidence))
    if fmt == "json":
        out.write(_dump({"plans": results}) + "\n")
    elif fmt == "jsonl":
        for r in results:
            out.write(_dump(r) + "\n")
    else:
        # rows of other users (their job names) and dir names reach the terminal escaped
        for r in results:
            console.print(term_safe(f"[{r['check']} {r['status']}] {r['title'] or r['id']}"), highlight=False,
                          markup=False)
            for line in r["preview"]:
                console.print(term_safe(redact(line)), highlight=False, markup=False)
            if r["applied"]:
                console.print(f"applied: record {r['record']} (evaldesk --batch undo {r['record']} rolls it back "
                              "where its steps have inverses)", highlight=False, markup=False)
            elif r["message"] and r["action"]:
                console.print(term_safe(redact(r["message"])), highlight=False, markup=False)
            elif r["steps"] and not r["blocked"]:
                console.print("dry run: nothing changed; add --apply to carry it out", highlight=False)
            console.print()
    return worst


# ---- journal ---------------------------------------------------------------------------------------


def journal_rows(entries: list[JournalEntry]) -> list[dict[str, Any]]:
    """One row per write, newest first: a leaderboard step's rows before and after, or the
    entry's own before/after for file writes."""
    rows: list[dict[str, Any]] = []
    for e in sorted(entries, key=lambda e: e.at, reverse=True):
        action, _, event = e.action.partition(":")
        record = e.detail.get("record")
        results = []
        if isinstance(e.after, dict):
            results = [(k, v) for k, v in e.after.items() if k.isdigit() and isinstance(v, dict) and "before" in v]
        base = {"at": e.at.isoformat(), "user": e.user, "action": action, "event": event or None, "record": record,
                "error": e.detail.get("error")}
        if not results:
            rows.append({**base, "target": e.target, "before": e.before, "after": e.after})
            continue
        for _, res in sorted(results, key=lambda kv: int(kv[0]), reverse=True):
            before, after = res.get("before"), res.get("after")
            if event == "undo":
                before, after = after, before
            key = res.get("target") or {}
            where = " ".join(f"{k}={_short(v)}" for k, v in sorted(key.items())) if isinstance(key, dict) else key
            rows.append({**base, "target": f"{res.get('table')} {where}",
                         "op": res.get("op"), "before": before, "after": after})
    return rows


SHOWN = ("id", "username", "status", "score", "trace_url", "name", "task_name", "job_id", "model_id",
         "benchmark_id")


def _short(v: Any) -> str:
    text = str(v)
    # ids are uuids: their first 8 characters name a row on screen, as everywhere else
    return text[:8] if len(text) == 36 and text.count("-") == 4 else text


def _brief(value: Any, other: Any = None) -> str:
    """A row list in a line: key fields only, and for an update only the fields it changed."""
    if value in (None, [], {}):
        return "-"
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        changed: set[str] = set()
        if isinstance(other, list) and len(other) == len(value) == 1:
            changed = {k for k in value[0] if value[0].get(k) != other[0].get(k)}
        rows = []
        for row in value:
            keys = ["id", *sorted(changed - {"id"})] if changed else [k for k in SHOWN if k in row]
            rows.append(" ".join(f"{k}={_short(row.get(k))}" for k in keys if k in row))
        return "; ".join(rows)
    return json.dumps(value, default=str)


def summary(value: Any, other: Any = None, shown: int = 2) -> str:
    """A journal row's before or after in a few words: what `_brief` says of its first items,
    then how many more (a resume's before lists every trial it moved)."""
    if isinstance(value, list) and len(value) > shown:
        one = other if isinstance(other, list) and len(other) == 1 else None
        return f"{len(value)}: {_brief(value[:shown], one)}; … +{len(value) - shown}"
    if isinstance(value, dict) and len(value) > 4:
        return f"{len(value)} fields: " + ", ".join(list(value)[:4]) + ", …"
    return _brief(value, other)


def _target(row: dict[str, Any]) -> str:
    return str(row["target"])


def run_journal(args: Any, config: Config, fmt: str, console: Console, out: IO[str], err: IO[str]) -> int:
    since = None
    if args.since:
        try:
            since = datetime.fromisoformat(args.since.replace("Z", "+00:00"))
        except ValueError:
            err.write(f"evaldesk: --since {args.since!r}: not an ISO date or time (e.g. 2026-11-20T18:00)\n")
            return EXIT_USAGE
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
    entries = [e for e in Journal(config.journal_path).entries() if since is None or e.at >= since]
    rows = journal_rows(entries)
    if fmt == "json":
        out.write(_dump({"writes": rows}) + "\n")
    elif fmt == "jsonl":
        for r in rows:
            out.write(_dump(r) + "\n")
    else:
        from tui.batch_table import Column, print_rows

        table = []
        for r in rows:
            what = f"{r['action']}:{r['event'] or ''}" + (f" {r['op']}" if r.get("op") else "")
            table.append([r["at"][:19], r["user"], what, redact(_target(r)), redact(summary(r["before"], r["after"])),
                          redact(summary(r["after"], r["before"])), str(r["record"] or "")])
        columns = [Column(n, flexible=n in ("target", "before", "after"))
                   for n in ("when", "user", "action", "target", "before", "after", "record")]
        print_rows(out, f"{len(rows)} write(s), newest first", columns, table, wide=args.wide)
    return EXIT_OK


# ---- undo of a record kept on this machine ---------------------------------------------------------


async def undo_local(entry: dict[str, Any], config: Config, write_path: WritePath) -> dict[str, Any]:
    """Roll back a record whose plan kept it on this machine (leaderboard writes, free disk)."""
    from services.core.registry import open_source
    from services.remediations import registry
    from services.remediations.steps import StepContext

    record = await write_path.load(str(entry["id"]), StepContext())
    meta = record.plan.meta
    source = None
    root = meta.get("source_root")
    if root:
        host = meta.get("source_host")
        source = open_source(f"ssh://{host}{root}" if host else str(root), config)
    try:
        ctx = registry.context(record.action, source, config)  # type: ignore[arg-type]
        lines, _ = await write_path.undo_preview(record, ctx)
        done = await write_path.undo(record, ctx)
    finally:
        if source is not None:
            await source.close()
    return {"target": record.target, "record": done.id, "status": done.status,
            "restored": [ln.strip() for ln in lines],
            "message": f"undid {done.action} {done.id}: {len(lines)} step(s) put back"}


async def local_records(write_path: WritePath, key: str) -> list[Record]:
    """Applied records kept on this machine for one experiment, newest first."""
    from services.remediations.steps import StepContext

    out = []
    for e in write_path.index.all():
        if e.get("experiment") != key or e.get("status") != "applied" or e.get("location", {}).get("on_target"):
            continue
        try:
            out.append(await write_path.load(str(e["id"]), StepContext()))
        except (OSError, ValueError, WriteRefused):
            continue
    return sorted(out, key=lambda r: r.created_at, reverse=True)
