"""The rl-rock stand-in's plumbing: which Python has rl-rock, and the argv that runs it.

rl-rock is heavy (~140 MB, ~55 packages: grpcio, protobuf, OpenTelemetry, Alibaba's OSS SDK)
and is needed only to produce the CLI's real output, so it lives in its own venv
(`ROCK_VENV`, default ~/.cache/evaldesk/venvs/rock; `.ci/run` creates it), never in evaldesk's.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROCK_VENV = Path(os.environ.get("ROCK_VENV") or Path.home() / ".cache" / "evaldesk" / "venvs" / "rock")
STANDIN = Path(__file__).with_name("rock_standin.py")


def rock_python() -> str:
    """The venv's Python; skips (or, with CI=true, fails) when rl-rock is not installed there."""
    py = ROCK_VENV / "bin" / "python"
    ok = py.exists() and subprocess.run([str(py), "-c", "import rock.sdk.job.meta"], capture_output=True,
                                        timeout=60).returncode == 0
    if not ok:
        why = f"rl-rock is not installed in {ROCK_VENV} (python -m venv {ROCK_VENV} && " \
              f"{ROCK_VENV}/bin/pip install rl-rock==1.11.0)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return str(py)


def write_scenario(path: Path, runs: list[dict[str, Any]], jobs: dict[str, dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"runs": runs, "jobs": jobs}))
    return path


def standin_command(scenario: Path) -> list[str]:
    """`[[rock]] command` for the stand-in: rock's own CLI reading `scenario`."""
    return [rock_python(), str(STANDIN), str(scenario)]
