"""evaldesk's figures of results dirs the real `csbench run-plan` wrote (offline: local-sim, mock
target), compared with csbench's own reading of the same dir: `csbench progress --json` (the
campaign file) and `csbench verify` (the record files). Passing, failing, repeated and warm-up
plans, a run-plan killed mid-task (SIGKILL of the real process), and the same dir after a later
run-plan reaped the dead run's progress dir. Each dir is made once per session."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from services.audit.verdict import audit_experiment
from services.core.models import State, TrialStatus
from services.csbench.formats import OK_RECORD_STATUSES
from services.csbench.model import CampaignExperiment, RunTrial
from services.csbench.source import ResultsSource
from tests.support.csbench_fixtures import (
    KILLED_PLAN,
    KILLED_REPEAT,
    _in_flight,
    _records,
    csbench_exe,
    csbench_json,
    csbench_verify,
)

Runs = Callable[[str], Path]


async def campaigns(path: Path) -> list[CampaignExperiment]:
    snap = await ResultsSource(str(path), label="t").scan()
    assert not snap.errors, snap.errors
    exps = [e for e in snap.experiments if isinstance(e, CampaignExperiment)]
    assert len(exps) == len(snap.experiments)
    return exps


def scored(counts: dict[str, int]) -> int:
    return sum(n for status, n in counts.items() if status in OK_RECORD_STATUSES)


def records_read(exp: CampaignExperiment) -> set[str]:
    """Every record file evaldesk read into the experiment: measured runs and warm-ups."""
    runs = [t.run for t in exp.trials if isinstance(t, RunTrial)] + exp.facts.warmups
    return {r.record_rel for r in runs if r.record_rel}


def same_as_csbench(exp: CampaignExperiment, root: Path) -> dict:
    """The campaign as csbench progress says it: the same tasks in the same states, and for each
    ended task the measured runs evaldesk counts valid are csbench's scored status_counts."""
    camp = csbench_json(root, exp.id)
    assert [t["task_id"] for t in camp["tasks"]] == [t.task_id for t in exp.facts.tasks]
    assert [t["status"] for t in camp["tasks"]] == [t.status for t in exp.facts.tasks]
    for t, slot_expected in zip(camp["tasks"], exp.facts.expected_runs, strict=True):
        if t["status"] == "completed":
            assert sum(t["status_counts"].values()) == slot_expected
    ended = [t for t in camp["tasks"] if t["status"] == "completed"]
    valid_ended = sum(scored(t["status_counts"]) for t in ended)
    valid_by_task: dict[str, int] = {}
    for tr in exp.trials:
        if tr.status == TrialStatus.valid:
            valid_by_task[tr.task_name] = valid_by_task.get(tr.task_name, 0) + 1
    assert sum(valid_by_task.get(t["task_id"], 0) for t in ended) == valid_ended
    assert exp.counts.valid <= (exp.counts.expected or 0)
    return camp


def verified(exp: CampaignExperiment, root: Path) -> None:
    """csbench verify finds good exactly the record files evaldesk read."""
    code, good, bad = csbench_verify(root)
    assert code == 0 and bad == []
    assert set(good) == records_read(exp)


async def test_passing(csbench_runs: Runs) -> None:
    root = csbench_runs("passing")
    [exp] = await campaigns(root)
    same_as_csbench(exp, root)
    verified(exp, root)
    assert (exp.counts.valid, exp.counts.expected) == (1, 1)
    report = audit_experiment(exp)
    assert report.valid_fraction == 1.0 and report.verdict == "finalize"
    assert report.check("tasks").evidence == "1 of 1 measured run(s) completed"


async def test_a_repeated_task_counts_its_runs_not_its_slot(csbench_runs: Runs) -> None:
    root = csbench_runs("repeated")
    [exp] = await campaigns(root)
    camp = same_as_csbench(exp, root)
    verified(exp, root)
    assert camp["tasks"][0]["status_counts"] == {"completed": 3}
    # three runs the plan asked for plus one: never 4 of 2 (the task slots)
    assert (exp.counts.valid, exp.counts.expected, exp.counts.total) == (4, 4, 4)
    assert exp.facts.expected_runs == [3, 1]
    gsm8k = sorted(t.attempt for t in exp.trials if t.task_name == "suite:gsm8k")
    assert gsm8k == [1, 2, 3] and exp.counts.max_attempts_per_task == 3
    report = audit_experiment(exp)
    assert report.valid_fraction == 1.0 and report.trials["expected"] == 4
    assert report.check("tasks").status.value == "pass" and "4 of 4 measured run(s)" in report.check("tasks").evidence
    # the plan's aggregate, csbench's own statistics, names the same three runs
    [agg] = [json.loads(p.read_text()) for p in (root / "aggregates").rglob("suite:gsm8k-*.json")]
    assert sorted(agg["runs"]["measured"]) == sorted(t.trial_name for t in exp.trials if t.task_name == "suite:gsm8k")


async def test_warmups_are_not_measurements(csbench_runs: Runs) -> None:
    root = csbench_runs("warmup")
    [exp] = await campaigns(root)
    camp = same_as_csbench(exp, root)
    verified(exp, root)  # the warm-ups' records are read (and good), just not counted
    assert camp["tasks"][0]["status_counts"] == {"completed": 1}
    assert (exp.counts.valid, exp.counts.expected, exp.counts.total) == (1, 1, 1)
    [measured] = exp.trials
    [agg] = [json.loads(p.read_text()) for p in (root / "aggregates").rglob("*.json")]
    assert agg["runs"]["measured"] == [measured.trial_name]
    assert sorted(w.key for w in exp.facts.warmups) == sorted(agg["runs"]["warmup"])
    report = audit_experiment(exp)
    assert report.valid_fraction == 1.0
    assert "2 warm-up run(s) left out" in report.check("tasks").evidence
    assert any("warm-up" in n for n in report.notes)


async def test_failing(csbench_runs: Runs) -> None:
    root = csbench_runs("failing")
    [exp] = await campaigns(root)
    camp = same_as_csbench(exp, root)
    verified(exp, root)
    # a failed run is counted by csbench but scores nothing; an unknown suite fails the task
    assert [t["status_counts"] for t in camp["tasks"]] == [{"completed": 1}, {"failed": 1}, {}]
    assert camp["tasks"][2]["status"] == "failed" and "not a registered benchmark suite" in camp["tasks"][2]["error"]
    assert (exp.counts.valid, exp.counts.errored, exp.counts.expected) == (1, 2, 3)
    assert (exp.state, exp.state_raw) == (State.failed, "failed")


async def test_killed_mid_task(csbench_runs: Runs) -> None:
    root = csbench_runs("killed")
    [exp] = await campaigns(root)
    camp = same_as_csbench(exp, root)
    verified(exp, root)
    # csbench's campaign file still says running: the process died before it could say more
    assert [t["status"] for t in camp["tasks"]] == ["running", "pending"]
    assert camp["tasks"][0]["plan_id"] is None
    assert (exp.state, exp.state_raw) == (State.failed, "killed")
    n = len(_records(root))
    # the finished runs belong to their task, not to a second experiment
    valid = [t for t in exp.trials if t.status == TrialStatus.valid]
    assert len(valid) == n >= 2 and {t.task_name for t in valid} == {"suite:gsm8k"}
    assert exp.counts.valid == n and exp.counts.expected == KILLED_REPEAT + 1
    [dead] = [t for t in exp.trials if t.status == TrialStatus.errored]
    assert dead.failure_class == "killed" and isinstance(dead, RunTrial) and dead.run.progress is not None
    state = json.loads((root / ".progress" / dead.trial_name / "state.json").read_text())
    assert state["status"] == "running" and f"pid {state['pid']}" in (exp.facts.stale or "")
    check = audit_experiment(exp).check("campaign_state")
    assert check.status.value == "fail" and check.evidence.startswith("killed: suite:gsm8k")
    assert f"{n} of {KILLED_REPEAT} measured run(s) of suite:gsm8k had finished" in check.evidence


async def test_reaped_by_a_later_run(csbench_runs: Runs) -> None:
    root = csbench_runs("reaped")
    killed_id = json.loads(next((csbench_runs("killed") / "campaigns").glob("*.json")).read_text())["campaign_id"]
    exps = {e.id: e for e in await campaigns(root)}
    killed = exps.pop(killed_id)
    [later] = exps.values()
    same_as_csbench(killed, root)
    same_as_csbench(later, root)
    code, good, bad = csbench_verify(root)
    assert code == 0 and not bad and set(good) == records_read(killed) | records_read(later)
    # csbench's next run swept the dead run's progress dir: nothing of it is in flight
    assert not any(t.failure_class == "killed" for t in killed.trials)
    assert not any((root / ".progress" / t.trial_name).exists() for t in killed.trials)
    assert csbench_json(root, killed_id)["tasks"][0]["status"] == "running"
    # still known for what it is: killed, with the later campaign as the evidence — never running
    assert (killed.state, killed.state_raw) == (State.failed, "killed")
    assert later.id in (killed.facts.stale or "") and ".progress/ dir is gone" in (killed.facts.stale or "")
    assert killed.counts.valid == len(_records(csbench_runs("killed")))
    # the later campaign's run of the same task is its own
    assert (later.state, later.counts.valid, later.counts.expected) == (State.finished, 1, 1)
    assert not {t.trial_name for t in later.trials} & {t.trial_name for t in killed.trials}
    assert audit_experiment(killed).verdict != "wait"


async def test_a_repeated_task_while_it_runs(tmp_path: Path) -> None:
    """Before csbench writes the task's plan id (at its end), its finished runs are already the
    task's; then the real process is killed and the same campaign reads killed."""
    (tmp_path / "plan.yaml").write_text(KILLED_PLAN)
    root = tmp_path / "results"
    proc = subprocess.Popen([csbench_exe(), "run-plan", "plan.yaml", "--results", "results"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (len(_records(root)) >= 2 and _in_flight(root)):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGSTOP)  # hold it still while it is read
        [exp] = await campaigns(root)
        assert (exp.state, exp.state_raw) == (State.running, "running")
        assert exp.counts.valid == len(_records(root)) and exp.counts.expected == KILLED_REPEAT + 1
        assert exp.counts.running == 1 and audit_experiment(exp).verdict == "wait"
        assert {t.task_name for t in exp.trials} == {"suite:gsm8k"}
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    [exp] = await campaigns(root)
    assert (exp.state, exp.state_raw) == (State.failed, "killed")


async def test_a_lost_campaign_file_is_said(csbench_runs: Runs, tmp_path: Path) -> None:
    root = tmp_path / "r"
    shutil.copytree(csbench_runs("repeated"), root)
    shutil.rmtree(root / "campaigns")
    said = subprocess.run([csbench_exe(), "progress", "--results", str(root)], capture_output=True, text=True)
    assert said.returncode == 2 and "no campaigns found" in said.stderr
    [exp] = await campaigns(root)
    assert exp.id == "r" and exp.facts.origin == "run-plan"
    assert any("no campaigns found under" in p for p in exp.problems)
    # the records still say how many runs each plan asked for (csbench's aggregates)
    assert (exp.counts.valid, exp.counts.expected) == (4, 4)
    check = audit_experiment(exp).check("campaign_state")
    assert check.status.value == "warn" and "no campaign file" in check.evidence
    # nothing at all: csbench's words, as an error of the source
    shutil.rmtree(root / "agent-runtime")
    snap = await ResultsSource(str(root), label="t").scan()
    assert snap.experiments == [] and "no campaigns found" in snap.errors[0].message
