"""The verdict table, exhaustively: every combination of check outcomes maps to one verdict,
and every verdict keeps the invariants of DESIGN 3 (never finalize while a check fails; a
verdict that names a fix names the fix of the check that decided it; a verdict with no fix
asks a person what to decide; a task that needs input asks for it)."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest

from services.audit.verdict import FIX_VERDICT, PRIORITY, Decision, decide
from services.core.models import Check, CheckStatus, State, Verdict
from services.core.plain import copy_with

PASS, WARN, FAIL, SKIP = CheckStatus.pass_, CheckStatus.warn, CheckStatus.fail, CheckStatus.skip
VERDICTS = set(get_args(Verdict))
# (status, carries a fix)
OUTCOMES = [(PASS, False), (SKIP, False), (WARN, False), (WARN, True), (FAIL, False), (FAIL, True)]

# the fix each check id carries in the tests, one per kind of verdict it can lead to
FIX_OF = {
    "finished": "aisbench_launch", "campaign_state": "csbench_fetch", "duplicates": "dedupe",
    "valid_count": "resume", "error_gate": "resume", "score": "rerun", "alignment": "rerun",
    "partial_registered": "deregister", "registered": "register", "traces": "upload_traces",
    "model_name": "repoint_model", "benchmark_name": "repoint_benchmark", "stale_rows": "delete_stale",
    "teardown": "csbench_teardown", "results_file": "aisbench_resume", "params": "aisbench_launch",
    "preflight": "aisbench_launch", "submitted": "csbench_submit", "mock_vs_real": "csbench_submit",
}


def check(cid: str, outcome: tuple[CheckStatus, bool], fix: str | None = None) -> Check:
    status, has_fix = outcome
    return Check(id=cid, title=cid.replace("_", " "), status=status, evidence=f"{cid} evidence",
                 action=f"do the {cid} thing", remediation=(fix or FIX_OF.get(cid, "resume")) if has_fix else None)


def assert_invariants(checks: list[Check], state: State, d: Decision) -> None:
    assert d.verdict in VERDICTS
    assert d.reason
    fails = [c for c in checks if c.status == FAIL]
    if d.verdict == "finalize":
        assert not fails, "finalize while a check fails"
    by_id = {c.id: c for c in checks}
    if d.verdict == "input":
        assert state == State.needs_input and d.ask
    elif state == State.needs_input:
        assert d.verdict == "repair"
    if any(c.remediation == "rebuild_aggregate" for c in fails):
        assert d.verdict == "repair"
    if d.verdict in set(FIX_VERDICT.values()):
        # the fix is the deciding check's own, and its name is the verdict's
        assert d.fix is not None and FIX_VERDICT[d.fix] == d.verdict
        decider = by_id[d.decided_by or ""]
        assert decider.remediation == d.fix and decider.status in (FAIL, WARN)
    if d.verdict == "investigate":
        assert d.ask, "a verdict without a fix asks a person"
        assert d.fix is None
        assert by_id[d.decided_by or ""].status in (FAIL, WARN)
    if d.verdict == "wait":
        assert state in (State.running, State.pending, State.dispatched) or by_id["finished"].status == WARN


STATES = list(State)
SLOTS = ("finished", "duplicates", "valid_count", "alignment", "own_backend_check")


def test_every_combination_of_five_checks_in_every_state_has_one_verdict() -> None:
    """6 outcomes ^ 5 checks × 9 states = 69,984 checklists: a state check, a fix that comes
    first, a completeness check, an enrichment, and a check id no priority lists."""
    made = {(cid, o): check(cid, o) for cid in SLOTS for o in OUTCOMES}
    seen: set[str] = set()
    n = 0
    for outcomes in itertools.product(OUTCOMES, repeat=len(SLOTS)):
        checks = [made[cid, o] for cid, o in zip(SLOTS, outcomes, strict=True)]
        for state in STATES:
            d = decide(checks, state)
            assert_invariants(checks, state, d)
            seen.add(d.verdict)
            n += 1
            # skip and pass are the same to the verdict
            if any(c.status == SKIP for c in checks):
                as_pass = [copy_with(c, status=PASS) if c.status == SKIP else c for c in checks]
                assert decide(as_pass, state).verdict == d.verdict
    assert n == 6 ** 5 * 9
    assert {"finalize", "wait", "input", "investigate", "launch", "dedupe", "resume", "rerun"} <= seen


BACKEND_CHECKLISTS = {
    "harbor": ["finished", "score", "traces", "valid_count", "duplicates", "error_gate", "model_name",
               "benchmark_name", "stale_rows", "alignment", "registered", "partial_registered"],
    "aisbench": ["finished", "results_file", "score", "preflight", "params"],
    "csbench": ["campaign_state", "tasks", "fetched", "artifacts", "mock_vs_real", "harness_report", "hf_mirror",
                "oracle_resolved", "docker_room", "teardown"],
    "csbench plan": ["python", "credentials", "plan_valid", "submitted"],
}


@pytest.mark.parametrize("backend", sorted(BACKEND_CHECKLISTS))
def test_every_pair_of_outcomes_on_each_backends_checklist(backend: str) -> None:
    """Each backend's own check ids: every pair of checks in every pair of outcomes (the rest
    passing), in every state."""
    ids = BACKEND_CHECKLISTS[backend]
    base = {cid: check(cid, (PASS, False)) for cid in ids}
    for a, b in itertools.combinations(ids, 2):
        for oa, ob in itertools.product(OUTCOMES, repeat=2):
            checks = [check(a, oa) if c == a else check(b, ob) if c == b else base[c] for c in ids]
            for state in STATES:
                assert_invariants(checks, state, decide(checks, state))


def test_the_table_rows() -> None:
    """The rows docs/verdicts.md writes out, one example each."""
    ok = [check(c, (PASS, False)) for c in ("finished", "valid_count", "error_gate")]

    def with_(cid: str, outcome: tuple[CheckStatus, bool], fix: str | None = None) -> list[Check]:
        return [check(cid, outcome, fix) if c.id == cid else c for c in ok] + (
            [] if cid in {c.id for c in ok} else [check(cid, outcome, fix)])

    assert decide(ok, State.finished).verdict == "finalize"
    assert decide(with_("finished", (FAIL, True), "rebuild_aggregate"), State.blocked).verdict == "repair"
    assert decide(with_("params", (FAIL, True)), State.needs_input).verdict == "input"
    assert decide(with_("finished", (WARN, False)), State.running).verdict == "wait"
    # a pending task with a launch to run is launched, not waited for
    assert decide(with_("finished", (WARN, True)), State.pending).verdict == "launch"
    # teardown bills by the hour: before anything else
    both = [*with_("teardown", (WARN, True)), check("duplicates", (FAIL, True))]
    assert decide(both, State.finished).verdict == "teardown"
    # duplicates first, then a registered partial, then the run
    trio = [check("error_gate", (FAIL, True)), check("partial_registered", (FAIL, True)),
            check("duplicates", (FAIL, True))]
    assert decide(trio, State.finished).verdict == "dedupe"
    assert decide(trio[:2], State.finished).verdict == "deregister"
    assert decide(trio[:1], State.finished).verdict == "resume"
    # a failing check with no fix asks; a later fix does not jump it
    asked = decide([check("valid_count", (FAIL, False)), check("registered", (FAIL, True))], State.finished)
    assert asked.verdict == "investigate" and asked.ask == "valid count: do the valid_count thing"
    # completeness unknown on a finished run: a person looks
    assert decide(with_("valid_count", (WARN, False)), State.finished).verdict == "investigate"
    # a warning without a fix never stops finalize
    assert decide([*ok, check("alignment", (WARN, False))], State.finished).verdict == "finalize"
    # an unknown fix on a failing check: asked, never named
    odd = decide(with_("error_gate", (FAIL, True), "no_such_fix"), State.finished)
    assert odd.verdict == "investigate" and odd.fix is None


def test_priority_lists_each_check_once() -> None:
    assert len(PRIORITY) == len(set(PRIORITY))
