"""The csbench results source on results dirs the real `csbench run-plan` wrote: campaigns as
experiments, task runs as trials, csbench's words kept, artifacts hashed on load, running and
stale campaigns, fetched dirs, and recognition beside Harbor job dirs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.models import State, TrialStatus
from services.core.registry import open_sources
from services.csbench.model import CampaignExperiment, RunTrial
from services.csbench.source import ResultsSource
from tests.support.csbench_fixtures import copy_results, results
from tests.support.harbor_factory import healthy_job


def only(snap_exps: list, kind: type = CampaignExperiment) -> CampaignExperiment:
    [exp] = snap_exps
    assert isinstance(exp, kind)
    return exp


async def scan(path: Path) -> list[CampaignExperiment]:
    snap = await ResultsSource(str(path), label="t").scan()
    assert not snap.errors, snap.errors
    return [e for e in snap.experiments if isinstance(e, CampaignExperiment)]


async def test_a_passing_run_plan_is_one_finished_campaign(tmp_path_factory: pytest.TempPathFactory) -> None:
    exp = only(await scan(results(tmp_path_factory, "passing")))
    cid = json.loads(next((results(tmp_path_factory, "passing") / "campaigns").glob("*.json")).read_text())
    assert exp.id == cid["campaign_id"] and exp.id.startswith("campaign-")
    assert (exp.state, exp.state_raw) == (State.finished, "completed")
    assert exp.benchmark == "swe-bench" and exp.model == "mock-agent@slice1"
    assert exp.eval_key == "swe-bench.resolved" and exp.score == pytest.approx(2 / 3)
    assert (exp.counts.expected, exp.counts.valid, exp.counts.errored) == (1, 1, 0)
    [t] = exp.trials
    assert isinstance(t, RunTrial)
    assert t.status == TrialStatus.valid and t.failure_class == "completed"
    assert t.task_name == "suite:swe-bench" and t.trial_name.startswith("run-")
    assert t.reward == pytest.approx(2 / 3) and t.source == "swe-bench"
    run = t.run
    assert run.record is not None and run.record.provenance.scaffold == "mock-agent@slice1"
    assert run.record.provenance.dataset_digest.startswith("sha256:")
    assert sorted(a.name for a in run.artifacts) == ["predictions", "results", "trajectory", "usage"]
    assert {a.status for a in run.artifacts} == {"ok"}
    assert run.instance_ids == sorted(["django__django-11099", "sympy__sympy-20590", "pytest-dev__pytest-7205"])
    assert run.progress is not None and run.progress_rel == f".progress/{t.trial_name}"


async def test_a_failing_plan_keeps_csbenchs_words(tmp_path_factory: pytest.TempPathFactory) -> None:
    exp = only(await scan(results(tmp_path_factory, "failing")))
    assert (exp.state, exp.state_raw) == (State.failed, "failed")
    assert exp.counts.expected == 3
    by_task = {t.task_name: t for t in exp.trials}
    assert set(by_task) == {"suite:swe-bench", "suite:swe-bench-lite", "suite:no-such-suite"}
    ok, lite, unknown = by_task["suite:swe-bench"], by_task["suite:swe-bench-lite"], by_task["suite:no-such-suite"]
    assert ok.status == TrialStatus.valid
    # failed inside csbench: a record with status failed and an EXECUTE error
    assert lite.status == TrialStatus.errored and lite.failure_class == "failed"
    assert lite.exception_type == "NotADirectoryError"
    assert lite.exception_message is not None and lite.exception_message.startswith("EXECUTE execute_failed")
    # failed before csbench wrote a record: the campaign file's error
    assert unknown.status == TrialStatus.errored and unknown.failure_class == "failed"
    assert isinstance(unknown, RunTrial) and unknown.run.record is None
    assert "not a registered benchmark suite" in (unknown.exception_message or "")
    assert (exp.counts.valid, exp.counts.errored) == (1, 2)


async def test_evidence_shows_measurements_provenance_stages_and_errors(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    src = ResultsSource(str(results(tmp_path_factory, "failing")), label="t")
    exp = only((await src.scan()).experiments)
    by_task = {t.task_name: t for t in exp.trials}
    ev = await src.evidence(exp, by_task["suite:swe-bench"])
    text = ev.verifier_excerpt or ""
    assert "swe-bench.resolved" in text and "official" in text and "deterministic" in text
    assert "scaffold mock-agent@slice1" in text and "dataset_digest sha256:" in text
    assert "EXECUTE ok" in text and "environment local · simulated" in text
    assert "results.json  ok" in text
    bad = await src.evidence(exp, by_task["suite:swe-bench-lite"])
    assert bad.exception_type == "NotADirectoryError"
    assert bad.traceback is not None and "EXECUTE execute_failed NotADirectoryError (retryable)" in bad.traceback
    assert "EXECUTE failed" in (bad.verifier_excerpt or "")
    none = await src.evidence(exp, by_task["suite:no-such-suite"])
    assert "not a registered benchmark suite" in (none.traceback or "")


async def test_trial_files_open_through_the_run_view(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = results(tmp_path_factory, "passing")
    src = ResultsSource(str(root), label="t")
    exp = only((await src.scan()).experiments)
    [t] = exp.trials
    fs = src.fs()
    folder = f"{exp.path}/{t.path}"
    assert sorted(await fs.list_dir(folder)) == ["record.json", "results.json", "stream.jsonl", "trajectory.jsonl"]
    record = json.loads(await fs.read_bytes(f"{folder}/record.json"))
    assert record["run"]["run_id"] == t.trial_name
    stream = (await fs.read_bytes(f"{folder}/stream.jsonl")).decode()
    assert '"kind": "done"' in stream
    st = await fs.stat(f"{folder}/results.json")
    assert st is not None and not st.is_dir
    assert await fs.stat(f"{folder}/nothing.txt") is None
    with pytest.raises(OSError):
        await fs.write_bytes_atomic(f"{folder}/record.json", b"{}")


async def test_a_changed_artifact_is_a_finding(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    root = copy_results(tmp_path_factory, "passing", tmp_path / "r")
    results_file = next((root / "artifacts").glob("*/results.json"))
    results_file.write_text('{"per_instance": {}, "resolved": 3, "total": 3}')
    exp = only(await scan(root))
    run = exp.trials[0].run  # type: ignore[attr-defined]
    bad = [a for a in run.artifacts if a.status == "mismatch"]
    assert [a.name for a in bad] == ["results"]
    report = audit_experiment(exp)
    check = report.check("artifacts")
    assert check.status.value == "fail" and "results.json" in check.evidence
    src = ResultsSource(str(root), label="t")
    exp2 = only((await src.scan()).experiments)
    ev = await src.evidence(exp2, exp2.trials[0])
    assert any("sha256 mismatch" in p for p in ev.problems)
    # a removed artifact is missing, not a crash
    results_file.unlink()
    exp3 = only(await scan(root))
    assert audit_experiment(exp3).check("artifacts").status.value == "warn"


def _campaign_file(root: Path) -> Path:
    return next((root / "campaigns").glob("*.json"))


async def test_running_then_stale(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """A task slot csbench marked running, whose progress file names a live pid, is running;
    when that process is gone and nothing moved for a while, the campaign is stale."""
    root = copy_results(tmp_path_factory, "passing", tmp_path / "r")
    cf = _campaign_file(root)
    camp = json.loads(cf.read_text())
    slot = camp["tasks"][0]
    slot.update(status="running", plan_id=None, ended_at=None, elapsed_s=None, status_counts={})
    camp["tasks"].append({"task_id": "suite:gsm8k", "status": "pending"})
    cf.write_text(json.dumps(camp))
    # the finished run's record belongs to no campaign now; its progress says running
    for rec in (root / "agent-runtime").rglob("*.json"):
        rec.unlink()
    [state_file] = list((root / ".progress").glob("*/state.json"))
    state = json.loads(state_file.read_text())
    state.update(status="running", pid=os.getpid(), stage="EXECUTE", lifecycle_phase="connect")
    state_file.write_text(json.dumps(state))
    exp = only(await scan(root))
    assert (exp.state, exp.state_raw) == (State.running, "running")
    [t] = exp.trials
    assert t.status == TrialStatus.running and t.trial_name == state["run_id"]
    assert audit_experiment(exp).verdict == "wait"
    # the process is gone and the file has not changed for 10 minutes
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state["pid"] = dead.pid
    state_file.write_text(json.dumps(state))
    old = time.time() - 600
    os.utime(state_file, (old, old))
    exp = only(await scan(root))
    assert (exp.state, exp.state_raw) == (State.failed, "killed")
    assert exp.trials[0].status == TrialStatus.errored and exp.trials[0].failure_class == "killed"
    check = audit_experiment(exp).check("campaign_state")
    assert check.status.value == "fail" and f"pid {dead.pid}" in check.evidence


async def test_a_plan_process_that_died_between_tasks_is_stale(tmp_path_factory: pytest.TempPathFactory,
                                                              tmp_path: Path) -> None:
    root = copy_results(tmp_path_factory, "passing", tmp_path / "r")
    cf = _campaign_file(root)
    camp = json.loads(cf.read_text())
    camp["tasks"].append({"task_id": "suite:gsm8k", "status": "pending"})
    camp["updated_at"] = "2026-01-01T00:00:00+0000"
    cf.write_text(json.dumps(camp))
    exp = only(await scan(root))
    assert exp.state_raw == "stale" and "1 task(s) still pending" in (exp.facts.stale or "")


async def test_unreadable_files_are_problems_not_crashes(tmp_path_factory: pytest.TempPathFactory,
                                                        tmp_path: Path) -> None:
    root = copy_results(tmp_path_factory, "passing", tmp_path / "r")
    (root / "campaigns" / "campaign-broken.json").write_text('{"kind": "campaign_manifest", "tasks": [')
    rec = next((root / "agent-runtime").rglob("*.json"))
    (rec.parent / "suite:x-run-20260101-000000-aaaaaa.json").write_bytes(b"\xff\xfe not json")
    os.mkfifo(root / "campaigns" / "campaign-fifo.json")
    snap = await ResultsSource(str(root), label="t").scan()
    exps = [e for e in snap.experiments if isinstance(e, CampaignExperiment)]
    problems = [p for e in exps for p in e.problems]
    assert any("campaign-broken.json" in p and "not JSON" in p for p in problems)
    assert any("suite:x-run-20260101-000000-aaaaaa.json" in p for p in problems)
    assert any(e.state == State.finished for e in exps)


def _fetched_dir(tmp: Path, factory: pytest.TempPathFactory, name: str = "camp-0a1b2c3d") -> Path:
    """What `csbench fetch --dest` leaves: `<task_id>--<run_id>.json`, no artifacts."""
    dest = tmp / name
    dest.mkdir(parents=True)
    rec = next((results(factory, "passing") / "agent-runtime").rglob("*.json"))
    data = json.loads(rec.read_text())
    shutil.copy(rec, dest / f"{data['identity']['task_id']}--{data['run']['run_id']}.json")
    return dest


async def test_a_fetched_dir_is_a_campaign_named_for_its_id(tmp_path_factory: pytest.TempPathFactory,
                                                            tmp_path: Path) -> None:
    dest = _fetched_dir(tmp_path, tmp_path_factory)
    exp = only(await scan(dest))
    assert exp.id == "camp-0a1b2c3d" and exp.facts.origin == "fetched" and exp.state_raw == "fetched"
    assert exp.facts.campaign_id == "camp-0a1b2c3d"
    report = audit_experiment(exp)
    # no artifacts came with the fetch: nothing to hash, and it says why
    assert report.check("artifacts").status.value == "skip"
    assert "csbench fetch brings records" in report.check("artifacts").evidence


async def test_found_beside_harbor_jobs(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    folder = tmp_path / "evals"
    folder.mkdir()
    job = healthy_job(folder).write()
    copy_results(tmp_path_factory, "passing", folder / "csbench-smoke")
    _fetched_dir(folder, tmp_path_factory)
    sources = open_sources(str(folder), Config())
    assert sorted(s.kind for s in sources) == ["csbench", "harbor"]
    csb = next(s for s in sources if s.kind == "csbench")
    snap = await csb.scan()
    assert sorted(e.id.split("-")[0] for e in snap.experiments) == ["camp", "campaign"]
    harbor = next(s for s in sources if s.kind == "harbor")
    assert [e.id for e in (await harbor.scan()).experiments] == [job.name]
    # a csbench results dir alone is not mistaken for a Harbor job
    [only_csb] = open_sources(str(folder / "csbench-smoke"), Config())
    assert only_csb.kind == "csbench"


async def test_a_missing_dir_is_unavailable(tmp_path: Path) -> None:
    from services.core.source import SourceUnavailable

    with pytest.raises(SourceUnavailable):
        await ResultsSource(str(tmp_path / "gone"), label="t").scan()
    snap = await ResultsSource(str(tmp_path), label="t").scan()
    assert snap.errors and "no csbench results dirs" in snap.errors[0].message
    assert datetime.now(UTC) >= snap.taken_at


async def test_a_task_listed_twice_is_named(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """csbench run-plan tracks a slot by task id: a plan naming one task twice leaves the later
    slot pending forever; the campaign says why."""
    root = copy_results(tmp_path_factory, "passing", tmp_path / "r")
    cf = _campaign_file(root)
    camp = json.loads(cf.read_text())
    camp["tasks"].append({"task_id": "suite:swe-bench", "status": "pending"})
    cf.write_text(json.dumps(camp))
    exp = only(await scan(root))
    assert any("suite:swe-bench is listed 2 times" in p for p in exp.problems)
