"""Rock runs through the rl-rock CLI (`rock job run-list` / `run-status --jobs`).

The CLI is rock's own code in a venv with rl-rock installed, run as a real subprocess; only
its artifact store (Alibaba OSS) is replaced by a scenario file, and every record in it goes
through rl-rock's own models (tests/support/rock_standin.py). So the JSON evaldesk parses
here is what rl-rock itself prints: a change of its format breaks this test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import Config, RockConfig
from services.core.models import State, TrialStatus
from services.core.policy import Policy
from services.core.registry import open_all, open_sources
from services.core.source import SourceUnavailable
from services.remediations import registry
from services.remediations.errors import WriteRefused
from services.rock.source import RockCLISource
from tests.support.rock_cli import standin_command, write_scenario

RUN_DONE = {
    "run_id": "run-20261120-a", "mode": "full", "status": "partial", "dataset": "terminal-bench-core",
    "split": "test", "total_tasks": 4, "pending_tasks": 0,
    "created_at": "2026-11-20T10:00:00Z", "finished_at": "2026-11-20T11:00:00Z",
    "task_job_map": {"t1": "job-t1", "t2": "job-t2", "t3": "job-t3", "t4": "job-t4"},
    "summary": {"completed": 3, "failed": 1, "skipped": 0, "avg_score": 0.6667, "total_score": 2.0,
                "pass_rate": 0.6667, "scores": {"t1": 1.0, "t2": 1.0, "t3": 0.0}},
}
RUN_LIVE = {
    "run_id": "run-20261121-b", "mode": "full", "status": "running", "dataset": "terminal-bench-core",
    "split": "test", "total_tasks": 3, "pending_tasks": 1,
    "task_job_map": {"t1": "job-b1", "t2": "job-b2", "t3": "job-b3"},
}
JOBS = {
    "job-t1": {"job_name": "job-t1", "status": "completed", "score": 1.0, "started_at": "2026-11-20T10:01:00Z",
               "finished_at": "2026-11-20T10:20:00Z"},
    "job-t2": {"job_name": "job-t2", "status": "completed", "score": 1.0},
    "job-t3": {"job_name": "job-t3", "status": "completed", "score": 0.0},
    "job-t4": {"job_name": "job-t4", "status": "failed", "error": "RuntimeError: sandbox <b>lost</b>"},
    "job-b1": {"job_name": "job-b1", "status": "running", "started_at": "2026-11-21T09:00:00Z"},
    "job-b2": {"job_name": "job-b2", "status": "pending"},
    # job-b3 has no meta yet: rock says "unknown"
}


def _config(tmp_path: Path, runs: list[dict[str, object]] | None = None) -> Config:
    scenario = write_scenario(tmp_path / "scenario.json", runs if runs is not None else [RUN_DONE, RUN_LIVE], JOBS)
    entry = RockConfig(name="platform", command=standin_command(scenario), namespace="evals",
                       experiment_id="tb-core")
    return Config(rock=[entry])


async def test_runs_and_jobs_as_rock_prints_them(tmp_path: Path) -> None:
    config = _config(tmp_path)
    (src,) = open_sources("rock://platform", config)
    assert isinstance(src, RockCLISource)
    snap = await src.scan()
    assert snap.errors == []
    done, live = snap.experiments
    assert (done.id, done.state, done.state_raw, done.benchmark) == (
        "run-20261120-a", State.finished, "partial", "terminal-bench-core")
    assert done.score == pytest.approx(0.6667)  # Rock's own summary
    c = done.counts
    assert (c.total, c.valid, c.errored, c.expected) == (4, 3, 1, 4)
    failed = next(t for t in done.trials if t.task_name == "t4")
    assert (failed.status, failed.state_raw, failed.exception_message) == (
        TrialStatus.errored, "failed", "RuntimeError: sandbox <b>lost</b>")
    assert done.run_config == {"split": "test"}
    # a running run: the pending job and the one rock knows nothing of yet are not attempts
    assert (live.state, [t.task_name for t in live.trials], live.counts.expected) == (State.running, ["t1"], 3)
    assert live.trials[0].status == TrialStatus.running
    # the audit of a finished run: its error gate fails (1 of 4), and the CLI has no retry to offer
    report = audit_experiment(done, Policy())
    assert report.check("error_gate").status == "fail" and report.check("error_gate").remediation is None
    with pytest.raises(WriteRefused, match="not one"):
        await registry.plan("retry", done, src, config)


async def test_config_entries_open_the_cli_and_a_failing_cli_says_why(tmp_path: Path) -> None:
    config = _config(tmp_path, runs=[])
    sources, errors = open_all([], config)
    assert errors == [] and [type(s).__name__ for s in sources] == ["RockCLISource"]
    assert (await sources[0].scan()).experiments == []
    broken = RockCLISource(RockConfig(name="x", command=[*config.rock[0].command[:2], str(tmp_path / "missing.json")],
                                      namespace="n"))
    with pytest.raises(SourceUnavailable, match=r"rock job run-list: .*No such file"):
        await broken.scan()
    absent = RockCLISource(RockConfig(name="y", command=["no-such-rock-cli"], namespace="n"))
    with pytest.raises(SourceUnavailable, match=r"command not found.*install rl-rock"):
        await absent.scan()
    with pytest.raises(SourceUnavailable, match="no \\[\\[rock\\]\\] entry named 'nope'"):
        open_sources("rock://nope", config)
    with pytest.raises(ValueError, match="rock://NAME"):
        open_sources("rock://a/b", config)
