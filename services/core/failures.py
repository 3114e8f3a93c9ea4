"""Failure classes: Harbor's error-policy groups named for what they mean to an operator, and the
class of an exception type (the trial parser, services/harbor/parse.py, classifies with them)."""

from __future__ import annotations

from typing import Final

# what a trial says when its result.json holds neither a reward nor an exception
NO_REWARD_NOR_EXCEPTION = "result.json has neither a reward nor an exception"

# Harbor's error-policy groups, named by what they mean for an operator.
FAILURE_CLASSES: Final[dict[str, tuple[str, ...]]] = {
    "sandbox_failed": (
        "EnvironmentStartTimeoutError",
        "SandboxBuildFailedError",
        "AgentSetupTimeoutError",
        "HealthcheckError",
        "SandboxLikelyOutOfMemoryError",
        "MemoryLimitExceededError",
        "SSHAccessError",
        "GKEExecStreamClosedError",
        "GKEPodNotFoundError",
        "RuntimeRequestError",
        "AddTestsDirError",
        "DownloadVerifierDirError",
    ),
    "model_provider_failed": (
        "ApiError",
        "ApiRateLimitError",
        "ApiInternalServerError",
        "ApiOverloadedError",
        "ApiConnectionClosedError",
        "ApiResponseStalledError",
        "UnknownApiError",
        "NetworkConnectionError",
        "ApiConnectionError",
        "ApiUsageLimitError",
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "APIConnectionError",
        "APIError",
        "Timeout",
        "UnsupportedModelParametersError",
        "BadRequestError",
        "UnprocessableEntityError",
        "UnsupportedParamsError",
        "APIResponseValidationError",
        "BudgetExceededError",
        "AgentAuthenticationError",
        "ModelNotFoundError",
        "ApiProviderResourceNotFoundError",
        "AuthenticationError",
        "PermissionDeniedError",
        "NotFoundError",
    ),
    "verifier_failed": (
        "VerifierTimeoutError",
        "RewardFileNotFoundError",
        "RewardFileEmptyError",
        "VerifierOutputParseError",
        "VerificationNotCompletedError",
    ),
    "harbor_failed": (
        "ServiceOperationsUnsupportedError",
        "VercelScopeError",
        "DspyImportError",
        "MissingExtraError",
        "RegradeError",
    ),
    "cancelled": ("CancelledError",),
    "agent_exhausted_budget": (
        "NonZeroAgentExitCodeError",
        "AgentTimeoutError",
        "ContextWindowExceededError",
        "OutputTokenExceededError",
        "ContextLengthExceededError",
        "OutputLengthExceededError",
    ),
    "agent_refused_task": ("AgentSafetyRefusalError", "ContentPolicyViolationError"),
}
_CLASS_OF: Final[dict[str, str]] = {
    name: cls for cls, names in FAILURE_CLASSES.items() for name in names
}

FAILURE_CLASS_MEANING: Final[dict[str, str]] = {
    "sandbox_failed": "infra: the sandbox never let the agent work; uncorrelated with solvability, "
    "dropping is ~unbiased — re-run for completeness, never impute 0",
    "model_provider_failed": "infra: the model endpoint failed (rate limit, auth, 5xx); re-run, never impute 0",
    "verifier_failed": "the verifier never produced a reward; true score is likely ≈ 0 — Harbor's mean "
    "drops these (biased up), the leaderboard counts them as 0; resume on a healthy sandbox",
    "harbor_failed": "a Harbor-side failure (missing extra, unsupported operation); fix the harness and re-run",
    "cancelled": "cancelled before it finished; Harbor's resume re-runs it",
    "agent_exhausted_budget": "the agent ran out of time or context, or exited non-zero; a benign type "
    "(timeout, context overflow) with a reward is a valid 0 — do not re-run",
    "agent_refused_task": "the agent or provider refused; with a reward it is a valid measurement",
    "unclassified": "not in Harbor's error-policy table: read the traceback",
}


# Sandbox providers raise their own exception families outside Harbor's table.
_SANDBOX_PREFIXES: Final = ("Daytona", "Modal", "E2B", "Runloop", "Docker")


def failure_class(exception_type: str | None) -> str | None:
    if not exception_type:
        return None
    found = _CLASS_OF.get(exception_type)
    if found:
        return found
    if exception_type.startswith(_SANDBOX_PREFIXES):
        return "sandbox_failed"
    return "unclassified"
