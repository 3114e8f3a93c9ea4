"""csbench results made by the real tool at test time, once per session.

- `passing`: `csbench run-plan` of the smoke plan's task (suite:swe-bench, oracle, three
  instances) on `platform: local-sim` with `target: {mode: mock}` — a run-plan results dir
  with a campaign file, a record, artifacts and `.progress/`.
- `failing`: a plan of three tasks where one completes, one fails inside csbench (EXECUTE
  cannot create its scratch dir, so csbench writes a failed record) and one fails before any
  record (an unknown suite); csbench exits 1.
- `repeated`: one task run three times (`repeat: 3`), then a single run of another;
- `warmup`: one task with two warm-up runs before its one measured run;
- `killed`: a task of thirty repeats whose `run-plan` process is killed (SIGKILL) while a run is
  in flight, after two runs have finished — the campaign file still says running, the in-flight
  run's `.progress/` dir names a dead pid;
- `reaped`: the `killed` dir after a later `run-plan` in it, whose start reaped the dead run's
  `.progress/` dir (csbench's `reap_stale`, with its grace `CLOUSIGHT_PROGRESS_GRACE_S=0`);
- `cloud_bucket(...)`: a cloud campaign run through csbench's own controller loop into a
  local-dir "bucket" that the stand-in `csbench` (csbench_standin.py) serves.

Each is made once per session (`results`, or the `csbench_runs` fixture); tests copy what they
change (`copy_results`). `csbench_json(…)` and `csbench_verify(…)` ask csbench itself about one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
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

REPEATED_PLAN = """version: "1"
domain: agent-runtime
platform: local-sim
target:
  mode: mock
tasks:
  - task: "suite:gsm8k"
    repeat: 3
  - task: "suite:swe-bench"
    params:
      agent_kind: oracle
"""

WARMUP_PLAN = """version: "1"
domain: agent-runtime
platform: local-sim
target:
  mode: mock
tasks:
  - task: "suite:gsm8k"
    warmup: 2
"""

KILLED_REPEAT = 30
KILLED_PLAN = f"""version: "1"
domain: agent-runtime
platform: local-sim
target:
  mode: mock
tasks:
  - task: "suite:gsm8k"
    repeat: {KILLED_REPEAT}
  - task: "suite:swe-bench"
"""

LATER_PLAN = """version: "1"
domain: agent-runtime
platform: local-sim
target:
  mode: mock
tasks:
  - task: "suite:gsm8k"
"""

_cache: dict[str, Path] = {}


# looked up once, before any test puts a stand-in `csbench` first on PATH
_REAL_CSBENCH = shutil.which("csbench")


def csbench_exe() -> str:
    """The real csbench; a missing one fails under CI and skips elsewhere."""
    exe = _REAL_CSBENCH
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


def _records(results_dir: Path) -> list[Path]:
    return sorted((results_dir / "agent-runtime").rglob("*-run-*.json")) if (results_dir / "agent-runtime").is_dir() \
        else []


def _in_flight(results_dir: Path) -> bool:
    """A run has started whose record is not written yet."""
    done = {p.name.rsplit("-run-", 1)[-1].removesuffix(".json") for p in _records(results_dir)}
    for state in (results_dir / ".progress").glob("*/state.json"):
        try:
            data = json.loads(state.read_text())
        except (OSError, ValueError):
            continue
        if data.get("status") == "running" and str(data.get("run_id", "")).removeprefix("run-") not in done:
            return True
    return False


def _killed(base: Path) -> Path:
    """run-plan of KILLED_PLAN, SIGKILLed once two runs have finished and a third is in flight."""
    work = base / "killed"
    work.mkdir(parents=True, exist_ok=True)
    (work / "plan.yaml").write_text(KILLED_PLAN, encoding="utf-8")
    results_dir = work / "results"
    proc = subprocess.Popen([csbench_exe(), "run-plan", "plan.yaml", "--results", "results"], cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (len(_records(results_dir)) >= 2 and _in_flight(results_dir)):
            assert proc.poll() is None, f"run-plan ended (exit {proc.returncode}) before it could be killed"
            assert time.monotonic() < deadline, "run-plan wrote no two runs in 120 s"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return results_dir


def _reaped(base: Path, killed: Path) -> Path:
    """A later run-plan in (a copy of) the killed dir: its first run reaps the dead run's dir."""
    work = base / "reaped"
    work.mkdir(parents=True, exist_ok=True)
    results_dir = work / "results"
    shutil.copytree(killed, results_dir, symlinks=True)
    (work / "plan.yaml").write_text(KILLED_PLAN, encoding="utf-8")
    (work / "later.yaml").write_text(LATER_PLAN, encoding="utf-8")
    proc = subprocess.run([csbench_exe(), "run-plan", "later.yaml", "--results", "results"], cwd=work,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CLOUSIGHT_PROGRESS_GRACE_S": "0"})
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return results_dir


PLANS = {"passing": (PASS_PLAN, 0), "failing": (FAIL_PLAN, 1), "repeated": (REPEATED_PLAN, 0),
         "warmup": (WARMUP_PLAN, 0)}


def results(factory: pytest.TempPathFactory, name: str) -> Path:
    """passing, failing, repeated, warmup, killed or reaped: made once per session by the real csbench."""
    if name not in _cache:
        base = factory.mktemp(f"csbench-{name}")
        if name == "killed":
            _cache[name] = _killed(base)
        elif name == "reaped":
            _cache[name] = _reaped(base, results(factory, "killed"))
        else:
            plan, expected = PLANS[name]
            path, proc = _run_plan(base, name, plan)
            assert proc.returncode == expected, (proc.returncode, proc.stdout, proc.stderr)
            _cache[name] = path
    return _cache[name]


@pytest.fixture(scope="session")
def csbench_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`csbench_runs("repeated")`: the session's results dir of that scenario."""
    return lambda name: results(tmp_path_factory, name)


def csbench_json(results_dir: Path, campaign: str | None = None) -> dict[str, Any]:
    """`csbench progress --results R [--campaign C] --json`: csbench's own reading."""
    argv = [csbench_exe(), "progress", "--results", str(results_dir), "--json"]
    if campaign:
        argv += ["--campaign", campaign]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def csbench_verify(results_dir: Path) -> tuple[int, list[str], list[str]]:
    """`csbench verify --results R`: (exit code, the record files it found good, those it found bad)."""
    proc = subprocess.run([csbench_exe(), "verify", "--results", str(results_dir)], capture_output=True, text=True,
                          timeout=60)
    good = [line[3:].strip() for line in proc.stdout.splitlines() if line.startswith("✓  ")]
    bad = [line[3:].strip() for line in proc.stdout.splitlines() if line.startswith("✗  ")]
    return proc.returncode, good, bad


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


# ---- csbench submit: a checkout as the runbook keeps it ----------------------------------------

# the runbook's configs/swe-bench-smoke.plan.yaml (seed 002), placeholders only, as committed
SMOKE_SUBMIT_PLAN = """version: "1"
domain: agent-runtime
platform: aliyun-agentrun
cost_budget: 10.0
driver:
  install_docker: true
  system_disk_size: 120
  hf_endpoint: "https://hf-mirror.com"
  instance_type: "ecs.c6.xlarge"
tasks:
  - task_id: "suite:swe-bench"
    params:
      agent_kind: oracle
      instance_ids:
        - django__django-11099
        - sympy__sympy-20590
        - pytest-dev__pytest-7205
"""

# what each ALICLOUD_* variable holds in the tests: no output may ever show it
SECRET_VALUES = {"ALICLOUD_ACCESS_KEY": "LTAI-sentinel-access", "ALICLOUD_SECRET_KEY": "sentinel-secret-9f3c",
                 "ALICLOUD_REGION": "cn-hangzhou", "CSB_OSS_KEY": "sentinel-oss-key"}


def local_config(bucket: Path, mode: str | None = "real", **extra: Any) -> str:
    """configs/agent-runtime-aliyun.local.yaml as the runbook describes it."""
    lines = ["target:", "  provider: aliyun", "  region: cn-hangzhou", f"  blob_bucket: {bucket}",
             "  auth_env:", "    oss_key: CSB_OSS_KEY", "  arms_license_key: sentinel-arms-license"]
    if mode is not None:
        lines.append(f"  mode: {mode}")
    lines += [f"  {k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=evaldesk", "-c", "user.email=evaldesk@localhost",
                    *args], check=True, capture_output=True, timeout=60)


def submit_checkout(tmp: Path, mode: str | None = "real", plan: str = SMOKE_SUBMIT_PLAN) -> tuple[Path, Path, Path]:
    """(checkout, plan, local config): a git checkout with the plan committed, the local config
    beside it and gitignored, and the terraform dir csbench submit runs in."""
    checkout = tmp / "checkout"
    (checkout / "infra" / "terraform" / "aliyun-iam").mkdir(parents=True)
    (checkout / "configs").mkdir()
    plan_path = checkout / "configs" / "swe-bench-smoke.plan.yaml"
    plan_path.write_text(plan, encoding="utf-8")
    config = checkout / "configs" / "agent-runtime-aliyun.local.yaml"
    config.write_text(local_config(tmp / "bucket", mode), encoding="utf-8")
    (checkout / ".gitignore").write_text("configs/*.local.yaml\n", encoding="utf-8")
    git(checkout, "init", "-q")
    git(checkout, "add", ".gitignore", "configs/swe-bench-smoke.plan.yaml")
    git(checkout, "commit", "-q", "-m", "smoke plan")
    return checkout, plan_path, config


def standin_on_path(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in `csbench` first on PATH, logging every call; the ALICLOUD_* names set."""
    from tests.support.csbench_standin import write_executable

    csbench_exe()
    exe = write_executable(tmp / "bin")
    (tmp / "bucket").mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("CSBENCH_STANDIN_LOG", str(tmp / "csbench-calls.jsonl"))
    for name, value in SECRET_VALUES.items():
        monkeypatch.setenv(name, value)
    return tmp / "csbench-calls.jsonl"


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
