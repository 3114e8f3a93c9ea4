"""`evaldesk --batch report`: one file (or stdout) for any SOURCE, its exit codes, and the
baselines that ride along; `--format html` belongs to report alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from services.core.registry import write_demo
from services.core.times import DEMO_NOW
from services.core.xdg import default_baselines_dir
from tui.cli import main

OPENTHINKER = "terminal_bench_2_laion-OpenThinker-Agent-8B_2026-11-19__12-00-00"
QWEN = "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    write_demo(root, DEMO_NOW)
    return root


def test_json_report_of_two_runs_compares_them_and_exits_1_when_one_needs_action(
        demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--batch", "report", "--format", "json", str(demo / OPENTHINKER), str(demo / QWEN)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1  # Qwen3 is short of valid trials
    assert [r["id"] for r in out["runs"]] == [OPENTHINKER, QWEN]
    assert out["comparison"]["benchmark"] == "terminal_bench_2" and len(out["comparison"]["tasks"]) == 89
    assert out["runs"][0]["alignment"] is None  # no baseline in the config dir


def test_html_to_a_file_prints_its_path_and_a_healthy_run_exits_0(
        demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out" / "report.html"
    rc = main(["--batch", "report", str(demo / OPENTHINKER), "-o", str(target)])
    assert rc == 0
    assert capsys.readouterr().out.strip() == str(target.resolve())
    page = target.read_text()
    assert page.startswith("<!doctype html>") and f'data-experiment="{OPENTHINKER}"' in page


def test_the_config_dirs_baselines_and_baseline_flag_add_alignment_to_report_and_audit(
        demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = "terminal_bench_2-openthinker-agent-8b.json"
    rc = main(["--batch", "audit", "--format", "json", "--baseline", str(demo / "baselines" / name),
               str(demo / OPENTHINKER)])
    checks = {c["id"]: c for c in json.loads(capsys.readouterr().out)["experiments"][0]["checks"]}
    assert rc == 1 and checks["alignment"]["status"] == "fail"
    assert "config drift: timeout_multiplier 2 → 1" in checks["alignment"]["evidence"]
    folder = default_baselines_dir()
    folder.mkdir(parents=True)
    shutil.copy(demo / "baselines" / name, folder / name)
    rc = main(["--batch", "report", "--format", "json", str(demo / OPENTHINKER)])
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert rc == 1 and run["alignment"]["status"] == "fail"
    assert run["alignment"]["alignment"]["gaps"][0]["expected"] == 1.0


def test_usage_errors_exit_2(demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--batch", "report", "--format", "table", str(demo / OPENTHINKER)]) == 2
    assert "report writes html or json, not table" in capsys.readouterr().err
    assert main(["--batch", "list", "--format", "html", str(demo)]) == 2
    assert "--format html is for report" in capsys.readouterr().err
    assert main(["--batch", "report", str(tmp_path / "missing")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["--batch", "report", "--baseline", str(bad), str(demo / OPENTHINKER)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["--batch", "report", str(demo / OPENTHINKER), "-o", str(bad / "x.html")]) == 2
    assert "cannot write" in capsys.readouterr().err
