"""The audit's `alignment` check: a run against the baseline it is meant to reproduce.

An `Enrichment` (services.audit.context): it knows the baselines from the config dir, picks
the one that applies to the experiment (services.core.baselines.pick_baseline, the monitor's
rule c picks the same way) and compares through services.core.alignment. An experiment no
baseline applies to gets no `alignment` row at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from services.audit.context import AuditContext
from services.core.alignment import Alignment, Drift, align_trials, config_drift, fmt_value
from services.core.baselines import Baseline, pick_baseline
from services.core.models import AuditReport, Check, CheckStatus, Experiment, State
from services.core.policy import Policy

TITLE = "Aligned with the baseline"
TOP_GAPS = 5


@dataclass(kw_only=True)
class AlignmentResult:
    """Everything the check, the report and the JSON output say about one run's alignment."""

    baseline: str
    baseline_path: str | None = None
    baseline_source: str | None = None
    alignment: Alignment | None = None
    ci: tuple[float, float] | None = None
    drift: list[Drift] = field(default_factory=list)
    status: CheckStatus = CheckStatus.skip
    evidence: str = ""
    action: str | None = None

    @property
    def differing(self) -> list[Drift]:
        return [d for d in self.drift if d.differs]


def evaluate(exp: Experiment, baseline: Baseline) -> AlignmentResult:
    al = align_trials(baseline, exp.trials, top=10)
    drift = config_drift(baseline.expected_config, exp.run_config)
    res = AlignmentResult(baseline=baseline.name, baseline_path=baseline.path, baseline_source=baseline.source,
                          alignment=al, drift=drift)
    differing = res.differing
    unknown = [d.field for d in drift if not d.known]
    drift_txt = ", ".join(f"{d.field} {fmt_value(d.expected)} → {fmt_value(d.actual)}" for d in differing)
    parts: list[str] = []
    if al is None:
        res.status = CheckStatus.skip
        parts.append(f"baseline {baseline.name}: no finished attempt of this run to compare"
                     + (" (its per-task expectations name none of the run's tasks)" if baseline.tasks else ""))
    else:
        ci = al.ci
        res.ci = ci
        ci_txt = f", 95% CI {ci[0]:.3f}–{ci[1]:.3f}" if ci else ""
        over = "per-task expectations of " if baseline.tasks else ""
        parts.append(f"actual {al.actual:.3f} over {al.compared} finished attempts{ci_txt} vs expected "
                     f"{al.expected:.3f} ({over}baseline {baseline.name})")
        below = ci is not None and ci[1] < al.expected
        above = ci is not None and ci[0] > al.expected
        if below:
            res.status = CheckStatus.fail
            res.action = ("align the config first (drift listed), then re-run; else read the top gap tasks"
                          if differing else "read the top gap tasks and their failures; the config matches")
        elif above:
            res.status = CheckStatus.warn
            res.action = "above the baseline beyond chance: check the split, the task set and the verifier"
        elif differing:
            res.status = CheckStatus.warn
            res.action = "the score is within reach, but the config differs: confirm the differences are intended"
        else:
            res.status = CheckStatus.pass_
        if al.gaps:
            gaps = ", ".join(f"{g.task} {g.actual:.2f} vs {g.expected:.2f}" for g in al.gaps[:TOP_GAPS])
            parts.append(f"top gaps: {gaps}")
    parts.append(f"config drift: {drift_txt}" if differing else
                 ("config matches the baseline's" if drift and not unknown else
                  "" if not drift else "no drift in the fields the run records"))
    if unknown:
        parts.append(f"not recorded by the run: {', '.join(unknown)}")
    if exp.state != State.finished and al is not None:
        parts.append("the run is not finished: compared on what has finished so far")
    res.evidence = "; ".join(p for p in parts if p)
    return res


@dataclass
class BaselineEnrichment:
    """Adds the `alignment` check for every experiment a baseline applies to."""

    baselines: list[Baseline] = field(default_factory=list)
    name: str = "baselines"

    def result(self, exp: Experiment) -> AlignmentResult | None:
        baseline = pick_baseline(exp, self.baselines)
        return evaluate(exp, baseline) if baseline is not None else None

    def checks(self, exp: Experiment, report: AuditReport, policy: Policy, now: datetime) -> list[Check]:
        res = self.result(exp)
        if res is None:
            return []
        return [Check(id="alignment", title=TITLE, status=res.status, evidence=res.evidence, action=res.action)]

    def notes(self, exp: Experiment, report: AuditReport) -> list[str]:
        return []


def baseline_context(baselines: list[Baseline]) -> AuditContext | None:
    """The audit context that adds `alignment`; None when there are no baselines at all."""
    return AuditContext([BaselineEnrichment(baselines)]) if baselines else None
