"""What the audit can know about an experiment beyond its own files: leaderboard rows, trace
datasets, a baseline. Each is an `Enrichment` that adds checks (or replaces a placeholder
check of the same id, such as `traces` before a leaderboard is configured).

Enrichments are built by whoever holds that knowledge (the console's leaderboard worker,
`--batch` before it audits) and passed in an `AuditContext`; the audit stays pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from services.core.models import AuditReport, Check, CheckStatus, Experiment
from services.core.plain import copy_with
from services.core.policy import Policy


class Enrichment(Protocol):
    name: str

    def checks(self, exp: Experiment, report: AuditReport, policy: Policy, now: datetime) -> list[Check]:
        """Checks about `exp`; one with the id of an existing check replaces it."""
        ...

    def notes(self, exp: Experiment, report: AuditReport) -> list[str]:
        """Lines a person must read beside the score."""
        ...


@dataclass
class AuditContext:
    enrichments: list[Enrichment] = field(default_factory=list)


def enrich(report: AuditReport, exp: Experiment, policy: Policy, now: datetime,
           context: AuditContext | None) -> AuditReport:
    if context is None or not context.enrichments:
        return report
    checks = list(report.checks)
    notes = list(report.notes)
    for e in context.enrichments:
        for new in e.checks(exp, report, policy, now):
            at = next((i for i, c in enumerate(checks) if c.id == new.id), None)
            if at is None:
                checks.append(new)
            else:
                checks[at] = new
        notes += e.notes(exp, report)
    return copy_with(report, checks=checks, notes=notes)


def failing(report: AuditReport) -> list[Check]:
    return [c for c in report.checks if c.status == CheckStatus.fail]


def combine(*contexts: AuditContext | None) -> AuditContext | None:
    """One context holding the enrichments of all given (the leaderboard's, a baseline's …)."""
    enrichments = [e for c in contexts if c is not None for e in c.enrichments]
    return AuditContext(enrichments) if enrichments else None
