"""The demo's AISBench host: its tasks beside the Harbor jobs, their audits and actions from
`--batch` (on this machine nothing can launch: the preflight says why)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tui.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main(list(argv))
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def test_demo_tasks_their_audits_and_actions(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    demo = tmp_path / "demo"
    assert main(["demo", str(demo)]) == 0
    capsys.readouterr()
    code, data = run(capsys, "--batch", "audit", str(demo), "--format", "json")
    verdicts = {e["id"]: e["verdict"] for e in data["experiments"] if e["source"] == "aisbench"}  # type: ignore
    assert verdicts == {"gsm8k-accuracy": "finalize", "perf-gsm8k": "finalize", "gsm8k-server-down": "resume",
                        "swe-bench-verified-mini": "finalize", "gsm8k-qwen3-32b": "input",
                        "ceval-qwen3-32b": "launch", "mmlu-qwen3-8b": "launch"}
    assert {"harbor", "aisbench"} <= {e["source"] for e in data["experiments"]}  # type: ignore[attr-defined]
    bare = tmp_path / "bare-bin"  # this machine as an eval host without ais_bench
    bare.mkdir()
    for tool in ("sh", "true", "test", "dirname", "curl"):
        if shutil.which(tool):
            (bare / tool).symlink_to(shutil.which(tool))  # type: ignore[arg-type]
    monkeypatch.setenv("PATH", f"{bare}{os.pathsep}{Path(shutil.which('python3') or '/usr/bin/python3').parent}")
    root = str(demo / "aisbench-eval-a")
    code, out = run(capsys, "--batch", "launch", root, "--reuse", "gsm8k-server-down", "--format", "json")
    assert code == 1 and out["action"] == "aisbench_resume" and out["status"] == "blocked"
    assert out["message"] == "preflight failed at 'image/environment present': ais_bench not found on the PATH of " \
                             "this machine"
    assert any("--reuse 20261130_104022" in line for line in out["preview"])  # type: ignore[union-attr]
    code, out = run(capsys, "--batch", "launch", root, "--reuse", "gsm8k-qwen3-32b", "--format", "json")
    assert code == 1 and out["status"] == "needs_input"
    code, out = run(capsys, "--batch", "launch", root, "--reuse", "gsm8k-accuracy", "--format", "json")
    assert code == 0 and out["status"] == "finished" and "nothing to launch or resume" in str(out["message"])
