"""`evaldesk --batch report [--format html|json] JOB… [-o FILE] [--baseline FILE]`.

One report over every experiment the JOBs hold (any backend); two or more runs of one
benchmark are compared side by side with per-task deltas. Without `-o` the report goes to
stdout; with it the file is written whole (temp file, then rename) and its path printed.
Exit code: 0 when every run's audit passes, 1 when one needs action, 2 for usage errors and
sources that cannot be read. No Textual import here.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from services.core.baselines import Baseline, BaselineError, baselines_for, load_baseline
from services.core.config import Config
from services.core.models import Experiment
from services.core.registry import open_sources
from services.core.source import SourceUnavailable

EXIT_OK, EXIT_ACTION, EXIT_USAGE = 0, 1, 2


def batch_baselines(args: Any, config: Config, err: IO[str]) -> list[Baseline] | None:
    """`--baseline FILE` alone when given (an explicit choice), else the config dir's baselines;
    None (after saying why) when the named file is bad. A bad file in the config dir is named
    on stderr and skipped."""
    if getattr(args, "baseline", None):
        try:
            return [load_baseline(args.baseline)]
        except BaselineError as exc:
            err.write(f"evaldesk: --baseline {exc}\n")
            return None
    found, problems = baselines_for(config, getattr(args, "sources", None) or [])
    for p in problems:
        err.write(f"evaldesk: {p}\n")
    return found


async def _collect(specs: list[str], config: Config, err: IO[str], progress: Any) -> list[Experiment]:
    exps: list[Experiment] = []
    for spec in specs:
        for src in open_sources(spec, config):
            try:
                progress(0, None, f"scanning {src.label}")
                snap = await src.scan(progress)
            finally:
                await src.close()
            for e in snap.errors:
                err.write(f"evaldesk: {e.where}: {e.message}\n")
            for exp in snap.experiments:
                exp.source_label = exp.source_label or src.label
            exps += snap.experiments
    return exps


def run_report_cli(args: Any, config: Config, out: IO[str] | None = None, err: IO[str] | None = None,
                   progress: Any = None, now: datetime | None = None) -> int:
    # the report's modules load here, not for every `list`/`audit` that only wants batch_baselines
    from services.report.output import Format, render, report_for, write_text_atomic

    out = out or sys.stdout
    err = err or sys.stderr
    fmt: Format = args.format or "html"
    if fmt not in ("html", "json"):
        err.write(f"evaldesk: report writes html or json, not {fmt}\n")
        return EXIT_USAGE
    baselines = batch_baselines(args, config, err)
    if baselines is None:
        return EXIT_USAGE
    try:
        exps = asyncio.run(_collect(args.sources, config, err, progress or (lambda *a: None)))
    except SourceUnavailable as exc:
        err.write(f"evaldesk: cannot read {exc.where}: {exc.message}\n")
        return EXIT_USAGE
    except ValueError as exc:
        err.write(f"evaldesk: {exc}\n")
        return EXIT_USAGE
    if not exps:
        err.write("evaldesk: no experiment found to report on\n")
        return EXIT_USAGE
    report = report_for(exps, config.policy, now or datetime.now(UTC), baselines)
    text = render(report, fmt, config.policy)
    target = getattr(args, "output", None)
    if target:
        try:
            written = write_text_atomic(Path(target), text)
        except OSError as exc:
            err.write(f"evaldesk: cannot write {target}: {exc.strerror or exc}\n")
            return EXIT_USAGE
        out.write(f"{written}\n")
    else:
        out.write(text)
    out.flush()
    return EXIT_ACTION if any(r.audit.needs_action for r in report.runs) else EXIT_OK
