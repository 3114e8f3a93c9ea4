"""Headless commands on the same engine as the console (DESIGN 7). No Textual import here.

Results go to stdout (table, json or jsonl), progress to stderr; exit 0 when every check
passes, 1 when something needs action, 2 for usage errors and unreachable sources.
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Any

from rich.console import Console
from rich.table import Table

from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.journal import Journal
from services.core.models import (
    NO_REWARD_NOR_EXCEPTION,
    AuditReport,
    CheckStatus,
    Experiment,
    Snapshot,
    Trial,
    TrialStatus,
)
from services.core.registry import open_source, open_sources
from services.core.source import Source, SourceUnavailable
from services.remediations.base import WritePath
from services.remediations.errors import StepFailed, WriteRefused
from services.remediations.records import Plan

EXIT_OK, EXIT_ACTION, EXIT_USAGE = 0, 1, 2
ICON = {CheckStatus.pass_: "ok", CheckStatus.warn: "WARN", CheckStatus.fail: "FAIL", CheckStatus.skip: "-"}


class Progress:
    """Progress lines on stderr: human text, or `__EVALDESK_PROGRESS__=<json>` for machines."""

    def __init__(self, mode: str, err: IO[str]) -> None:
        self.mode = mode
        self.err = err
        self._last = 0.0

    def __call__(self, done: int, total: int | None, message: str) -> None:
        if self.mode == "none":
            return
        now = time.monotonic()
        if done and total and done < total and now - self._last < 0.5:
            return
        self._last = now
        if self.mode == "json":
            payload = {"done": done, "total": total, "message": message}
            self.err.write(f"__EVALDESK_PROGRESS__={json.dumps(payload)}\n")
        else:
            frac = f" {done}/{total}" if total else ""
            self.err.write(f"evaldesk: {message}{frac}\n")
        self.err.flush()


def _dump(obj: Any) -> str:
    return json.dumps(obj, default=str, ensure_ascii=False)


def report_json(r: AuditReport) -> dict[str, Any]:
    data = r.model_dump(mode="json")
    data["checks"] = [
        {"id": c.id, "status": c.status.value, "evidence": c.evidence, "action": c.action} for c in r.checks
    ]
    return data


def trial_json(exp: Experiment, t: Trial) -> dict[str, Any]:
    d = t.model_dump(mode="json")
    d["experiment"] = exp.id
    d["duration_s"] = t.duration_s
    return d


async def _scan_all(specs: list[str], config: Config, progress: Progress) -> tuple[list[Snapshot], list[Source]]:
    sources = [src for s in specs for src in open_sources(s, config)]
    snaps = []
    for src in sources:
        progress(0, None, f"scanning {src.label}")
        snaps.append(await src.scan(progress))
    return snaps, sources


def _age(dt: datetime | None, now: datetime) -> str:
    if dt is None:
        return "-"
    from services.core.times import as_utc

    secs = (now - (as_utc(dt) or now)).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit}"
    return f"{int(max(secs, 0))}s"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def run_batch(args: Any, config: Config, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    # A trial dir name need not be UTF-8 (Linux allows any bytes); escape such names rather than crash.
    for stream in (out, err):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    fmt = args.format or ("table" if out.isatty() else "json")
    progress = Progress(args.progress or ("text" if err.isatty() else "none"), err)
    read_only = bool(args.read_only or config.read_only)
    # piped tables keep whole lines (COLUMNS, else wide) so grep and diff see one row per line
    width = None if out.isatty() else int(os.environ.get("COLUMNS") or 220)
    console = Console(file=out, width=width, no_color=not out.isatty())
    cmd = args.command
    if cmd == "dedupe" and args.apply and read_only:
        err.write("evaldesk: --apply refused: read-only mode is on (--read-only or read_only = true in config)\n")
        return EXIT_USAGE
    if cmd == "undo" and read_only:
        err.write("evaldesk: undo refused: read-only mode is on\n")
        return EXIT_USAGE
    if cmd == "monitor":
        return _run_monitor(args, config, out)
    if cmd == "report":
        from tui.batch_report import run_report_cli

        return run_report_cli(args, config, out, err, progress)
    if fmt == "html":
        err.write(f"evaldesk: --format html is for report; {cmd} prints table, json or jsonl\n")
        return EXIT_USAGE
    if cmd in ("list", "audit"):
        from services.audit.alignment import baseline_context
        from tui.batch_report import batch_baselines

        found = batch_baselines(args, config, err)
        if found is None:
            return EXIT_USAGE
        # the handlers share one signature; the alignment enrichment rides on the namespace
        args.audit_context = baseline_context(found)
    try:
        return asyncio.run(_run(args, config, fmt, progress, console, out, err))
    except SourceUnavailable as exc:
        err.write(f"evaldesk: cannot read {exc.where}: {exc.message}\n")
        return EXIT_USAGE
    except ValueError as exc:  # a malformed SOURCE URL
        err.write(f"evaldesk: {exc}\n")
        return EXIT_USAGE
    except WriteRefused as exc:
        err.write(f"evaldesk: {exc}\n")
        return EXIT_ACTION
    except StepFailed as exc:
        err.write(f"evaldesk: {exc}\n")
        return EXIT_ACTION


def _run_monitor(args: Any, config: Config, out: IO[str]) -> int:
    from tui.batch_monitor import run_monitor_cli

    return run_monitor_cli(args, config, out)


async def _run(args: Any, config: Config, fmt: str, progress: Progress, console: Console,
               out: IO[str], err: IO[str]) -> int:
    cmd = args.command
    if cmd == "undo":
        return await _undo(args, config, fmt, out)
    snaps, sources = await _scan_all(args.sources, config, progress)
    try:
        problems = [e for s in snaps for e in s.errors]
        for e in problems:
            err.write(f"evaldesk: {e.where}: {e.message}\n")
        exps = [(src, e) for src, s in zip(sources, snaps, strict=True) for e in s.experiments]
        if not exps:
            return EXIT_USAGE
        handler: Callable[..., Any] = {"list": _list, "audit": _audit, "trials": _trials, "dedupe": _dedupe}[cmd]
        return int(await handler(args, config, exps, fmt, console, out, progress))
    finally:
        for src in sources:
            await src.close()


async def _list(args: Any, config: Config, exps: list[tuple[Source, Experiment]], fmt: str,
                console: Console, out: IO[str], progress: Progress) -> int:
    now = datetime.now(UTC)
    rows = []
    worst = EXIT_OK
    for src, e in exps:
        r = audit_experiment(e, config.policy, now, getattr(args, "audit_context", None))
        if r.needs_action:
            worst = EXIT_ACTION
        rows.append({
            "source": src.label, "id": e.id, "benchmark": e.benchmark, "model": e.model, "state": e.state.value,
            "state_raw": e.state_raw, "valid": e.counts.valid, "expected": e.counts.expected,
            "total": e.counts.total, "running": e.counts.running, "score": e.score,
            "error_fraction": r.error_fraction, "verdict": r.verdict,
            "updated_at": e.updated_at.isoformat() if e.updated_at else None, "path": e.path,
        })
    if fmt == "json":
        out.write(_dump({"experiments": rows}) + "\n")
    elif fmt == "jsonl":
        for row in rows:
            out.write(_dump(row) + "\n")
    else:
        t = Table(title=f"{len(rows)} experiment(s)", title_justify="left", expand=False)
        for col in ("id", "benchmark", "model", "state", "valid/exp", "score", "err%", "verdict", "age"):
            t.add_column(col, overflow="fold")
        for (_, e), row in zip(exps, rows, strict=True):
            err_frac = row["error_fraction"]
            t.add_row(e.id, e.benchmark or "-", e.model or "-", e.state.value,
                      f"{e.counts.valid}/{e.counts.expected or '?'}",
                      "-" if e.score is None else f"{e.score:.3f}",
                      _pct(err_frac if isinstance(err_frac, float) else None),
                      str(row["verdict"]), _age(e.updated_at or e.started_at, now))
        console.print(t)
    return worst


async def _audit(args: Any, config: Config, exps: list[tuple[Source, Experiment]], fmt: str,
                 console: Console, out: IO[str], progress: Progress) -> int:
    now = datetime.now(UTC)
    reports = [audit_experiment(e, config.policy, now, getattr(args, "audit_context", None)) for _, e in exps]
    worst = EXIT_ACTION if any(r.needs_action for r in reports) else EXIT_OK
    if fmt == "json":
        out.write(_dump({"experiments": [report_json(r) for r in reports]}) + "\n")
    elif fmt == "jsonl":
        for r in reports:
            out.write(_dump(report_json(r)) + "\n")
    else:
        for r in reports:
            t = Table(title=f"{r.id}  verdict: {r.verdict.upper()}", title_justify="left", expand=False)
            t.add_column("", no_wrap=True)
            t.add_column("check", no_wrap=True)
            t.add_column("evidence", overflow="fold")
            t.add_column("action", overflow="fold")
            for c in r.checks:
                t.add_row(ICON[c.status], c.title, c.evidence, c.action or "")
            console.print(t)
            for n in r.notes:
                console.print(f"  note: {n}", highlight=False)
            console.print()
    return worst


def _match_trial(t: Trial, args: Any) -> bool:
    if args.status and t.status != TrialStatus(args.status):
        return False
    return not (args.exception and t.exception_type != args.exception)


def _no_exception_label(t: Trial) -> str:
    if t.parse_error and t.parse_error != NO_REWARD_NOR_EXCEPTION:
        return "unreadable"
    return "no reward" if t.status == TrialStatus.errored else ""


async def _trials(args: Any, config: Config, exps: list[tuple[Source, Experiment]], fmt: str,
                  console: Console, out: IO[str], progress: Progress) -> int:
    selected = [(e, t) for _, e in exps for t in e.trials if _match_trial(t, args)]
    if fmt == "json":
        out.write(_dump({"trials": [trial_json(e, t) for e, t in selected]}) + "\n")
    elif fmt == "jsonl":
        for e, t in selected:
            out.write(_dump(trial_json(e, t)) + "\n")
    else:
        tb = Table(title=f"{len(selected)} trial attempt(s)", title_justify="left", expand=False)
        for col in ("experiment", "task", "trial", "#", "reward", "status", "exception", "class", "dur"):
            tb.add_column(col, overflow="fold")
        for e, t in selected:
            dur = t.duration_s
            tb.add_row(e.id[:28], t.task_name, t.trial_name, str(t.attempt),
                       "-" if t.reward is None else f"{t.reward:g}", t.status.value + (" (copy)" if t.copy_of else ""),
                       t.exception_type or _no_exception_label(t), t.failure_class or "",
                       "-" if dur is None else f"{dur:.0f}s")
        console.print(tb)
    return EXIT_OK


async def _dedupe(args: Any, config: Config, exps: list[tuple[Source, Experiment]], fmt: str,
                  console: Console, out: IO[str], progress: Progress) -> int:
    from services.remediations import dedupe, registry

    write_path = WritePath(Journal(config.journal_path), read_only=bool(args.read_only or config.read_only))
    results: list[tuple[Plan, bool]] = []
    worst = EXIT_OK
    for src, e in exps:
        plan = await registry.plan("dedupe", e, src, config)
        applied = False
        if args.apply and not plan.nothing_to_do:
            progress(0, len(plan.steps), f"dedupe of {e.id}: {len(plan.steps)} step(s)")
            await registry.apply("dedupe", plan, e.id, src, config, write_path,
                                 progress=lambda i, n, m: progress(i, n, m))
            applied = True
        elif not plan.nothing_to_do:
            worst = EXIT_ACTION
        results.append((plan, applied))
    if fmt == "json":
        out.write(_dump({"plans": [dedupe.batch_json(p, a) for p, a in results]}) + "\n")
    elif fmt == "jsonl":
        for p, a in results:
            out.write(_dump(dedupe.batch_json(p, a)) + "\n")
    else:
        for p, a in results:
            for line in p.preview:
                console.print(line, highlight=False, markup=False)
            if a:
                console.print(f"applied: record {p.id}, moved into {p.meta.get('quarantine')}",
                              highlight=False, markup=False)
            elif not p.nothing_to_do:
                console.print("dry run: nothing moved; add --apply to carry it out", highlight=False)
            console.print()
    return worst


async def _undo(args: Any, config: Config, fmt: str, out: IO[str]) -> int:
    """`undo JOB_DIR` (its last applied write) or `undo RECORD_ID` (any record this machine knows)."""
    from services.remediations import registry
    from services.remediations.records import records_in

    write_path = WritePath(Journal(config.journal_path), read_only=bool(args.read_only or config.read_only))
    code = EXIT_OK
    for spec in args.sources:
        entry = None if (os.path.exists(spec) or "://" in spec) else write_path.index.find(spec)
        target = spec
        if entry is not None:
            loc = entry.get("location", {})
            if not loc.get("on_target"):
                raise SourceUnavailable(spec, "this record lives on this machine only; its action has no source")
            job = posixpath.dirname(posixpath.dirname(str(loc.get("record_dir"))))
            target = f"ssh://{loc['host']}{job}" if loc.get("host") else job
        src = open_source(target, config)
        try:
            snap = await src.scan()
            if len(snap.experiments) != 1:
                raise SourceUnavailable(spec, "undo takes one job dir or a record id")
            exp = snap.experiments[0]
            records = await records_in(src.fs(), exp.path)
            if entry is not None:
                records = [r for r in records if r.id == entry["id"]]
                if not records:
                    raise SourceUnavailable(spec, f"record {entry['id']} is no longer in {exp.path}")
            else:
                records = [r for r in records if r.status in ("applied", "applying", "failed")][:1]
            if not records:
                result: dict[str, Any] = {"target": exp.path, "record": None, "status": None, "restored": [],
                          "message": "nothing to undo: no applied write in the job's quarantine"}
            else:
                rec = records[0]
                ctx = registry.context(rec.action, src, config)
                lines, _ = await write_path.undo_preview(rec, ctx)
                done = await write_path.undo(rec, ctx)
                result = {"target": exp.path, "record": done.id, "status": done.status,
                          "restored": [ln.strip() for ln in lines],
                          "message": f"undid {done.action} {done.id}: {len(lines)} step(s) put back"}
        finally:
            await src.close()
        if fmt in ("json", "jsonl"):
            out.write(_dump(result) + "\n")
        else:
            out.write(str(result["message"]) + "\n")
    return code
