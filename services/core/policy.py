"""Every threshold and classification table the audit and monitor rely on, in one place.

Harbor's error-policy table (harbor/models/trial/error_policy.py, 0.26) is mirrored here so
failure classes come from the same source Harbor itself uses; `Policy` makes the parts an
operator may need to tune overridable from config without touching code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from services.core.failures import FAILURE_CLASSES

# Exception types whose reward Harbor treats as a valid measurement (has_valid_reward=True
# in its error policy, minus NonZeroAgentExitCodeError which the leaderboard guardrail counts
# as an error). They never count as invalid errors for the error gate.
DEFAULT_BENIGN: Final[tuple[str, ...]] = (
    "AgentTimeoutError",
    "ContextWindowExceededError",
    "OutputTokenExceededError",
    "ContextLengthExceededError",
    "OutputLengthExceededError",
    "AgentSafetyRefusalError",
    "ContentPolicyViolationError",
)

DEFAULT_BENCHMARK_SIZES: Final[dict[str, int]] = {
    "swebench-verified-random-100": 100,
    "swebench-verified-random-100-folders": 100,
    "dev_set_v2": 100,
    "terminal_bench_2": 89,
    "terminal-bench-2": 89,
}

@dataclass(frozen=True)
class ErrorPolicy:
    """Harbor's verdict on one exception type (harbor/models/trial/error_policy.py)."""

    should_retry: bool
    should_grade: bool
    has_valid_reward: bool


# Harbor 0.26's table, group for group. A type it does not list gets UNKNOWN_ERROR_POLICY —
# so an unknown sandbox error (DaytonaError …) is retried, exactly as Harbor itself does.
UNKNOWN_ERROR_POLICY: Final = ErrorPolicy(should_retry=True, should_grade=True, has_valid_reward=True)
_ERROR_POLICY_GROUPS: Final[dict[ErrorPolicy, tuple[str, ...]]] = {
    ErrorPolicy(should_retry=True, should_grade=False, has_valid_reward=False): FAILURE_CLASSES["sandbox_failed"],
    ErrorPolicy(should_retry=True, should_grade=True, has_valid_reward=False): (
        "ApiError", "ApiRateLimitError", "ApiInternalServerError", "ApiOverloadedError",
        "ApiConnectionClosedError", "ApiResponseStalledError", "UnknownApiError", "NetworkConnectionError",
        "ApiConnectionError", "ApiUsageLimitError", "RateLimitError", "InternalServerError",
        "ServiceUnavailableError", "APIConnectionError", "APIError", "Timeout",
    ),
    ErrorPolicy(should_retry=False, should_grade=True, has_valid_reward=False): (
        "UnsupportedModelParametersError", "BadRequestError", "UnprocessableEntityError", "UnsupportedParamsError",
        "APIResponseValidationError", "BudgetExceededError", "VerifierTimeoutError", "RewardFileNotFoundError",
        "RewardFileEmptyError", "VerifierOutputParseError",
    ),
    ErrorPolicy(should_retry=False, should_grade=False, has_valid_reward=False): (
        "AgentAuthenticationError", "ModelNotFoundError", "ApiProviderResourceNotFoundError", "AuthenticationError",
        "PermissionDeniedError", "NotFoundError", "ServiceOperationsUnsupportedError", "VercelScopeError",
        "DspyImportError", "MissingExtraError", "RegradeError", "CancelledError",
    ),
    ErrorPolicy(should_retry=False, should_grade=True, has_valid_reward=True): (
        "NonZeroAgentExitCodeError", "AgentTimeoutError", "ContextWindowExceededError", "OutputTokenExceededError",
        "ContextLengthExceededError", "OutputLengthExceededError", "AgentSafetyRefusalError",
        "ContentPolicyViolationError",
    ),
}
ERROR_POLICIES: Final[dict[str, ErrorPolicy]] = {
    name: policy for policy, names in _ERROR_POLICY_GROUPS.items() for name in names
}

# what `harbor jobs resume` deletes and re-runs when no -f is given
HARBOR_RESUME_DEFAULT_FILTER: Final[tuple[str, ...]] = ("CancelledError",)


def error_policy(exception_type: str) -> ErrorPolicy:
    return ERROR_POLICIES.get(exception_type, UNKNOWN_ERROR_POLICY)


def should_retry(exception_type: str) -> bool:
    """Whether Harbor would retry a trial that ended with this exception type."""
    return error_policy(exception_type).should_retry


HASH_BENCHMARK_RE: Final = re.compile(r"^[0-9a-f]{32,64}$")
NUMERIC_MODEL_RE: Final = re.compile(r"^[0-9]{6,}$")


@dataclass(kw_only=True)
class MonitorThresholds:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    stuck_polls: int = field(default=3, metadata={
        "ge": 2, "description": "rule a: polls with no drop in dispatched/running"})
    error_growth_polls: int = field(default=3, metadata={
        "ge": 2, "description": "rule b: consecutive polls with new errors"})
    pass_rate_ratio: float = field(default=0.5, metadata={
        "gt": 0, "le": 1, "description": "rule c: fire below this × expected"})
    pass_rate_min_finished: int = field(default=20, metadata={
        "ge": 1, "description": "rule c: finished trials before judging"})
    timeout_factor: float = field(default=1.5, metadata={"gt": 1, "description": "rule d: × the inference timeout"})
    inference_timeout_s: float = field(default=1500.0, metadata={
        "gt": 0, "description": "rule d: used when the job has none"})
    idle_s: float = field(default=300.0, metadata={
        "gt": 0, "description": "a started trial with no file activity this long counts as dispatched"})


@dataclass(kw_only=True)
class Policy:
    """Tunable domain rules. Defaults are the exact values of the eval-cleanup runbook."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    benign_exceptions: list[str] = field(default_factory=lambda: list(DEFAULT_BENIGN))
    benchmark_sizes: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_BENCHMARK_SIZES))
    valid_fraction_min: float = field(default=0.90, metadata={"gt": 0, "le": 1})
    error_fraction_max: float = field(default=0.10, metadata={"ge": 0, "le": 1})
    default_n_rep: int = field(default=3, metadata={"ge": 1, "description": "only where no job config exists"})
    stale_row_hours: float = field(default=12.0, metadata={"gt": 0})
    row_match_slack_hours: float = field(default=2.0, metadata={"ge": 0, "description": (
        "a leaderboard row without a job name is a run's when created within this long of the run's start and "
        "end (clock skew, a harvest that registers at launch or after the trace upload)")})
    monitor: MonitorThresholds = field(default_factory=MonitorThresholds)

    def pct(self, fraction: float) -> str:
        """A threshold as people read it: 0.9 → "90%", 0.125 → "12.5%"."""
        return f"{100 * fraction:.4g}%"

    @property
    def valid_min_text(self) -> str:
        return self.pct(self.valid_fraction_min)

    @property
    def error_max_text(self) -> str:
        return self.pct(self.error_fraction_max)

    def completeness_rule(self) -> str:
        """The finalize rule in words, from the thresholds themselves."""
        return f"Below {self.valid_min_text} valid or over the {self.error_max_text} error gate"

    def is_benign(self, exception_type: str | None) -> bool:
        return exception_type is not None and exception_type in self.benign_exceptions

    def benchmark_size(self, benchmark: str | None) -> int | None:
        if not benchmark:
            return None
        if benchmark in self.benchmark_sizes:
            return self.benchmark_sizes[benchmark]
        # Run dirs and dataset names carry suffixes ("terminal_bench_2@head", "dev_set_v2-folders").
        for name, size in sorted(self.benchmark_sizes.items(), key=lambda kv: -len(kv[0])):
            if benchmark.startswith(name):
                return size
        return None
