"""Headless commands on the same engine as the console (DESIGN 7). No Textual import here.

Results go to stdout (table, json or jsonl), progress to stderr; exit 0 when every check
passes, 1 when something needs action, 2 for usage errors and unreachable sources.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, cast

from services.audit.context import AuditContext, combine
from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.failures import NO_REWARD_NOR_EXCEPTION
from services.core.models import (
    AuditReport,
    CheckStatus,
    Experiment,
    Snapshot,
    Trial,
    TrialStatus,
)
from services.core.plain import dump
from services.core.registry import open_sources
from services.core.source import Source, SourceUnavailable
from services.core.text import SafeLines, dumps, term_safe
from services.remediations.errors import LockHeld, ReadOnly, StepFailed, TargetUnwritable, WriteRefused
from services.remediations.records import Plan, Record
from tui import interrupt

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

EXIT_OK, EXIT_ACTION, EXIT_USAGE = 0, 1, 2
ICON = {CheckStatus.pass_: "ok", CheckStatus.warn: "WARN", CheckStatus.fail: "FAIL", CheckStatus.skip: "-"}


SM_PREFIX = "__SM_PROGRESS__="


class Progress:
    """Progress lines on stderr: human text, `__EVALDESK_PROGRESS__=<json>` for machines, or
    the runbooks' protocol (`--progress sm`): `__SM_PROGRESS__=<json>` with the same payload."""

    def __init__(self, mode: str, err: IO[str]) -> None:
        self.mode = mode
        self.err = err
        self._last = 0.0

    def note(self, message: str) -> None:
        """A line a person must see whatever the progress mode (it goes to stderr)."""
        self.err.write(f"evaldesk: {message}\n")
        self.err.flush()

    def __call__(self, done: int, total: int | None, message: str) -> None:
        if self.mode == "none":
            return
        now = time.monotonic()
        if done and total and done < total and now - self._last < 0.5:
            return
        self._last = now
        if self.mode in ("json", "sm"):
            payload = {"done": done, "total": total, "message": message}
            prefix = SM_PREFIX if self.mode == "sm" else "__EVALDESK_PROGRESS__="
            self.err.write(f"{prefix}{dumps(payload)}\n")
        else:
            frac = f" {done}/{total}" if total else ""
            self.err.write(f"evaldesk: {term_safe(message)}{frac}\n")
        self.err.flush()


class _LazyConsole:
    """A rich Console made on first use: json output never pays for importing rich."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._console: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._kwargs)
        return getattr(self._console, name)


def _table(**kwargs: Any) -> Any:
    from rich.table import Table

    return Table(**kwargs)


def _dump(obj: Any) -> str:
    return dumps(obj)


def say(err: IO[str], message: str) -> None:
    """One line on stderr; names in it are shown escaped, never as terminal controls."""
    err.write(f"evaldesk: {term_safe(message)}\n")


def cell(value: object) -> Text:
    """A table cell from data read off a job dir: escaped, capped, and never read as Rich markup."""
    from rich.text import Text

    from tui.batch_table import capped

    return Text(capped(value))


def report_json(r: AuditReport) -> dict[str, Any]:
    data = dump(r, json=True)
    data["checks"] = [
        {"id": c.id, "status": c.status.value, "evidence": c.evidence, "action": c.action} for c in r.checks
    ]
    return data


def trial_json(exp: Experiment, t: Trial) -> dict[str, Any]:
    d = t.to_json()
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
    # every line on stderr, from whichever module writes it, goes through term_safe
    err = cast(IO[str], SafeLines(err or sys.stderr))
    if getattr(args, "progress", None) == "sm":
        from tui.batch_sm import run_sm

        return run_sm(args, config, out, err, _run_batch)
    return _run_batch(args, config, out, err)


def _run_batch(args: Any, config: Config, out: IO[str], err: IO[str]) -> int:
    # A trial dir name need not be UTF-8 (Linux allows any bytes); escape such names rather than crash.
    for stream in (out, err):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    fmt = args.format or ("table" if out.isatty() else "json")
    progress = Progress(args.progress or ("text" if err.isatty() else "none"), err)
    # piped tables keep whole lines (COLUMNS, else wide) so grep and diff see one row per line
    width = None if out.isatty() else int(os.environ.get("COLUMNS") or 220)
    console = cast("Console", _LazyConsole(file=out, width=width, no_color=not out.isatty()))
    cmd = args.command
    if cmd in ("undo", "finish") or (cmd in ("dedupe", "fix", "resume", "launch", "submit") and args.apply):
        from tui.batch_records import write_path_for

        # the write path decides; batch only asks before it reads anything
        why = write_path_for(args, config).refusal(cmd)
        if why:
            say(err, why)
            return EXIT_USAGE
    if cmd == "monitor":
        from services.remediations import recovery
        from tui.batch_records import print_pending, write_path_for

        print_pending(interrupt.run(recovery.from_index(write_path_for(args, config).index)), err)
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
        return interrupt.run(_run(args, config, fmt, progress, console, out, err))
    except SourceUnavailable as exc:
        say(err, f"cannot read {exc.where}: {exc.message}")
        return EXIT_USAGE
    except ValueError as exc:  # a malformed SOURCE URL
        say(err, str(exc))
        return EXIT_USAGE
    except LockHeld as exc:
        from tui.batch_records import lock_held_line

        err.write(term_safe(lock_held_line(exc).rstrip("\n")) + "\n")
        return EXIT_USAGE
    except (ReadOnly, TargetUnwritable) as exc:
        say(err, str(exc))
        return EXIT_USAGE
    except WriteRefused as exc:
        say(err, str(exc))
        return EXIT_ACTION
    except StepFailed as exc:
        say(err, str(exc))
        return EXIT_ACTION
    except OSError as exc:  # a job dir or record that cannot be read or written: say which
        if isinstance(exc, BrokenPipeError) and interrupt.reader_gone(out):
            raise  # the reader of stdout left (`| head`): the process entry leaves quietly
        from services.remediations.steps import describe_error

        err.write(f"evaldesk: {describe_error(exc)}\n")
        return EXIT_USAGE


def _run_monitor(args: Any, config: Config, out: IO[str]) -> int:
    from tui.batch_monitor import run_monitor_cli

    return run_monitor_cli(args, config, out)


async def _run(args: Any, config: Config, fmt: str, progress: Progress, console: Console,
               out: IO[str], err: IO[str]) -> int:
    cmd = args.command
    if cmd in ("undo", "finish"):
        from tui.batch_records import run_records_command

        return await run_records_command(args, config, fmt, out, err)
    if cmd == "journal":
        from tui.batch_leaderboard import run_journal

        return run_journal(args, config, fmt, console, out, err)
    check_id = ""
    if cmd == "fix":
        from tui.batch_leaderboard import known_checks

        check_id = args.sources.pop(0) if args.sources else ""
        # any backend's check id (AISBench `params`, csbench `teardown` …): the audits say which
        # exist once the sources are read; what cannot be an id is refused before reading anything
        if not check_id.replace("_", "").isalnum() or os.sep in check_id:
            err.write(f"evaldesk: fix needs a CHECK_ID first (e.g. {', '.join(sorted(known_checks()))}), "
                      f"got {check_id!r}\n")
            return EXIT_USAGE
        args.sources = args.sources or [s.path for s in config.sources]
        if not args.sources:
            err.write("evaldesk: fix CHECK_ID needs a SOURCE (a job dir or folder)\n")
            return EXIT_USAGE
    if cmd == "launch":
        from tui.batch_launch import run_launch

        return await run_launch(args, config, fmt, progress, console, out, err)
    if cmd == "submit":
        from tui.batch_submit import run_submit

        return await run_submit(args, config, fmt, progress, console, out, err)
    snaps, sources = await _scan_all(args.sources, config, progress)
    try:
        problems = [e for s in snaps for e in s.errors]
        from tui.wording import source_problem

        for e in problems:
            say(err, f"{e.where}: {source_problem(e.message)}")
        exps = [(src, e) for src, s in zip(sources, snaps, strict=True) for e in s.experiments]
        if not exps:
            return EXIT_USAGE
        from tui.batch_records import notice_pending, write_path_for

        await notice_pending(write_path_for(args, config), exps, err, say_locks=not getattr(args, "apply", False))
        code = await _dispatch(args, config, cmd, check_id, exps, fmt, console, out, err, progress)
        # a dir under SOURCE that exists but cannot be read is an unreadable source (DESIGN 7)
        return EXIT_USAGE if any(e.unreadable for e in problems) else code
    finally:
        for src in sources:
            await src.close()


async def _dispatch(args: Any, config: Config, cmd: str, check_id: str, exps: list[tuple[Source, Experiment]],
                    fmt: str, console: Console, out: IO[str], err: IO[str], progress: Progress) -> int:
    if cmd == "fix":
        from tui.batch_leaderboard import run_fix

        return await run_fix(args, config, exps, check_id, fmt, console, out, err, progress)
    if cmd in ("list", "audit"):
        from tui.batch_leaderboard import leaderboard_context

        context = await leaderboard_context(config, [e for _, e in exps], err)
        audits = {"list": _list, "audit": _audit}[cmd]
        return int(await audits(args, config, exps, fmt, console, out, progress, context))
    from tui.batch_resume import run_resume

    handler: Callable[..., Any] = {"list": _list, "audit": _audit, "trials": _trials, "dedupe": _dedupe,
                                   "resume": run_resume}[cmd]
    return int(await handler(args, config, exps, fmt, console, out, progress))


async def _list(args: Any, config: Config, exps: list[tuple[Source, Experiment]], fmt: str,
                console: Console, out: IO[str], progress: Progress, context: AuditContext | None = None) -> int:
    now = datetime.now(UTC)
    rows = []
    worst = EXIT_OK
    for src, e in exps:
        r = audit_experiment(e, config.policy, now, combine(context, getattr(args, "audit_context", None)))
        if r.needs_action:
            worst = EXIT_ACTION
        rows.append({
            "source": src.label, "id": e.id, "benchmark": e.benchmark, "model": e.model, "state": e.state.value,
            "state_raw": e.state_raw, "valid": e.counts.valid, "expected": e.counts.expected,
            "total": e.counts.total, "running": e.counts.running, "errored": e.counts.errored,
            "invalid_errors": e.counts.invalid_errors, "score": e.score,
            "error_fraction": r.error_fraction, "verdict": r.verdict,
            "updated_at": e.updated_at.isoformat() if e.updated_at else None, "path": e.path,
        })
    if fmt == "json":
        out.write(_dump({"experiments": rows}) + "\n")
    elif fmt == "jsonl":
        for row in rows:
            out.write(_dump(row) + "\n")
    else:
        _list_table(args, exps, rows, now, out)
    return worst


def _list_table(args: Any, exps: list[tuple[Source, Experiment]], rows: list[dict[str, Any]], now: datetime,
                out: IO[str]) -> None:
    from tui.batch_table import Column, column_widths, print_rows, terminal_width
    from widgets.ids import run_labels

    width = terminal_width(out)
    # on a terminal under 120 columns the run's label carries its benchmark and model
    narrow = width is not None and width < 120 and not args.wide
    several = len({r["source"] for r in rows}) > 1
    names = (["source"] if several or width is None else []) + ["id"] + ([] if narrow else ["benchmark", "model"])
    stats = ["state", "valid/exp", "score", "err%", "verdict", "age"]
    table: list[list[str]] = []
    for (_, e), row in zip(exps, rows, strict=True):
        err_frac = row["error_fraction"]
        model = e.model or "-"
        values = {"source": row["source"], "id": e.id, "benchmark": e.benchmark or "-",
                  "model": model if width is None else model.split("/")[-1]}
        table.append([values[n] for n in names] + [
            e.state.value, f"{e.counts.valid}/{e.counts.expected or '?'}",
            "-" if e.score is None else f"{e.score:.3f}",
            _pct(err_frac if isinstance(err_frac, float) else None), str(row["verdict"]),
            _age(e.updated_at or e.started_at, now)])
    columns = [Column(n, flexible=n in ("source", "id", "benchmark", "model"), weight=3 if n == "id" else 1)
               for n in names]
    columns += [Column(n, justify="right" if n in ("score", "err%", "age") else "left") for n in stats]
    if width is not None and not args.wide:
        i = names.index("id")
        # the run's label may take the width the others leave (not its full id's)
        safe = [[term_safe(v) for v in r] for r in table]
        room = column_widths(columns, safe, width)[i]
        labels = run_labels([(term_safe(e.id), e.benchmark_from_dir, e.model) for _, e in exps],
                            room)
        for r, label in zip(table, labels, strict=True):
            r[i] = label
    print_rows(out, f"{len(rows)} experiment(s)", columns, table, wide=args.wide)


async def _audit(args: Any, config: Config, exps: list[tuple[Source, Experiment]], fmt: str,
                 console: Console, out: IO[str], progress: Progress, context: AuditContext | None = None) -> int:
    now = datetime.now(UTC)
    both = combine(context, getattr(args, "audit_context", None))
    reports = [audit_experiment(e, config.policy, now, both) for _, e in exps]
    worst = EXIT_ACTION if any(r.needs_action for r in reports) else EXIT_OK
    if fmt == "json":
        out.write(_dump({"experiments": [report_json(r) for r in reports]}) + "\n")
    elif fmt == "jsonl":
        for r in reports:
            out.write(_dump(report_json(r)) + "\n")
    else:
        _audit_table(args, reports, out)
    return worst


def _audit_table(args: Any, reports: list[AuditReport], out: IO[str]) -> None:
    from tui.batch_table import Column, print_rows, terminal_width

    checks = [Column(""), Column("check"), Column("evidence", flexible=True), Column("action", flexible=True)]
    if terminal_width(out) is None:
        rows = [[r.id, r.verdict.upper(), ICON[c.status], c.title, c.evidence, c.action or ""]
                for r in reports for c in r.checks]
        rows += [[r.id, r.verdict.upper(), "note", "", n, ""] for r in reports for n in r.notes]
        print_rows(out, "", [Column("experiment"), Column("verdict"), *checks], rows)
        return
    for r in reports:
        rows = [[ICON[c.status], c.title, c.evidence, c.action or ""] for c in r.checks]
        rows += [["", "note", n, ""] for n in r.notes]
        print_rows(out, f"{r.id}  verdict: {r.verdict.upper()}", checks, rows, wide=args.wide)
        out.write("\n")


def _match_trial(t: Trial, args: Any) -> bool:
    if args.status and t.status != TrialStatus(args.status):
        return False
    # exception types are class names people type from memory: case does not matter
    wanted = [x.lower() for e in (args.exception or []) for x in str(e).split(",") if x]
    return not (wanted and (t.exception_type or "").lower() not in wanted)


def _no_exception_label(t: Trial) -> str:
    if t.parse_error and t.parse_error != NO_REWARD_NOR_EXCEPTION:
        return "unreadable"
    return "no reward" if t.status == TrialStatus.errored else ""


async def _trials(args: Any, config: Config, exps: list[tuple[Source, Experiment]], fmt: str,
                  console: Console, out: IO[str], progress: Progress) -> int:
    selected = [(e, t) for _, e in exps for t in e.trials if _match_trial(t, args)]
    if args.exception and not selected:
        seen = sorted({t.exception_type for _, e in exps for t in e.trials if t.exception_type})
        progress.note(f"no trial has exception type {', '.join(repr(x) for x in args.exception)}; the types seen are: "
                      + (", ".join(seen) or "none"))
    if fmt == "json":
        out.write(_dump({"trials": [trial_json(e, t) for e, t in selected]}) + "\n")
    elif fmt == "jsonl":
        for e, t in selected:
            out.write(_dump(trial_json(e, t)) + "\n")
    else:
        from tui.batch_table import Column, print_rows

        names = ("experiment", "task", "trial", "#", "reward", "status", "exception", "class", "dur")
        rows = [[e.id, t.task_name, t.trial_name, str(t.attempt), "-" if t.reward is None else f"{t.reward:g}",
                 t.status.value + (" (copy)" if t.copy_of else ""), t.exception_type or _no_exception_label(t),
                 t.failure_class or "", "-" if t.duration_s is None else f"{t.duration_s:.0f}s"] for e, t in selected]
        columns = [Column(n, flexible=n in ("experiment", "task", "trial", "exception")) for n in names]
        print_rows(out, f"{len(selected)} trial attempt(s)", columns, rows, wide=args.wide)
    return EXIT_OK


async def _dedupe(args: Any, config: Config, exps: list[tuple[Source, Experiment]], fmt: str,
                  console: Console, out: IO[str], progress: Progress) -> int:
    from services.remediations import dedupe, registry
    from tui.batch_records import lock_held_line, with_lock_breaking, write_path_for

    write_path = write_path_for(args, config)
    results: list[tuple[Plan, bool]] = []
    failed: list[WriteRefused | StepFailed] = []
    not_applied: set[str] = set()
    worst = EXIT_OK
    for src, e in exps:
        plan = await registry.plan("dedupe", e, src, config)
        applied = False
        if args.apply and not plan.nothing_to_do:
            progress(0, len(plan.steps), f"dedupe of {e.id}: {len(plan.steps)} step(s)")

            def run(src: Source = src, e: Experiment = e, plan: Plan = plan) -> Awaitable[Record]:
                return registry.apply("dedupe", plan, e.id, src, config, write_path,
                                      progress=lambda i, n, m: progress(i, n, m))

            try:
                await with_lock_breaking(args, write_path, registry.context("dedupe", src, config), progress.err,
                                         run)
            except (WriteRefused, StepFailed) as exc:
                # one job's refusal does not stop the others; what was applied is reported below
                failed.append(exc)
                not_applied.add(plan.id)
                results.append((plan, False))
                continue
            applied = True
        elif not plan.nothing_to_do:
            worst = EXIT_ACTION
        results.append((plan, applied))
    if len(failed) == 1 and not any(a for _, a in results):
        raise failed[0]  # nothing was applied: the error alone is the answer
    for why in failed:
        progress.err.write(lock_held_line(why) if isinstance(why, LockHeld) else f"evaldesk: {why}\n")
        worst = max(worst, EXIT_USAGE if isinstance(why, (LockHeld, ReadOnly, TargetUnwritable)) else EXIT_ACTION)
    if fmt == "json":
        out.write(_dump({"plans": [dedupe.batch_json(p, a) for p, a in results]}) + "\n")
    elif fmt == "jsonl":
        for p, a in results:
            out.write(_dump(dedupe.batch_json(p, a)) + "\n")
    else:
        for p, a in results:
            for line in p.preview:
                console.print(cell(line), highlight=False)
            if a:
                console.print(cell(f"applied: record {p.id}; undo with: evaldesk --batch undo {p.id}"),
                              highlight=False)
            elif p.id in not_applied:
                console.print("not applied: the reason is on stderr; nothing of it was changed", highlight=False)
            elif not p.nothing_to_do:
                console.print("dry run: nothing moved; add --apply to carry it out", highlight=False)
            console.print()
    return worst
