"""Which attempts of a task count: the earliest-first order and the score-blind keep rule (DESIGN 3).

The audit uses the rule to compute figures "after dedupe"; the dedupe remediation uses it to
decide what to move. One definition, so the two can never disagree.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from services.core.models import Trial, TrialStatus

_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)


def earliest_key(t: Trial) -> tuple[datetime, str]:
    st = t.started_at
    if st is None:
        return (_FAR_FUTURE, t.trial_name)
    # aware datetimes order correctly whatever their zone; only naive ones need converting
    return (st if st.tzinfo is not None else st.astimezone(UTC), t.trial_name)


def select_keep(trials: list[Trial], n_rep: int) -> tuple[list[Trial], list[tuple[Trial, str]], list[Trial]]:
    """Return (kept, [(surplus, reason)], copies). Pure; never looks at the reward's value."""
    copies = [t for t in trials if t.copy_of is not None]
    by_task: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        if t.copy_of is None:
            by_task[t.task_name].append(t)
    kept: list[Trial] = []
    surplus: list[tuple[Trial, str]] = []
    for task in sorted(by_task):
        attempts = sorted(by_task[task], key=earliest_key)
        scored = [t for t in attempts if t.status == TrialStatus.valid]
        unscored = [t for t in attempts if t.status != TrialStatus.valid]
        keep = scored[:n_rep]
        keep += unscored[: max(0, n_rep - len(keep))]
        keep_ids = {id(t) for t in keep}
        kept.extend(keep)
        for t in attempts:
            if id(t) not in keep_ids:
                why = (
                    f"task {task} has {len(attempts)} attempts; "
                    + ("a later scored attempt" if t.status == TrialStatus.valid else "an unscored attempt")
                    + f" beyond n_rep={n_rep}"
                )
                surplus.append((t, why))
    return kept, surplus, copies
