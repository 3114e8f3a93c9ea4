"""Every audit check of DESIGN 3 on Harbor-shaped job dirs, thresholds at their exact edges."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from services.audit.verdict import audit_experiment
from services.core.models import AuditReport, CheckStatus, Experiment
from services.core.plain import copy_with
from services.core.policy import Policy
from tests.support.harbor_factory import T0, JobBuilder, healthy_job, scan_one, tasks

PASS, WARN, FAIL, SKIP = CheckStatus.pass_, CheckStatus.warn, CheckStatus.fail, CheckStatus.skip


def audit(job_dir: Path, policy: Policy | None = None, **update: Any) -> AuditReport:
    exp: Experiment = scan_one(job_dir, policy)
    if update:
        exp = copy_with(exp, **update)
    return audit_experiment(exp, policy or Policy())


def status(r: AuditReport, check: str) -> CheckStatus:
    return r.check(check).status


# -- a healthy job --------------------------------------------------------------------------

def test_healthy_job_is_finalized(tmp_path: Path) -> None:
    r = audit(healthy_job(tmp_path).write())
    assert r.verdict == "finalize" and not r.needs_action
    assert [c.id for c in r.checks] == ["finished", "score", "traces", "valid_count", "duplicates", "error_gate",
                                        "model_name", "benchmark_name", "stale_rows"]
    assert {c.id: c.status for c in r.checks} == {
        "finished": PASS, "score": PASS, "traces": SKIP, "valid_count": PASS, "duplicates": PASS,
        "error_gate": PASS, "model_name": PASS, "benchmark_name": PASS, "stale_rows": SKIP}
    assert r.trials == {"total": 30, "valid": 30, "errored": 0, "running": 0, "expected": 30, "invalid_errors": 0,
                        "n_rep": 3,
                        "max_attempts_per_task": 3, "valid_after_dedupe": None}
    assert r.valid_fraction == 1.0 and r.error_fraction == 0.0


def test_audit_writes_nothing(tmp_path: Path) -> None:
    from tests.support.harbor_factory import tree

    d = healthy_job(tmp_path).write()
    before = tree(d)
    audit(d)
    audit(d)
    assert tree(d) == before


# -- 1. finished ----------------------------------------------------------------------------

def test_unfinished_job_waits(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, finished=False)
    job.add("task-late", running=True)
    r = audit(job.write())
    assert status(r, "finished") == WARN and r.verdict == "wait"
    assert r.trials["running"] == 1


@pytest.mark.parametrize(
    ("sched", "expected", "verdict"),
    [
        ("COMPLETED", PASS, "finalize"),
        ("RUNNING", WARN, "wait"),
        ("PENDING", WARN, "wait"),
        ("FAILED", FAIL, "investigate"),
        ("TIMEOUT", FAIL, "investigate"),
        ("CANCELLED by 0", FAIL, "investigate"),
    ],
)
def test_scheduler_state_decides_finished(tmp_path: Path, sched: str, expected: CheckStatus, verdict: str) -> None:
    r = audit(healthy_job(tmp_path).write(), scheduler_state=sched, scheduler_job_id="4242")
    c = r.check("finished")
    assert c.status == expected and "4242" in c.evidence and sched in c.evidence
    assert r.verdict == verdict
    if expected != PASS:
        assert c.action


# -- 2. score -------------------------------------------------------------------------------

def test_zero_score_with_trials_that_ran_is_a_real_zero(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=1, n_total_trials=10)
    for task in tasks(10):
        job.add(task, 0.0)
    r = audit(job.write())
    assert status(r, "score") == PASS and r.score == 0.0
    assert r.verdict == "finalize"


@pytest.mark.parametrize("score", [None, 0.0])
def test_null_or_zero_score_with_no_valid_trials_never_reached_the_model(tmp_path: Path, score: Any) -> None:
    job = JobBuilder(tmp_path, n_attempts=1, n_total_trials=89, score=score)
    for task in tasks(40):
        job.add(task, None, "ModelNotFoundError")
    r = audit(job.write())
    assert status(r, "score") == FAIL
    assert "never reached the model" in r.check("score").evidence
    assert r.verdict == "rerun"


def test_missing_score_with_valid_trials_is_investigated_not_rerun(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, score=None)
    r = audit(job.write())
    assert status(r, "score") == FAIL and "never reached" not in r.check("score").evidence
    assert r.verdict == "investigate"


# -- 4. valid count -------------------------------------------------------------------------

def _write_many(root: Path, n_valid: int, n_errored: int, expected: int, exception: str = "DaytonaError") -> Path:
    """n_valid scored trials plus n_errored trials that end in `exception` without a reward."""
    job = JobBuilder(root, "custom-bench_org-M_2026-03-02__09-00-00", dataset="custom-bench", n_attempts=1,
                     n_total_trials=expected, lean=True)
    for i, task in enumerate(tasks(n_valid + n_errored)):
        if i < n_errored:
            job.add(task, None, exception, started=T0 + timedelta(seconds=i))
        else:
            job.add(task, float(i % 2), started=T0 + timedelta(seconds=i))
    return job.write()


@pytest.fixture(scope="module")
def just_under(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    """899 valid and 101 invalid of 1000: 89.9% valid, 10.1% errors — both just over the line."""
    return audit(_write_many(tmp_path_factory.mktemp("edge"), 899, 101, 1000))


def test_valid_count_at_exactly_90_percent_passes(tmp_path: Path) -> None:
    r = audit(_write_many(tmp_path, 90, 10, 100))
    assert status(r, "valid_count") == PASS and r.valid_fraction == pytest.approx(0.9)
    assert status(r, "error_gate") == PASS and r.error_fraction == pytest.approx(0.10)
    assert r.verdict == "finalize"


def test_valid_count_at_89_9_percent_fails_and_resumes(just_under: AuditReport) -> None:
    c = just_under.check("valid_count")
    assert c.status == FAIL and "899 valid of 1000" in c.evidence and "89.9%" in c.evidence
    assert just_under.verdict == "resume"
    assert any("never register" in n for n in just_under.notes)


def test_error_gate_at_10_1_percent_fails(just_under: AuditReport) -> None:
    c = just_under.check("error_gate")
    assert c.status == FAIL and "101 invalid errors / 1000 attempts = 10.1%" in c.evidence
    assert just_under.error_fraction == pytest.approx(0.101)


def test_a_reward_with_a_non_benign_exception_is_valid_but_an_invalid_error(tmp_path: Path) -> None:
    r = audit(_write_many(tmp_path, 90, 0, 100))
    assert r.error_fraction == 0.0
    job = JobBuilder(tmp_path, "scored-crash", n_attempts=1, n_total_trials=10)
    for i, task in enumerate(tasks(10)):
        job.add(task, 0.0, "NonZeroAgentExitCodeError" if i < 2 else None)
    r = audit(job.write())
    assert r.trials["valid"] == 10 and status(r, "valid_count") == PASS
    assert r.error_fraction == pytest.approx(0.2) and status(r, "error_gate") == FAIL


def test_expected_falls_back_to_n_rep_times_size(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, n_tasks=10, n_rep=2, n_total_trials=None)
    r = audit(job.write())
    assert r.trials["expected"] == 2 * 89 and r.trials["n_rep"] == 2
    assert status(r, "valid_count") == FAIL  # 20 of 178


def test_n_rep_absent_from_config_is_harbors_default_one(tmp_path: Path) -> None:
    from tests.support.harbor_factory import MISSING

    job = JobBuilder(tmp_path, n_attempts=MISSING, n_total_trials=None)
    for task in tasks(89):
        job.add(task, 1.0)
    d = job.write()
    assert "n_attempts" not in json.loads((d / "config.json").read_text())
    r = audit(d)
    assert r.trials["n_rep"] == 1 and r.trials["expected"] == 89
    assert r.verdict == "finalize"


def test_no_job_config_uses_the_seed_default_three(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, n_tasks=89, n_rep=1, write_config=False, n_total_trials=None)
    r = audit(job.write())
    assert r.trials["n_rep"] == 3 and r.trials["expected"] == 267
    assert "default" in r.check("valid_count").evidence


# -- 5. duplicates --------------------------------------------------------------------------

def test_more_attempts_than_n_rep_times_size(tmp_path: Path) -> None:
    policy = Policy(benchmark_sizes={"mini": 4})
    job = JobBuilder(tmp_path, "mini_model_2026", dataset="mini", n_attempts=1, n_total_trials=4)
    for task in tasks(5):
        job.add(task, 1.0)
    r = audit(job.write(), policy)
    c = r.check("duplicates")
    assert c.status == FAIL and "5 attempts > n_rep × size = 1 × 4" in c.evidence
    assert c.action and "dedupe" in c.action
    assert r.verdict == "dedupe"


def test_a_task_with_more_than_n_rep_attempts(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, n_tasks=5, n_rep=2)
    job.add("task-000", 1.0, started=T0 + timedelta(hours=9))
    r = audit(job.write())
    c = r.check("duplicates")
    assert c.status == FAIL and "1 task(s) have more than 2 attempts (max 3)" in c.evidence
    assert r.trials["max_attempts_per_task"] == 3
    assert r.verdict == "dedupe"
    # the remediation id lets the console offer the fix on this row
    assert c.remediation == "dedupe"


def test_staged_copies_alone_call_for_dedupe(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, n_tasks=3, n_rep=1)
    t = job.trials[0]
    job.add(t.task, t.reward, name=t.name, started=t.started, subdir="restored")
    r = audit(job.write())
    assert status(r, "duplicates") == FAIL and "staged cop" in r.check("duplicates").evidence
    assert r.trials["total"] == 3


# -- 6. error gate --------------------------------------------------------------------------

def test_benign_exception_without_reward_is_errored_but_not_invalid(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=1, n_total_trials=10)
    for task in tasks(8):
        job.add(task, 1.0)
    job.add("timeout", None, "AgentTimeoutError")
    job.add("ctx", None, "ContextLengthExceededError")
    r = audit(job.write())
    assert r.trials["errored"] == 2 and r.trials["valid"] == 8
    assert r.error_fraction == 0.0 and status(r, "error_gate") == PASS
    assert status(r, "valid_count") == FAIL  # 80% valid


def test_unparsable_result_and_missing_reward_are_invalid(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=1, n_total_trials=10)
    for task in tasks(8):
        job.add(task, 1.0)
    job.add("broken", raw_result='{"verifier_result": {"rew', name="broken__AAAAAAA")
    job.add("empty-verifier", None)
    r = audit(job.write())
    assert r.error_fraction == pytest.approx(0.2)
    ev = r.check("error_gate").evidence
    assert "unreadable result.json" in ev and "no reward" in ev


def test_error_gate_runs_on_what_dedupe_would_keep(tmp_path: Path) -> None:
    """Duplicates inflate the denominator: 2/26 on disk passes, 2/10 after dedupe fails."""
    job = JobBuilder(tmp_path, n_attempts=1, dataset="custom-bench", n_total_trials=10)
    names = tasks(10)
    for i, task in enumerate(names):
        if i < 2:
            job.add(task, None, "DaytonaError", started=T0 + timedelta(minutes=i))
        else:
            for rep in range(3):
                job.add(task, 1.0, started=T0 + timedelta(minutes=i, seconds=rep))
    r = audit(job.write())
    gate = r.check("error_gate")
    assert gate.status == FAIL and "dedupe would keep" in gate.evidence
    assert "2 invalid errors / 10 attempts" in gate.evidence
    assert r.error_fraction == pytest.approx(0.2)
    assert r.trials["total"] == 26  # the trial counts stay what is on disk
    assert r.verdict == "dedupe"


def test_error_gate_after_dedupe_can_pass_where_disk_fails(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=1, dataset="custom-bench", n_total_trials=10)
    for i, task in enumerate(tasks(10)):
        if i < 5:  # an early infra failure, then a scored retry under a new name
            job.add(task, None, "DaytonaError", started=T0 + timedelta(minutes=i))
        job.add(task, 1.0, started=T0 + timedelta(hours=1, minutes=i))
    r = audit(job.write())
    assert r.trials["total"] == 15
    gate = r.check("error_gate")
    assert gate.status == PASS and "0 invalid errors / 10 attempts" in gate.evidence
    assert r.verdict == "dedupe"


def test_benign_list_and_thresholds_come_from_policy(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=1, n_total_trials=10)
    for task in tasks(8):
        job.add(task, 1.0)
    job.add("infra-a", 0.0, "DaytonaError")
    job.add("infra-b", 0.0, "DaytonaError")
    d = job.write()
    assert status(audit(d), "error_gate") == FAIL  # 20%
    lenient = Policy(benign_exceptions=["DaytonaError"])
    assert status(audit(d, lenient), "error_gate") == PASS
    loose_gate = Policy(error_fraction_max=0.25)
    assert status(audit(d, loose_gate), "error_gate") == PASS
    strict_valid = Policy(valid_fraction_min=1.0)
    assert status(audit(d, strict_valid), "valid_count") == PASS  # rewards present: 10/10
    job2 = JobBuilder(tmp_path, "other", n_attempts=1, n_total_trials=10)
    for task in tasks(9):
        job2.add(task, 1.0)
    d2 = job2.write()
    assert status(audit(d2), "valid_count") == PASS
    assert status(audit(d2, strict_valid), "valid_count") == FAIL


# -- 7, 8. names ----------------------------------------------------------------------------

def test_numeric_model_names_model_hf_name(tmp_path: Path) -> None:
    name = "terminal_bench_2_1774950145766573_2026-03-02__09-00-00"
    job = healthy_job(tmp_path, name, model="hosted_vllm/1774950145766573")
    d = job.write()
    (d / "configs").mkdir()
    (d / "configs" / f"{name}_eval_config.json").write_text(
        json.dumps({"model_hf_name": "laion/OpenThinker-Agent-32B", "benchmark": "terminal_bench_2"}))
    c = audit(d).check("model_name")
    assert c.status == FAIL
    assert "1774950145766573" in c.evidence and "laion/OpenThinker-Agent-32B" in c.evidence
    assert c.action and "laion/OpenThinker-Agent-32B" in c.action


def test_numeric_model_with_model_hf_name_in_job_config(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, model="hosted_vllm/1774950145766573",
                      extra_config={"model_hf_name": "laion/Real-Model"})
    c = audit(job.write()).check("model_name")
    assert c.status == FAIL and "laion/Real-Model" in c.evidence


def test_real_model_name_passes(tmp_path: Path) -> None:
    c = audit(healthy_job(tmp_path, model="hosted_vllm/laion/Qwen3-8B-2507").write()).check("model_name")
    assert c.status == PASS


@pytest.mark.parametrize(("dirname", "real"), [
    ("terminal_bench_2_laion-Qwen3-8B_2026-03-02__09-00-00", "terminal_bench_2"),
    ("mybench_laion-Qwen3-8B_2026-03-02__09-00-00", "mybench"),
])
def test_hash_benchmark_names_the_run_dirs_leading_segment(tmp_path: Path, dirname: str, real: str) -> None:
    job = healthy_job(tmp_path, dirname, dataset="34ab93c4e1d2f0a9b8c7d6e5f4a3b2c1d0e9f8a7", n_total_trials=30)
    r = audit(job.write())
    c = r.check("benchmark_name")
    assert c.status == FAIL and repr(real) in c.evidence
    assert c.action and real in c.action


@pytest.mark.parametrize("bench", ["0123456789abcdef0123456789abcdef", "a" * 64])
def test_hash_pattern_bounds(tmp_path: Path, bench: str) -> None:
    job = healthy_job(tmp_path, dataset=bench)
    assert status(audit(job.write()), "benchmark_name") == FAIL


@pytest.mark.parametrize("bench", ["0123456789abcdef0123456789abcde", "A" * 40, "a" * 65, "dev_set_v2"])
def test_not_a_hash(tmp_path: Path, bench: str) -> None:
    job = healthy_job(tmp_path, dataset=bench, n_total_trials=30)
    assert status(audit(job.write()), "benchmark_name") == PASS


def test_traces_and_stale_rows_skip_without_a_leaderboard(tmp_path: Path) -> None:
    r = audit(healthy_job(tmp_path).write())
    assert status(r, "traces") == SKIP and status(r, "stale_rows") == SKIP


# -- bias notes -----------------------------------------------------------------------------

def test_bias_notes_discriminate_by_reward_presence(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=1, n_total_trials=20)
    for task in tasks(12):
        job.add(task, 1.0)
    job.add("vnc", None, "VerificationNotCompletedError")
    job.add("timeout-no-reward", None, "AgentTimeoutError")
    job.add("timeout-scored-a", 0.0, "AgentTimeoutError")
    job.add("timeout-scored-b", 0.0, "AgentTimeoutError")
    job.add("timeout-scored-c", 1.0, "AgentTimeoutError")
    job.add("daytona", None, "DaytonaError")
    job.add("auth", None, "AuthenticationError")
    job.add("rate", None, "ApiRateLimitError")
    r = audit(job.write())
    text = "\n".join(r.notes)
    never_ran = next(n for n in r.notes if "verifier never ran" in n)
    assert never_ran.startswith("2 trial(s)")
    infra = next(n for n in r.notes if "infra error" in n)
    assert infra.startswith("3 infra error(s)") and "never impute 0" in infra
    scored = next(n for n in r.notes if "carry a reward" in n)
    assert scored.startswith("3 AgentTimeoutError")
    assert "biased up" in text


def test_no_bias_notes_on_a_clean_job(tmp_path: Path) -> None:
    r = audit(healthy_job(tmp_path).write())
    assert r.notes == []
