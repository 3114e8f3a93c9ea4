"""`evaldesk --batch fix CHECK_ID [--apply] SOURCE…` for every backend's checks: AISBench
`params` (it asks for its values) and `results_file`, csbench `teardown`, Rock's retry; an id
no experiment has is a usage error naming the checks there are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.core.registry import write_demo
from services.core.times import DEMO_NOW
from tests.tui.test_batch_cli import run_main


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    write_demo(root, DEMO_NOW)
    return root


def fix(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    code, out, err = run_main(capsys, "--batch", "fix", *argv, "--format", "json")
    plans = {p["id"]: p for p in json.loads(out)["plans"]} if out.strip() else {}
    return code, plans, err


def test_aisbench_params_asks_for_its_values(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, plans, _ = fix(capsys, "params", str(demo))
    assert code == 1
    asked = plans["gsm8k-qwen3-32b"]
    assert asked["status"] == "fail" and not asked["applied"]
    assert "needs --max-out-len and --batch-size" in asked["message"]


def test_aisbench_params_with_its_values_plans_the_launch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_demo(tmp_path, DEMO_NOW)
    code, plans, _ = fix(capsys, "params", "--max-out-len", "24576", "--batch-size", "64", "--apply", str(tmp_path))
    launched = plans["gsm8k-qwen3-32b"]
    # the values are kept; the launch is planned, and refused here only by its preflight (no ais_bench)
    assert launched["action"] == "aisbench_launch" and launched["steps"]
    assert launched["blocked"] and "preflight" in launched["blocked"] and not launched["applied"]
    assert code == 1


def test_aisbench_results_file_plans_the_resume(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, plans, _ = fix(capsys, "results_file", str(demo))
    down = plans["gsm8k-server-down"]
    assert down["action"] == "aisbench_resume" and len(down["steps"]) >= 1


def test_csbench_teardown_is_planned_before_its_config(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, plans, _ = fix(capsys, "teardown", str(demo))
    camp = plans["camp-5e1f0c2a"]
    assert camp["action"] == "csbench_teardown" and len(camp["steps"]) == 1
    assert "[csbench] section" in camp["blocked"]


def test_rock_retry_through_its_failing_check(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, plans, _ = fix(capsys, "valid_count", str(demo))
    assert plans["exp-7f3a9c21"]["action"] == "retry" and plans["exp-7f3a9c21"]["steps"]


def test_a_check_no_experiment_has(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, plans, err = fix(capsys, "no_such_check", str(demo))
    assert code == 2 and not plans
    assert "'no_such_check' is not a check of these experiments" in err and "results_file" in err
    code, _, err = fix(capsys, "../etc", str(demo))
    assert code == 2 and "fix needs a CHECK_ID" in err
