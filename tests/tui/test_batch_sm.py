"""`--progress sm`: the runbooks' protocol for every batch command — `__SM_PROGRESS__=<json>`
lines on stderr, exactly one JSON object on stdout with `ok`, exit 0 exactly when ok — while
`--progress json` keeps evaldesk's own `__EVALDESK_PROGRESS__` lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.ais_bench_standin import copy_fixture_root
from tui.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_json(out: str) -> dict[str, object]:
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    data = json.loads(lines[0])
    assert isinstance(data, dict)
    return data


def test_sm_mode_for_list_and_audit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_fixture_root(tmp_path / "tasks")
    code, out, err = run(capsys, "--batch", "audit", str(root), "--progress", "sm")
    data = one_json(out)
    assert code == 1 and data["ok"] is False  # the server-down task needs a resume
    assert {e["id"]: e["verdict"] for e in data["experiments"]}["gsm8k-server-down"] == "resume"  # type: ignore
    progress = [ln for ln in err.splitlines() if ln.startswith("__SM_PROGRESS__=")]
    assert progress and all(set(json.loads(ln.split("=", 1)[1])) == {"done", "total", "message"} for ln in progress)
    assert "__EVALDESK_PROGRESS__" not in err
    code, out, _ = run(capsys, "--batch", "list", str(root), "--progress", "sm", "--format", "table")
    assert code == 1 and one_json(out)["ok"] is False  # json whatever --format says: the protocol's one object


def test_sm_mode_ok_is_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_fixture_root(tmp_path / "tasks")
    for name in ("gsm8k-server-down", "gsm8k-accuracy"):  # leave the healthy ones
        shutil.rmtree(root / name)
    code, out, _ = run(capsys, "--batch", "audit", str(root), "--progress", "sm")
    data = one_json(out)
    assert code == 0 and data["ok"] is True


def test_sm_mode_errors_are_one_json_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--batch", "list", str(tmp_path / "missing"), "--progress", "sm")
    data = one_json(out)
    assert code == 2 and data["ok"] is False and "no such file or directory" in str(data["message"])
    assert "no such file or directory" in err
    code, out, _ = run(capsys, "--batch", "monitor", str(tmp_path), "--progress", "sm")
    assert code == 2 and one_json(out)["ok"] is False


def test_json_progress_keeps_evaldesk_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_fixture_root(tmp_path / "tasks")
    _, _, err = run(capsys, "--batch", "list", str(root), "--progress", "json")
    assert "__EVALDESK_PROGRESS__=" in err and "__SM_PROGRESS__" not in err
