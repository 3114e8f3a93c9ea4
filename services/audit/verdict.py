"""The audit of one experiment: its checklist, the single verdict it leads to, and the notes a
person must read beside the score (DESIGN 3).

Pure: nothing here reads files or writes anything; the same Experiment always yields the same
report, so re-running the audit after a remediation shows exactly what changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, cast, get_args

from services.audit.checks import (
    FAIL,
    PASS,
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
from services.core.models import AuditReport, Check, Experiment, State, Verdict, report_trials
from services.core.plain import copy_with
from services.core.policy import Policy


def bias_notes(exp: Experiment, kept: Census, policy: Policy | None = None) -> list[str]:
    notes: list[str] = []
    n_rewards = kept.counts.valid
    if kept.no_verifier:
        mean_drop = kept.reward_sum / n_rewards if n_rewards else 0.0
        mean_zero = kept.reward_sum / (n_rewards + kept.no_verifier)
        kinds = ", ".join(f"{k} ×{v}" for k, v in kept.no_verifier_kinds.most_common(3))
        notes.append(
            f"{kept.no_verifier} trial(s) have no reward because the verifier never ran "
            f"({kinds or 'no exception type'}, without a reward): the true score is ≈ 0 for them. "
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
    return decided(enrich(report, exp, policy, now, context), policy)


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
    notes = bias_notes(exp, kept, policy)
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
        verdict="investigate",  # audit_experiment decides, once every enrichment has added its checks
        notes=notes,
    )


# ---- the verdict: one function over the checks of any backend ----------------------------------

# the verdict a fix gives its name to (Check.remediation → Verdict)
FIX_VERDICT: dict[str, Verdict] = {
    "rebuild_aggregate": "repair",
    "dedupe": "dedupe",
    "resume": "resume",
    "aisbench_resume": "resume",
    "retry": "retry",
    "rerun": "rerun",
    "aisbench_launch": "launch",
    "deregister": "deregister",
    "register": "register",
    "upload_traces": "upload",
    "repoint_model": "rename",
    "repoint_benchmark": "rename",
    "delete_stale": "cleanup",
    "free_disk": "cleanup",
    "csbench_teardown": "teardown",
    "csbench_fetch": "fetch",
    "csbench_submit": "submit",
}

# What each verdict asks of a person, the one meaning every surface colours it by: nothing more
# (done), to wait, to run the fix it names (act), to look because nothing evaldesk runs settles
# it (look: investigate, and repair, since nothing else can be judged before the rebuild), or to
# give the values a task needs (input).
VerdictKind = Literal["done", "wait", "act", "look", "input"]
VERDICT_KIND: dict[Verdict, VerdictKind] = {
    **{v: "act" for v in get_args(Verdict)},
    "finalize": "done",
    "wait": "wait",
    "investigate": "look",
    "repair": "look",
    "input": "input",
}


def verdict_kind(verdict: str) -> VerdictKind:
    """What `verdict` asks of a person; a word this evaldesk does not know (a report written by a
    newer one) asks for a look."""
    return VERDICT_KIND.get(cast(Verdict, verdict), "look")


# What to do first when several checks need action: what bills by the hour, then what makes
# every other figure wrong (duplicates, a registered partial), then the run itself, then its
# names and its leaderboard row. A check id not listed comes after these, in checklist order.
PRIORITY: tuple[str, ...] = (
    "teardown", "finished", "campaign_state", "duplicates", "partial_registered", "score", "results_file",
    "params", "preflight", "valid_count", "error_gate", "tasks", "alignment", "model_name", "benchmark_name",
    "registered", "traces", "stale_rows",
)
# the checks that say whether the run is over and complete: a warning there leaves the run
# unjudgeable (still running → wait; not running → a person must look)
_STATE_CHECKS = ("finished", "campaign_state", "valid_count")
_LIVE = (State.running, State.pending, State.dispatched)


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    decided_by: str | None = None  # the check id
    fix: str | None = None  # the remediation it names
    ask: str | None = None  # what a person must decide, with the commands


def _priority(c: Check, at: int) -> tuple[int, int, int]:
    rank = PRIORITY.index(c.id) if c.id in PRIORITY else len(PRIORITY)
    return rank, 0 if c.status == FAIL else 1, at


def _say(c: Check) -> str:
    return f"{c.title}: {c.action}" if c.action else f"{c.title}: {c.evidence}"


def decide(checks: Sequence[Check], state: State) -> Decision:
    """The one verdict for a checklist, total over every combination of check outcomes:

    1. a failing check whose fix rebuilds the experiment's own summary → repair;
    2. the task needs input → input (it asks for the values);
    3. still running (`finished` warns with nothing to run for it, or a live run's state check
       warns) → wait;
    4. the first check, by PRIORITY, that fails or warns with a fix → the verdict its fix names,
       or investigate (asking what its action says) when it fails with no fix evaldesk runs;
    5. a state check warns on a run that is not live → investigate (completeness is unknown);
    6. otherwise → finalize. Never finalize while any check fails.

    A check may name a fix only when that fix plans at least one step by default; the checks
    ensure it (services.audit.checks), the tests plan every verdict's fix to prove it."""
    fails = [c for c in checks if c.status == FAIL]
    for c in fails:
        if c.remediation == "rebuild_aggregate":
            return Decision("repair", _say(c), c.id, c.remediation)
    if state == State.needs_input:
        asking = next((c for c in sorted(fails, key=lambda c: _priority(c, 0)) if c.remediation), None)
        what = _say(asking) if asking is not None else "the task waits for values only a person can give"
        return Decision("input", what, asking.id if asking else None, asking.remediation if asking else None,
                        ask=what)
    live_warn = next((c for c in checks if c.id in _STATE_CHECKS and c.status == WARN and not c.remediation), None)
    still = live_warn is not None and (live_warn.id == "finished" or state in _LIVE)
    if still or (state in _LIVE and not any(c.remediation for c in checks if c.status != PASS)):
        return Decision("wait", _say(live_warn) if live_warn else f"the run is {state.value}: wait and audit again",
                        live_warn.id if live_warn else None)
    actionable = [(c, i) for i, c in enumerate(checks)
                  if c.status == FAIL or (c.status == WARN and c.remediation)]
    if actionable:
        c, _ = min(actionable, key=lambda ci: _priority(*ci))
        verdict = FIX_VERDICT.get(c.remediation or "")
        if verdict is not None:
            return Decision(verdict, _say(c), c.id, c.remediation)
        if c.status == FAIL:
            return Decision("investigate", _say(c), c.id, ask=_say(c))
    if fails:  # a failing check outranked by a warning whose fix is unknown: still a person's call
        c = min(((c, i) for i, c in enumerate(checks) if c.status == FAIL), key=lambda ci: _priority(*ci))[0]
        return Decision("investigate", _say(c), c.id, ask=_say(c))
    if live_warn is not None:
        return Decision("investigate", _say(live_warn), live_warn.id, ask=_say(live_warn))
    return Decision("finalize", "every check passes: register the score and upload the traces")


def decided(report: AuditReport, policy: Policy) -> AuditReport:
    """The report with its verdict from `decide`, and the rule behind a resume beside it."""
    d = decide(report.checks, report.state)
    notes = list(report.notes)
    if d.decided_by in ("valid_count", "error_gate", "partial_registered"):
        again = {"retry": "retry", "resume": "resume", "deregister": "de-register the partial, then resume"}.get(
            d.verdict, "decide what to re-run (the verdict says how)")
        notes.insert(0, f"{policy.completeness_rule()}: {again}, never register; if a partial row was already "
                     "registered, de-register that one row.")
    return copy_with(report, verdict=d.verdict, reason=d.reason, decided_by=d.decided_by, fix=d.fix, ask=d.ask,
                     notes=notes)
