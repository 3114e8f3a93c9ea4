"""The four "fake execution" rules of the Rock runbook, and the evidence each one gives.

(a) the dispatched count (started trials with no file activity for `idle_s`) has not
    decreased for `stuck_polls` consecutive polls while nothing finished;
(b) new invalid errors on `error_growth_polls` consecutive polls, making up more than the
    error gate's share of what finished meanwhile (a big healthy run produces a few errors on
    most polls; without the share test the rule would cry wolf there);
(c) after `pass_rate_min_finished` finished attempts the pass rate is below
    `pass_rate_ratio` × the expected rate (needs a baseline; without one there is no
    expectation to fall short of);
(d) one trial has run longer than `timeout_factor` × the inference timeout.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from services.core.models import Experiment, State
from services.core.policy import Policy
from services.core.times import fmt_duration, iso_z
from services.monitor.figures import Reading, Sample

RuleId = Literal["a", "b", "c", "d"]


RULE_TITLES: dict[str, str] = {
    "a": "dispatched but not progressing",
    "b": "errors accumulating",
    "c": "pass rate far below expected",
    "d": "trial past its timeout",
}


class MonitorWarning(BaseModel):
    """A fake-execution rule firing, with the evidence a person can check."""

    id: str = Field(description="the experiment id")
    key: str = Field("", description="source_label::experiment id")
    rule: RuleId
    at: datetime
    evidence: str
    trial: str | None = Field(None, description="rule d: the trial dir")

    @property
    def title(self) -> str:
        return RULE_TITLES[self.rule]

    def as_json(self) -> dict[str, object]:
        return {
            "type": "warning",
            "id": self.id,
            "at": iso_z(self.at),
            "rule": self.rule,
            "evidence": self.evidence,
        }


Warning = MonitorWarning


def rules_holding(
    samples: Sequence[Sample], exp: Experiment, reading: Reading, policy: Policy
) -> tuple[dict[str, str], str | None]:
    """The rules that hold on this poll, each with its evidence, and rule d's worst trial."""
    th = policy.monitor
    holding: dict[str, str] = {}

    # (a) dispatched count not decreasing while nothing finishes
    k = th.stuck_polls
    if exp.state != State.finished and len(samples) >= k:
        win = samples[-k:]
        if (
            all(s.dispatched > 0 for s in win)
            and all(b.dispatched >= a.dispatched for a, b in itertools.pairwise(win))
            and win[-1].finished == win[0].finished
        ):
            chain = " → ".join(str(s.dispatched) for s in win)
            holding["a"] = (
                f"dispatched {chain} over {k} polls ({fmt_duration(win[-1].at - win[0].at)}), "
                f"no trial finished (still {win[-1].finished}); idle ≥ {fmt_duration(th.idle_s)} "
                "counts as dispatched"
            )

    # (b) new invalid errors on consecutive polls, beyond the error gate's share
    k = th.error_growth_polls
    if len(samples) > k:
        win = samples[-(k + 1) :]
        deltas = [b.invalid_errors - a.invalid_errors for a, b in itertools.pairwise(win)]
        new_err = win[-1].invalid_errors - win[0].invalid_errors
        new_fin = win[-1].finished - win[0].finished
        share = new_err / new_fin if new_fin > 0 else 1.0
        if all(d > 0 for d in deltas) and share > policy.error_fraction_max:
            chain = " → ".join(str(s.invalid_errors) for s in win)
            holding["b"] = (
                f"invalid errors {chain}: new errors on {k} consecutive polls, "
                f"{new_err} of {new_fin} finished attempts errored ({share:.0%} > "
                f"{policy.error_fraction_max:.0%})"
            )

    # (c) pass rate far below the expected rate
    al = reading.alignment
    if (
        al is not None
        and al.compared >= th.pass_rate_min_finished
        and al.actual < th.pass_rate_ratio * al.expected
    ):
        ci = reading.pass_rate_ci
        ci_txt = f", 95% CI {ci[0]:.0%}–{ci[1]:.0%}" if ci else ""
        holding["c"] = (
            f"pass rate {al.actual:.0%} over {al.compared} finished attempts{ci_txt} vs expected "
            f"{al.expected:.0%} (baseline {al.baseline}): below {th.pass_rate_ratio:g} × expected"
        )

    # (d) a single trial past timeout_factor × the inference timeout
    limit = th.timeout_factor * reading.inference_timeout_s
    overdue_trial: str | None = None
    # in a finished job a trial without result.json is an orphan, which the audit reports
    overdue = [r for r in (reading.running if exp.state != State.finished else ()) if r.running_s > limit]
    if overdue:
        # one warning per experiment, naming the worst trial: a stuck sandbox pool makes many
        # trials overdue at once, and one line each would bury every other warning
        worst = max(overdue, key=lambda r: r.running_s)
        more = f" ({len(overdue)} trials past the limit)" if len(overdue) > 1 else ""
        overdue_trial = worst.path
        holding["d"] = (
            f"trial {worst.trial_name} running {fmt_duration(worst.running_s)}, "
            f"{th.timeout_factor:g} × the {fmt_duration(reading.inference_timeout_s)} timeout is "
            f"{fmt_duration(limit)}; idle {fmt_duration(worst.idle_s)}{more}"
        )
    return holding, overdue_trial
