"""What one attempt means for the score (DESIGN 3 bias notes), decided by reward presence.

It lives beside the audit so the diagnose panel and the error gate can never disagree: an
exception outside the policy's benign list is an invalid error even when a reward exists.
"""

from __future__ import annotations

from services.core.models import Trial, TrialStatus
from services.core.policy import Policy


def _fmt(r: float) -> str:
    return f"{r:g}"


def score_effect(t: Trial, policy: Policy | None = None) -> str:
    policy = policy or Policy()
    if t.status == TrialStatus.running:
        return "running: not in the score yet"
    exc = t.exception_type
    if t.parse_error and exc is None and t.reward is None and "neither" not in t.parse_error:
        return ("result.json unreadable: counted as errored; Harbor's resume leaves it on disk and runs the "
                "task again under a new name — a source of duplicates")
    if t.reward is not None:
        if exc is None:
            return f"valid: counts with reward {_fmt(t.reward)}"
        if policy.is_benign(exc):
            return (f"has a reward ({_fmt(t.reward)}): a valid measurement despite {exc} — "
                    "it counts as is; do not re-run")
        return (f"has a reward ({_fmt(t.reward)}) that Harbor counts, but {exc} is not a benign type: the "
                "error gate counts it as an invalid error — resume it")
    if exc is None:
        return "no reward and no exception: an invalid error; re-run it"
    cls = t.failure_class or ""
    if cls == "verifier_failed" or exc in ("AgentTimeoutError", "VerificationNotCompletedError"):
        return ("no reward: the verifier never ran; the true score is ≈ 0 — Harbor's mean drops it "
                "(biased up) while the leaderboard counts it as 0")
    if cls in ("sandbox_failed", "model_provider_failed"):
        return ("infra error without a reward: uncorrelated with solvability, so dropping it is ~unbiased; "
                "re-run for completeness, never impute 0")
    if cls == "cancelled":
        return "cancelled without a reward: Harbor's resume re-runs it"
    return "no reward: errored — dropped from Harbor's mean; read the traceback"
