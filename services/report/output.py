"""Rendering a report to text and writing it where a person can open it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

from services.audit.alignment import BaselineEnrichment
from services.audit.context import AuditContext
from services.audit.verdict import audit_experiment
from services.core.baselines import Baseline
from services.core.models import AuditReport, Experiment
from services.core.policy import Policy
from services.core.statefile import write_atomic
from services.core.xdg import data_dir
from services.report.build import build_report
from services.report.html import render_html, report_json
from services.report.model import Report

Format = Literal["html", "json"]
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def report_for(exps: Sequence[Experiment], policy: Policy, now: datetime, baselines: Sequence[Baseline] = (),
               audits: Sequence[AuditReport | None] | None = None) -> Report:
    """The report of `exps`: each audited with the alignment enrichment (the console passes the
    audits it already has; they are re-made only where missing)."""
    enrich = BaselineEnrichment(list(baselines))
    context = AuditContext([enrich])
    items = []
    for i, exp in enumerate(exps):
        given = audits[i] if audits is not None and i < len(audits) else None
        rep = given if given is not None else audit_experiment(exp, policy, now, context)
        items.append((exp, rep, enrich.result(exp)))
    return build_report(items, policy, now)


def render(report: Report, fmt: Format, policy: Policy | None = None) -> str:
    policy = policy or Policy()
    if fmt == "json":
        return report_json(report, indent=1) + "\n"
    return render_html(report, policy.error_fraction_max, policy.valid_fraction_min)


def reports_dir() -> Path:
    """Where the console writes reports: evaldesk's own data dir, never inside a job dir."""
    return data_dir() / "reports"


def default_name(report: Report, fmt: Format) -> str:
    stem = _UNSAFE.sub("_", report.runs[0].id if len(report.runs) == 1 else report.title).strip("._") or "report"
    stamp = report.generated_at.strftime("%Y%m%dT%H%M%SZ")
    return f"{stem[:120]}-{stamp}.{fmt}"


def write_text_atomic(path: Path, text: str) -> Path:
    """Write `text` to `path` whole or not at all (a half-written report never sits there)."""
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    # a name that is not UTF-8 is escaped by the renderers; anything left is written, never a traceback
    write_atomic(path, text.encode("utf-8", "backslashreplace"))
    return path.resolve()
