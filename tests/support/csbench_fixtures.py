"""csbench results made by the real tool at test time, once per session.

- `passing`: `csbench run-plan` of the smoke plan's task (suite:swe-bench, oracle, three
  instances) on `platform: local-sim` with `target: {mode: mock}` — a run-plan results dir
  with a campaign file, a record, artifacts and `.progress/`.
- `failing`: a plan of three tasks where one completes, one fails inside csbench (EXECUTE
  cannot create its scratch dir, so csbench writes a failed record) and one fails before any
  record (an unknown suite); csbench exits 1.
- `cloud_bucket(...)`: a cloud campaign run through csbench's own controller loop into a
  local-dir "bucket" that the stand-in `csbench` (csbench_standin.py) serves.

Tests copy what they change (`copy_results`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
INSTANCES = ["django__django-11099", "sympy__sympy-20590", "pytest-dev__pytest-7205"]
SMOKE_TASK = {"task_id": "suite:swe-bench", "params": {"agent_kind": "oracle", "instance_ids": INSTANCES}}

PASS_PLAN = """version: "1"
domain: agent-runtime
platform: local-sim
target:
  mode: mock
tasks:
  - task: "suite:swe-bench"
    params:
      agent_kind: oracle
      instance_ids: [django__django-11099, sympy__sympy-20590, pytest-dev__pytest-7205]
"""

FAIL_PLAN = """version: "1"
domain: agent-runtime
platform: local-sim
target:
  mode: mock
tasks:
  - task: "suite:swe-bench"
    params:
      agent_kind: oracle
  - task: "suite:swe-bench-lite"
    params:
      _tmp_dir: /dev/null/scratch
  - task: "suite:no-such-suite"
"""

_cache: dict[str, Path] = {}


def csbench_exe() -> str:
    """The real csbench; a missing one fails under CI and skips elsewhere."""
    exe = shutil.which("csbench")
    if exe is None:
        why = "clousight-bench is not installed (pip install -e '.[dev]')"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return exe


def _run_plan(base: Path, name: str, plan: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    work = base / name
    work.mkdir(parents=True, exist_ok=True)
    (work / "plan.yaml").write_text(plan, encoding="utf-8")
    proc = subprocess.run([csbench_exe(), "run-plan", "plan.yaml", "--results", "results"], cwd=work,
                          capture_output=True, text=True, timeout=300)
    return work / "results", proc


def results(factory: pytest.TempPathFactory, name: str) -> Path:
    """`passing` or `failing`: made once per session by the real csbench."""
    if name not in _cache:
        base = factory.mktemp(f"csbench-{name}")
        plan = {"passing": PASS_PLAN, "failing": FAIL_PLAN}[name]
        path, proc = _run_plan(base, name, plan)
        expected = 0 if name == "passing" else 1
        assert proc.returncode == expected, (proc.returncode, proc.stdout, proc.stderr)
        _cache[name] = path
    return _cache[name]


def copy_results(factory: pytest.TempPathFactory, name: str, dest: Path) -> Path:
    shutil.copytree(results(factory, name), dest, symlinks=True)
    return dest


def cloud_bucket(bucket: Path, work: Path, campaign_id: str, tasks: list[dict[str, Any]] | None = None,
                 **kw: Any) -> Any:
    """A campaign in `bucket`, written by csbench's controller (see csbench_standin)."""
    csbench_exe()
    from tests.support.csbench_standin import build_campaign

    return build_campaign(bucket, work / f"controller-{campaign_id}", campaign_id, tasks or [SMOKE_TASK], **kw)


def standin(tmp: Path, bucket: Path) -> tuple[Path, Path]:
    """(the stand-in csbench program, a csbench config naming `bucket`)."""
    from tests.support.csbench_standin import write_config, write_executable

    bucket.mkdir(parents=True, exist_ok=True)
    return write_executable(tmp / "bin"), write_config(tmp / "csbench.yaml", bucket)
