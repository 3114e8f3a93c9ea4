"""The audit of one experiment: its checklist, the single verdict it leads to, and the notes a
person must read beside the score (DESIGN 3).

Pure: nothing here reads files or writes anything; the same Experiment always yields the same
report, so re-running the audit after a remediation shows exactly what changed.
"""

from __future__ import annotations

from datetime import UTC, datetime

from services.audit.checks import (
    FAIL,
    SKIP,
    WARN,
    check_benchmark,
    check_duplicates,
    check_error_gate,
    check_finished,
    check_model,
    check_score,
    check_valid,
)
from services.audit.context import AuditContext, enrich
from services.core.attempts import select_keep
from services.core.census import Census, take_census
from services.core.models import AuditReport, Check, Experiment, Verdict, report_trials
from services.core.policy import Policy


def bias_notes(exp: Experiment, kept: Census) -> list[str]:
    notes: list[str] = []
    n_rewards = kept.counts.valid
    if kept.no_verifier:
        mean_drop = kept.reward_sum / n_rewards if n_rewards else 0.0
        mean_zero = kept.reward_sum / (n_rewards + kept.no_verifier)
        notes.append(
            f"{kept.no_verifier} trial(s) have no reward because the verifier never ran "
            "(VerificationNotCompleted / AgentTimeout without a reward): the true score is ≈ 0 for them. "
            f"Harbor's mean drops them ({mean_drop:.3f}, biased up); the leaderboard counts them as 0 "
            f"({mean_zero:.3f}). Resume them on a healthy sandbox to recover real passes."
        )
    if kept.infra:
        n_infra = sum(kept.infra.values())
        kinds = ", ".join(f"{k} ×{v}" for k, v in kept.infra.most_common(3))
        notes.append(
            f"{n_infra} infra error(s) ({kinds}): uncorrelated with "
            "solvability, so dropping them is ~unbiased; re-run for completeness, never impute 0."
        )
    if kept.timeout_scored:
        notes.append(f"{kept.timeout_scored} AgentTimeoutError trial(s) carry a reward: valid 0s, not errors — "
                     "do not filter or re-run them.")
    for p in exp.problems:
        notes.append(f"read problem: {p}")
    return notes


def audit_experiment(exp: Experiment, policy: Policy | None = None, now: datetime | None = None,
                     context: AuditContext | None = None) -> AuditReport:
    """The checklist of one experiment: its backend's own checklist when it has one (a csbench
    campaign is not a Harbor job), else the Harbor-style checks of DESIGN 3; then what the
    context's enrichments (the leaderboard, a baseline) know about it."""
    policy = policy or Policy()
    now = now or datetime.now(UTC)
    from services.core.registry import backend_audit

    own = backend_audit(exp, policy, now)
    report = own if own is not None else _harbor_style(exp, policy)
    return enrich(report, exp, policy, now, context)


def standard_checklist(exp: Experiment, policy: Policy) -> AuditReport:
    """DESIGN 3's checks, for a backend whose own `audit` adapts them rather than replacing them."""
    return _harbor_style(exp, policy)


def _harbor_style(exp: Experiment, policy: Policy) -> AuditReport:
    n_rep = exp.n_rep or policy.default_n_rep
    on_disk: Census | None = exp._census
    if on_disk is None or on_disk.benign != frozenset(policy.benign_exceptions):
        on_disk = take_census(exp.trials, policy)
    dup = check_duplicates(exp, policy, on_disk)
    deduped = dup.status == FAIL
    kept = take_census(select_keep(exp.trials, n_rep)[0], policy) if deduped else on_disk
    finished = check_finished(exp)
    score = check_score(exp, kept.counts.valid)
    valid = check_valid(exp, policy, kept, deduped)
    gate, err_frac = check_error_gate(exp, policy, kept, deduped)
    checks = [
        finished,
        score,
        Check(id="traces", title="Traces uploaded and linked", status=SKIP, evidence="no leaderboard configured"),
        valid,
        dup,
        gate,
        check_model(exp),
        check_benchmark(exp),
        Check(id="stale_rows", title="Stale leaderboard rows", status=SKIP, evidence="no leaderboard configured"),
    ]
    verdict: Verdict
    if finished.remediation == "rebuild_aggregate":
        verdict = "repair"
    elif finished.status == FAIL:
        verdict = "investigate"
    elif finished.status == WARN:
        verdict = "wait"
    elif deduped:
        verdict = "dedupe"
    elif score.status == FAIL and "never reached" in score.evidence:
        verdict = "rerun"
    elif valid.status == FAIL or gate.status == FAIL:
        verdict = "resume"
    elif score.status == FAIL or valid.status == WARN:
        verdict = "investigate"
    else:
        verdict = "finalize"
    notes = bias_notes(exp, kept)
    if verdict == "resume":
        notes.insert(0, "Below 90% valid or over the error gate: resume, never register; if a partial row was "
                     "already registered, de-register that one row.")
    c = exp.counts
    return AuditReport(
        id=exp.id,
        source=exp.source,
        path=exp.path,
        state=exp.state,
        state_raw=exp.state_raw,
        model=exp.model,
        benchmark=exp.benchmark,
        score=exp.score,
        trials=report_trials(c, n_rep=c.n_rep, valid_after_dedupe=kept.counts.valid if deduped else None),
        valid_fraction=(c.valid / c.expected) if c.expected else None,
        # the gate's own figure: after dedupe when the job still needs it (DESIGN 3, check 6)
        error_fraction=err_frac,
        checks=checks,
        verdict=verdict,
        notes=notes,
    )
