"""`evaldesk --batch list|audit|trials` on csbench sources: run-plan results dirs, a fetched
campaign beside Harbor jobs (the demo), and campaigns by id (`csbench://CID`) through the
stand-in csbench — the same JSON shapes and exit codes as for Harbor jobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.core.registry import write_demo
from services.core.times import DEMO_NOW
from tests.support.csbench_fixtures import cloud_bucket, results, standin
from tests.tui.test_batch_cli import EXPERIMENT_KEYS, TRIALS_KEYS, no_traceback, run_main

ITEMS = ["harness_report", "hf_mirror", "oracle_resolved", "docker_room", "swebench_importable", "placement_local",
         "container_naming", "harness_stderr"]


def test_list_the_demo_with_its_campaign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_demo(tmp_path / "demo", DEMO_NOW)
    code, out, err = run_main(capsys, "--batch", "list", "--format", "json", str(tmp_path / "demo"))
    no_traceback(err)
    assert code == 1
    rows = json.loads(out)["experiments"]
    camp = next(r for r in rows if r["id"] == "camp-5e1f0c2a")
    assert camp["source"] == str(tmp_path / "demo") and camp["state"] == "finished" and camp["state_raw"] == "fetched"
    assert camp["benchmark"] == "swe-bench" and camp["model"] == "mock-agent@slice1"
    assert camp["verdict"] == "teardown" and (camp["valid"], camp["expected"]) == (1, 1)
    # the six Harbor jobs and the campaign (other backends' demo data sits beside them)
    assert len([r for r in rows if r["source"] == str(tmp_path / "demo")]) == 7


def test_audit_json_of_a_campaign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_demo(tmp_path / "demo", DEMO_NOW)
    code, out, err = run_main(capsys, "--batch", "audit", "--format", "json", str(tmp_path / "demo/camp-5e1f0c2a"))
    no_traceback(err)
    assert code == 1
    [e] = json.loads(out)["experiments"]
    assert set(e) == EXPERIMENT_KEYS and set(e["trials"]) == TRIALS_KEYS
    assert e["source"] == "csbench"
    checks = {c["id"]: c for c in e["checks"]}
    assert list(checks) == ["campaign_state", "tasks", "artifacts", "mock_vs_real", *ITEMS, "teardown"]
    assert checks["mock_vs_real"]["status"] == "fail"
    assert checks["teardown"]["status"] == "warn" and "NAT and EIP" in checks["teardown"]["evidence"]
    assert checks["teardown"]["action"].startswith("csbench teardown camp-5e1f0c2a --config")


def test_trials_of_a_failing_plan(tmp_path_factory: pytest.TempPathFactory,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    root = results(tmp_path_factory, "failing")
    code, out, err = run_main(capsys, "--batch", "trials", "--status", "errored", "--format", "json", str(root))
    no_traceback(err)
    assert code == 0
    trials = json.loads(out)["trials"]
    assert sorted(t["task_name"] for t in trials) == ["suite:no-such-suite", "suite:swe-bench-lite"]
    assert {t["failure_class"] for t in trials} == {"failed"}
    code, out, _ = run_main(capsys, "--batch", "audit", "--format", "table", str(root))
    assert code == 1 and "Every task completed" in out and "1 of 3 measured run(s) completed" in out


def test_a_passing_plan_audits_clean(tmp_path_factory: pytest.TempPathFactory,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "--batch", "audit", "--format", "jsonl", str(results(tmp_path_factory,
                                                                                          "passing")))
    no_traceback(err)
    [e] = [json.loads(line) for line in out.splitlines()]
    assert e["verdict"] == "finalize" and code == 0
    assert {c["id"]: c["status"] for c in e["checks"]}["artifacts"] == "pass"


def test_campaigns_by_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bucket = tmp_path / "bucket"
    exe, yaml = standin(tmp_path, bucket)
    cloud_bucket(bucket, tmp_path, "camp-cccc3333")
    toml = tmp_path / "evaldesk.toml"
    toml.write_text(f'[csbench]\nconfig = "{yaml}"\nexecutable = "{exe}"\nresults_dir = "{tmp_path / "results"}"\n'
                    f'campaigns = ["camp-cccc3333"]\n')
    code, out, err = run_main(capsys, "--config", str(toml), "--batch", "audit", "--format", "json",
                              "csbench://camp-cccc3333")
    no_traceback(err)
    assert code == 1
    [e] = json.loads(out)["experiments"]
    assert (e["id"], e["state"], e["state_raw"]) == ("camp-cccc3333", "finished", "DONE")
    checks = {c["id"]: c["status"] for c in e["checks"]}
    assert checks["fetched"] == "warn" and checks["teardown"] == "warn"
    # no [csbench] section: one line saying what is missing, exit 2
    code, out, err = run_main(capsys, "--batch", "list", "csbench://camp-cccc3333")
    assert code == 2 and "[csbench]" in err and out == ""
    no_traceback(err)


def test_list_counts_runs_the_plans_ask_for(tmp_path_factory: pytest.TempPathFactory,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A repeated task and warm-ups, as `csbench run-plan` wrote them: valid never above expected."""
    for name, figures in (("repeated", (4, 4)), ("warmup", (1, 1)), ("killed", None)):
        _, out, err = run_main(capsys, "--batch", "list", "--format", "json", str(results(tmp_path_factory, name)))
        no_traceback(err)
        [row] = json.loads(out)["experiments"]
        assert row["valid"] <= row["expected"]
        if figures is not None:
            assert (row["valid"], row["expected"]) == figures and row["state"] == "finished"
        else:
            assert row["state"] == "failed" and row["expected"] == 31


def test_batch_submit(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.csbench_fixtures import calls, local_config, standin_on_path, submit_checkout

    log = standin_on_path(tmp_path, monkeypatch)
    checkout, plan, yaml = submit_checkout(tmp_path)
    toml = tmp_path / "evaldesk.toml"
    toml.write_text(f'journal_path = "{tmp_path / "journal.jsonl"}"\n[csbench]\nconfig = "{yaml}"\n'
                    f'results_dir = "{tmp_path / "results"}"\nplans = ["{plan}"]\n')
    # the dry run: the preflight and the exact command, nothing run
    code, out, err = run_main(capsys, "--config", str(toml), "--batch", "submit", "--format", "json")
    no_traceback(err)
    [p] = json.loads(out)["plans"]
    assert code == 0 and p["blocked"] is None and p["applied"] is False and calls(log) == []
    assert p["command"][-2:] == ["--watchdog-timeout", "5400"] and p["cwd"] == str(checkout)
    assert {i["id"]: i["status"] for i in p["preflight"]}["target_mode"] == "pass"
    code, out, err = run_main(capsys, "--config", str(toml), "--batch", "submit", "--apply", "--format", "json")
    no_traceback(err)
    [p] = json.loads(out)["plans"]
    assert code == 0 and p["applied"] and p["campaign"].startswith("camp-") and p["record"]
    assert [c["argv"][1] for c in calls(log)] == ["submit"]
    # the plan and the campaign it became, through the config
    code, out, err = run_main(capsys, "--config", str(toml), "--batch", "list", "--format", "json", "csbench://")
    rows = {r["id"]: r for r in json.loads(out)["experiments"]}
    assert rows[plan.name]["state"] == "dispatched" and rows[p["campaign"]]["state"] == "pending"
    # a second submit of the same plan is refused
    code, out, err = run_main(capsys, "--config", str(toml), "--batch", "submit", "--apply", "--format", "table")
    assert code == 1 and "refused, nothing was submitted" in out and f"submitted as {p['campaign']}" in out
    # suite tasks on a mock config: refused headless, whatever --apply says
    yaml.write_text(local_config(tmp_path / "bucket2", "mock"))
    code, out, err = run_main(capsys, "--config", str(toml), "--batch", "submit", "--apply", "--format", "json")
    [p] = json.loads(out)["plans"]
    assert code == 1 and not p["applied"] and "canned fixtures" in p["blocked"] and "type mock" in p["blocked"]
    assert [c["argv"][1] for c in calls(log)].count("submit") == 1
    code, out, err = run_main(capsys, "--config", str(toml), "--read-only", "--batch", "submit", "--apply")
    assert code == 2 and "read-only" in err.lower()
    code, out, err = run_main(capsys, "--batch", "submit", str(plan))
    assert code == 2 and "[csbench]" in err
