"""Rock's regression.py work dirs as experiments: formats, states, id resolution, evidence,
the task-log mapping, and the monitor's rules on Rock's own `dispatched` state."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import Config, RockConfig
from services.core.models import State, TrialStatus
from services.core.policy import Policy
from services.core.registry import open_sources
from services.core.source import SourceUnavailable
from services.monitor.state import MonitorState
from services.rock.demo import EXPERIMENT_ID
from services.rock.demo import write_demo as write_rock_demo
from services.rock.formats import NoSuchExperiment, RegressionResults, resolve_experiment, run_config, run_state
from services.rock.source import RockFS, RockResultsSource
from tests.support.rock_factory import T0, RegressionRun

TRACEBACK = "step 1\nTraceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: docker died\n"


def _run(tmp_path: Path) -> RegressionRun:
    run = RegressionRun(tmp_path / "work")
    run.task("a", "completed", 1.0).task("b", "completed", 0.0)
    run.task("c", "error", exception="RuntimeError", message="docker died", log=TRACEBACK)
    run.task("d", "error", exception="RewardFileNotFoundError", message="no reward.txt")
    run.task("e", "dispatched").task("f", "running", log="agent step 4\n").task("g", "pending")
    return run


async def test_a_work_dir_is_found_and_read_into_one_experiment_per_results_file(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.write()
    RegressionRun(tmp_path / "work", exp_id="exp-0002").task("a", "completed", 1.0).write()
    (src,) = open_sources(str(tmp_path / "work"), Config())
    assert src.kind == "rock"
    snap = await src.scan()
    assert [e.id for e in snap.experiments] == ["exp-0001", "exp-0002"] and snap.errors == []
    exp = snap.experiments[0]
    assert (exp.source, exp.benchmark, exp.model) == ("rock", "terminal-bench-core", "anthropic/claude-sonnet-4-5")
    # pending tasks are not attempts yet: they count toward expected only
    assert [t.task_name for t in exp.trials] == ["a", "b", "c", "d", "e", "f"]
    c = exp.counts
    assert (c.total, c.valid, c.errored, c.running, c.expected, c.n_rep) == (4, 2, 2, 2, 7, 1)
    assert exp.score == 0.5
    # Rock's dispatched is a state of its own, kept beside evaldesk's
    by = {t.task_name: t for t in exp.trials}
    assert (by["e"].status, by["e"].state_raw) == (TrialStatus.running, "dispatched")
    assert (by["c"].status, by["c"].exception_type, by["c"].failure_class) == (
        TrialStatus.errored, "RuntimeError", "unclassified")
    assert exp.state == State.running and "running" in exp.state_raw
    # the config snapshot feeds alignment: --set and --ee entries by their last segment
    assert exp.run_config["temperature"] == 0.7 and exp.run_config["agent_timeout_s"] == 600
    assert exp.inference_timeout_s == 600
    await src.close()


def test_states_from_rocks_words() -> None:
    assert run_state(None, ["completed", "error"]) == State.finished
    assert run_state(None, ["completed", "dispatched"]) == State.dispatched
    assert run_state(None, ["dispatched", "running"]) == State.running
    assert run_state(None, ["pending", "pending"]) == State.pending
    assert run_state(None, ["completed", "pending"]) == State.running
    assert run_state(None, []) == State.pending
    # the rl-rock CLI's run statuses
    assert [run_state(s, []) for s in ("running", "completed", "failed", "partial")] == [
        State.running, State.finished, State.failed, State.finished]


def test_lenient_results_tasks_as_an_object_and_aliases() -> None:
    res = RegressionResults.model_validate({
        "id": "exp-9", "benchmark": "b", "unknown": {"x": 1},
        "tasks": {"t1": {"status": "COMPLETED", "score": "1"}, "t2": "pending", "t3": {"status": "error",
                  "error": "boom", "reward": float("nan")}},
    })
    assert res.experiment_id == "exp-9" and res.bench == "b"
    assert [(t.task_id, t.status, t.reward) for t in res.tasks] == [("t1", "completed", 1.0), ("t2", "pending", None),
                                                                   ("t3", "error", None)]
    assert res.tasks[2].exception_message == "boom"


def test_run_config_reads_top_level_set_and_ee_entries() -> None:
    cfg = run_config({"model": "m", "image": "img:1", "set": ["agent.kwargs.top_p=0.95", "x.thinking=true"],
                      "ee": {"MAX_TOKENS": "16384"}, "nested": {"temperature": 9}})
    assert cfg == {"model": "m", "image": "img:1", "top_p": 0.95, "thinking": True, "max_tokens": 16384}


def test_experiment_id_resolution_newest_exact_prefix_path(tmp_path: Path) -> None:
    work = tmp_path / "work"
    for i, name in enumerate(["exp-abc1", "exp-abc12", "exp-b77"]):
        RegressionRun(work, exp_id=name).task("a", "completed", 1.0).write(mtime=1_700_000_000 + i)
    assert resolve_experiment(work, None).stem == "exp-b77"  # omitted: the newest
    assert resolve_experiment(work, "exp-abc1").stem == "exp-abc1"  # exact beats prefix
    assert resolve_experiment(work, "exp-b").stem == "exp-b77"  # then the one prefix match
    with pytest.raises(NoSuchExperiment, match="matches 2 experiments"):
        resolve_experiment(work, "exp-ab")
    with pytest.raises(NoSuchExperiment, match="no experiment 'zzz'"):
        resolve_experiment(work, "zzz")
    path = work / "results" / "exp-abc12.json"
    assert resolve_experiment(work, str(path)) == path
    assert resolve_experiment(work, "results/exp-abc12.json") == path


async def test_a_config_entry_names_one_experiment_and_a_results_file_opens_alone(tmp_path: Path) -> None:
    work = tmp_path / "work"
    for i, name in enumerate(["exp-abc1", "exp-b77"]):
        RegressionRun(work, exp_id=name).task("a", "completed", 1.0).write(mtime=1_700_000_000 + i)
    config = Config(rock=[RockConfig(name="regress", workdir=str(work), experiment="exp-a")])
    from services.core.registry import open_all

    sources, errors = open_all([], config)
    assert errors == [] and [s.label for s in sources] == ["regress"]
    snap = await sources[0].scan()
    assert [e.id for e in snap.experiments] == ["exp-abc1"]
    (src,) = open_sources(str(work / "results" / "exp-b77.json"), config)
    assert [e.id for e in (await src.scan()).experiments] == ["exp-b77"]
    bad = RockResultsSource(work, experiment="nope")
    with pytest.raises(SourceUnavailable, match="no experiment 'nope'"):
        await bad.scan()


async def test_bad_results_files_are_errors_that_name_the_file_not_tracebacks(tmp_path: Path) -> None:
    work = tmp_path / "work"
    RegressionRun(work).task("a", "completed", 1.0).write()
    (work / "results" / "broken.json").write_text("{not json")
    (work / "results" / "list.json").write_text("[]")
    (work / "results" / "bad.json").write_text(json.dumps({"tasks": [{"status": "completed"}]}))
    snap = await RockResultsSource(work).scan()
    assert [e.id for e in snap.experiments] == ["exp-0001"]
    msgs = sorted((Path(e.where).name, e.message) for e in snap.errors)
    assert msgs[0][0] == "bad.json" and "task_id" in msgs[0][1]
    assert msgs[1][0] == "broken.json" and "not valid JSON" in msgs[1][1]
    assert msgs[2] == ("list.json", "holds a JSON list, not an object")


async def test_evidence_is_the_task_logs_traceback_and_tail(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.write()
    src = RockResultsSource(run.workdir)
    exp = (await src.scan()).experiments[0]
    by = {t.task_name: t for t in exp.trials}
    ev = await src.evidence(exp, by["c"])
    assert ev.traceback is not None and ev.traceback.startswith("Traceback") and "docker died" in ev.traceback
    assert ev.verifier_label == "task log (last lines)" and "step 1" in (ev.verifier_excerpt or "")
    missing = await src.evidence(exp, by["d"])
    assert missing.problems == ["no task log at logs/exp-0001/d.log"]
    # the trials screen and the activity probe read <trial path>/trial.log: RockFS serves the task log
    fs = src.fs()
    assert isinstance(fs, RockFS)
    data = await fs.read_bytes(os.path.join(exp.path, by["f"].path, "trial.log"))
    assert data == b"agent step 4\n"


async def test_the_demo_work_dir_audits_to_a_retry(tmp_path: Path) -> None:
    write_rock_demo(tmp_path / "rock")
    (src,) = open_sources(str(tmp_path / "rock"), Config())
    exp = (await src.scan()).experiments[0]
    assert exp.id == EXPERIMENT_ID and exp.state == State.finished
    assert (exp.counts.valid, exp.counts.expected, exp.counts.invalid_errors) == (30, 40, 8)
    report = audit_experiment(exp, Policy())
    gate = report.check("error_gate")
    assert gate.status == "fail" and gate.remediation == "retry"
    assert report.check("valid_count").remediation == "retry"
    assert report.check("duplicates").remediation is None
    assert "mean reward of the 30 valid tasks" in report.check("score").evidence


async def test_monitor_rule_a_counts_rocks_dispatched_tasks(tmp_path: Path) -> None:
    """Rock says `dispatched` itself: no idle threshold is needed for rule (a) to see them."""
    run = RegressionRun(tmp_path / "work")
    for i in range(3):
        run.task(f"t{i}", "completed", 1.0)
    for i in range(3, 6):
        run.task(f"t{i}", "dispatched", started=T0)
    run.write()
    src = RockResultsSource(run.workdir)
    clock = [T0 + timedelta(seconds=10)]
    mon = MonitorState(Policy(), clock=lambda: clock[0])
    fired = []
    for _ in range(3):
        clock[0] += timedelta(seconds=180)  # the runbook's 3-minute poll
        fired += mon.feed(await src.scan())
    assert [w.rule for w in fired] == ["a"]
    assert "dispatched 3 → 3 → 3 over 3 polls" in fired[0].evidence
    reading = mon.reading(f"{src.label}::exp-0001")
    assert reading is not None and reading.counts["dispatched"] == 3


async def test_monitor_rule_d_uses_the_configured_agent_timeout(tmp_path: Path) -> None:
    run = RegressionRun(tmp_path / "work")  # AGENT_TIMEOUT=600 in its saved config
    run.task("slow", "running", started=T0, log="still going\n")
    run.task("ok", "completed", 1.0)
    run.write()
    log = run.workdir / "logs" / run.exp_id / "slow.log"
    src = RockResultsSource(run.workdir)
    now = T0 + timedelta(seconds=1000)  # past 1.5 × 600 s
    os.utime(log, (now.timestamp() - 5, now.timestamp() - 5))
    from services.monitor.activity import probe_snapshot

    snap = await src.scan()
    activity = await probe_snapshot(snap, src.fs())
    assert list(activity[f"{src.label}::exp-0001"]) == ["logs/exp-0001/slow"]
    mon = MonitorState(Policy(), clock=lambda: now)
    fired = mon.feed(snap, activity)
    assert [w.rule for w in fired] == ["d"]
    assert "1.5 × the 10 min timeout is 15 min" in fired[0].evidence


def test_rock_config_entries_and_their_errors(tmp_path: Path) -> None:
    from services.core.config import ConfigError, load_config

    cfg = tmp_path / "config.toml"
    cfg.write_text('[[rock]]\nname = "tb"\nworkdir = "~/w"\nregression = "/r.py"\n'
                   'retry_options = { concurrency = 4, pre = false }\n')
    (entry,) = load_config(cfg, environ={}).rock
    assert (entry.name, entry.workdir, entry.command, entry.retry_options) == (
        "tb", "~/w", ["rock"], {"concurrency": 4, "pre": False})
    cfg.write_text('[[rock]]\nname = "tb"\nworkdri = "~/w"\n')
    with pytest.raises(ConfigError, match=r"unknown key 'rock\.0\.workdri'"):
        load_config(cfg, environ={})
