"""The demo's AISBench task root: the committed fixture tasks (made by the real ais_bench; the
SWE-bench one by hand from its shape) copied under `<demo root>/aisbench-eval-a/`, dated
relative to the demo's clock, plus task-table rows for the states no run dir can show: a task
that needs input, one blocked by its preflight, one whose dir is gone.

The fixtures ship with a source checkout (tests/fixtures/aisbench/task_root); without them
(an installed wheel) the demo has no AISBench tasks and says nothing about it.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timedelta
from pathlib import Path

from services.aisbench.formats import HostEntry, PreflightStep, TaskRow
from services.aisbench.preflight import STEP_API, STEP_ENV, STEP_SRC, STEP_SSH
from services.aisbench.table import LOCAL, LOCAL_TABLE, TaskTable
from services.aisbench.taskdir import SUITES, ais_bench_argv, render_run_sh

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "aisbench" / "task_root"
DEMO_DIR = "aisbench-eval-a"
FIXTURE_ROOT = "/tmp/ais-bench-eval"  # where the fixture tasks ran (scripts/aisbench_fixtures.py)
# task → how long before the demo's "now" it finished (minutes)
AGES = {"gsm8k-accuracy": 95, "perf-gsm8k": 80, "gsm8k-server-down": 50, "swe-bench-verified-mini": 200}


def _age_files(task: Path, at: datetime) -> None:
    stamp = at.timestamp()
    for dirpath, _dirs, files in os.walk(task):
        for name in files:
            os.utime(os.path.join(dirpath, name), (stamp, stamp))


def _rerender_run_sh(task: Path, root: Path, meta: dict[str, object]) -> list[str] | None:
    """run.sh is evaldesk's own file: write it as a launch on this machine would, so a resume
    from the demo runs (or is blocked by the preflight) here, not where the fixtures were made."""
    if not (task / "run.sh").exists() or str(meta.get("suite")) not in SUITES:
        return None
    host = HostEntry(name=LOCAL, host=LOCAL, benchmark_src=str(root), task_root=str(root))
    s = SUITES[str(meta["suite"])]
    prompts = meta.get("num_prompts")
    argv = ais_bench_argv(host, str(task), s, int(prompts) if isinstance(prompts, int) else None)
    (task / "run.sh").write_text(render_run_sh(host, str(task), argv))
    return argv


def write_demo(root: Path, now: datetime, fixtures: Path = FIXTURES) -> list[Path]:
    if not fixtures.is_dir():
        return []
    target = Path(root) / DEMO_DIR
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    written: list[Path] = []
    for task in sorted(p for p in fixtures.iterdir() if p.is_dir()):
        dest = target / task.name
        shutil.copytree(task, dest)
        finished = now - timedelta(minutes=AGES.get(task.name, 60))
        meta = dest / "task.json"
        if meta.exists():
            data = json.loads(meta.read_text().replace(FIXTURE_ROOT, str(target)))
            for key in ("created_at", "launched_at"):
                if key in data:
                    data[key] = (finished - timedelta(minutes=10)).isoformat()
            argv = _rerender_run_sh(dest, target, data)
            if argv:
                data["command"] = argv
            meta.write_text(json.dumps(data, indent=2) + "\n")
        _age_files(dest, finished)
        written.append(dest)
    table = TaskTable(target / LOCAL_TABLE, LOCAL, str(target))
    ok = [PreflightStep(step=STEP_SSH, ok=True, evidence="eval-a answered over SSH"),
          PreflightStep(step=STEP_ENV, ok=True, evidence="image ais-bench:3.1 present (sha256:4f1c2a9e0b7d)"),
          PreflightStep(step=STEP_SRC, ok=True, evidence="/home/eval/ais_bench present; task root writable")]
    table.put(TaskRow(id="gsm8k-server-down", where=LOCAL, task_root=str(target), suite="gsm8k", model="fake-model",
                      api_base="http://127.0.0.1:39521/v1", mode="accuracy", max_out_len=512, batch_size=4,
                      created_at=now - timedelta(minutes=62), launched_at=now - timedelta(minutes=60),
                      preflight=[*ok, PreflightStep(step=STEP_API, ok=True, evidence=(
                          "GET http://127.0.0.1:39521/v1/models from eval-a → 200, serves fake-model, "
                          "max_model_len 32768"))],
                      preflight_at=now - timedelta(minutes=61), max_model_len=32768))
    table.put(TaskRow(id="gsm8k-qwen3-32b", where=LOCAL, task_root=str(target), suite="gsm8k", model="Qwen3-32B",
                      api_base="http://vllm-qwen3-32b.invalid:8000/v1", api_key_env="AISBENCH_API_KEY", mode="accuracy",
                      created_at=now - timedelta(minutes=7), max_model_len=49152))
    table.put(TaskRow(id="ceval-qwen3-32b", where=LOCAL, task_root=str(target), suite="ceval", model="Qwen3-32B",
                      api_base="http://vllm-qwen3-32b-b.invalid:8000/v1", mode="accuracy", max_out_len=40960,
                      batch_size=64, created_at=now - timedelta(minutes=20),
                      preflight=[*ok, PreflightStep(step=STEP_API, ok=False, evidence=(
                          "GET http://vllm-qwen3-32b-b.invalid:8000/v1/models from eval-a failed: curl: (6) Could "
                          "not resolve host: vllm-qwen3-32b-b.invalid"))],
                      preflight_at=now - timedelta(minutes=19)))
    table.put(TaskRow(id="mmlu-qwen3-8b", where=LOCAL, task_root=str(target), suite="mmlu", model="Qwen3-8B",
                      api_base="http://vllm-qwen3-8b.invalid:8001/v1", mode="accuracy", max_out_len=24576,
                      batch_size=128, created_at=now - timedelta(days=3), launched_at=now - timedelta(days=3)))
    written.append(target / LOCAL_TABLE)
    return written
