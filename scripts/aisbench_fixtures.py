#!/usr/bin/env python3
"""Regenerate tests/fixtures/aisbench/ with the real `ais_bench` against a loopback model server.

OPT-IN: it needs AISBench in a separate venv (~3 min, ~6.6 GB with torch/CUDA wheels — never a
dependency of evaldesk):

    python -m venv /work/venvs/aisbench
    /work/venvs/aisbench/bin/pip install ais-bench-benchmark 'pyarrow<20' 'setuptools<81'
    python scripts/aisbench_fixtures.py [--venv /work/venvs/aisbench] [--out tests/fixtures/aisbench]

It writes each task dir exactly as evaldesk's launch does (services/aisbench/taskdir.py: task.json,
cfg/config.py, cfg/models/api_model.py with an empty key, run.sh) under /tmp/ais-bench-eval (the
runbook's default task root), runs its run.sh to the end (bash, in the foreground) with a tiny
offline gsm8k (4 questions, 2 of them answered right by the fake server: accuracy 50.00) and a
word-level tokenizer made on the spot, then copies the task dirs into OUT/task_root/:

    gsm8k-accuracy      `ais_bench` accuracy run, server up          → results, predictions, summary
    perf-gsm8k          `ais_bench -m perf`, streaming, tokenizer dir → performances/*.json and .csv
    gsm8k-server-down   the same accuracy run with the server down   → exit code 0, NO results file

    swe-bench-verified-mini   HAND-MADE (`write_swebench`): a SWE-bench run needs Docker and the
                              harness, which cannot run offline here. Its results file follows
                              the shape ais_bench/benchmark/tasks/swebench/swebench_eval.py
                              (3.1.20260630) writes: accuracy, submitted_accuracy, then the
                              harness report (total/submitted/completed/resolved/unresolved/
                              empty_patch/error instances, the id lists, schema_version 2),
                              harness_exit_code, predictions_path, run_id; and the config
                              dump under configs/ (its model and dataset abbrs).

`--swebench-only` rewrites just the hand-made task (no venv needed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.aisbench.formats import HostEntry, TaskMeta  # noqa: E402
from services.aisbench.taskdir import (  # noqa: E402
    ais_bench_argv,
    meta_json,
    model_abbr,
    paths,
    render_config,
    render_model,
    render_run_sh,
    suite,
    with_key,
)
from tests.support.openai_server import FakeOpenAI  # noqa: E402

TASK_ROOT = "/tmp/ais-bench-eval"
GSM8K = [
    {"question": "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins "
                 "for her friends every day with four. She sells the remainder at the farmers' market daily for $2 "
                 "per fresh duck egg. How much in dollars does she make every day at the farmers' market?",
     "answer": "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every "
               "day at the farmer's market.\n#### 18"},
    {"question": "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does "
                 "it take?",
     "answer": "It takes 2/2=<<2/2=1>>1 bolt of white fiber\nSo the total amount of fabric is 2+1=<<2+1=3>>3 bolts "
               "of fabric\n#### 3"},
    {"question": "Tom has 9 apples and buys 9 more. How many apples does he have?",
     "answer": "9 + 9 = <<9+9=18>>18\n#### 18"},
    {"question": "James decides to run 3 sprints 3 times a week. He runs 60 meters each sprint. How many total "
                 "meters does he run a week?",
     "answer": "He sprints 3*3=<<3*3=9>>9 times\nSo he runs 9*60=<<9*60=540>>540 meters\n#### 540"},
]
TOKENIZER = """
import string
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
vocab = {"[UNK]": 0, "[PAD]": 1, "<s>": 2, "</s>": 3}
for w in "the a answer is result let me think step by step question how many".split() + list(
        string.ascii_letters + string.digits + string.punctuation):
    vocab.setdefault(w, len(vocab))
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", bos_token="<s>",
                        eos_token="</s>").save_pretrained(__import__("sys").argv[1])
"""


def write_task(host: HostEntry, task_id: str, suite_name: str, api_base: str, max_out_len: int, batch: int,
               tokenizer: str | None) -> Path:
    s = suite(suite_name)
    p = paths(TASK_ROOT, task_id)
    task_dir = Path(p["dir"])
    if task_dir.exists():
        shutil.rmtree(task_dir)
    (task_dir / "cfg" / "models").mkdir(parents=True)
    os.chmod(task_dir, 0o700)
    now = datetime.now(UTC).replace(microsecond=0)
    meta = TaskMeta(id=task_id, suite=s.name, mode=s.mode, model="fake-model", model_abbr=model_abbr("fake-model"),
                    api_base=api_base, max_out_len=max_out_len, batch_size=batch,
                    created_at=now, launched_at=now, host="eval-a")
    argv = ais_bench_argv(host, p["dir"], s, None)
    meta.command = argv
    Path(p["meta"]).write_text(meta_json(meta))
    Path(p["config"]).write_text(render_config(s))
    Path(p["model"]).write_text(with_key(render_model(s, meta, tokenizer), ""))
    Path(p["run"]).write_text(render_run_sh(host, p["dir"], argv))
    return task_dir


def run(task_dir: Path) -> None:
    t0 = time.monotonic()
    subprocess.run(["bash", str(task_dir / "run.sh")], check=False, timeout=900)
    code = (task_dir / "exit_code").read_text().strip() if (task_dir / "exit_code").exists() else "none"
    print(f"  {task_dir.name}: exit code {code} in {time.monotonic() - t0:.0f} s", flush=True)


SWE_TS = "20261130_110000"


def write_swebench(out: Path) -> Path:
    """The hand-made SWE-bench task: results in the shape swebench_eval.py writes (not a real run)."""
    task = out / "swe-bench-verified-mini"
    if task.exists():
        shutil.rmtree(task)
    run = task / "outputs" / SWE_TS
    (run / "results" / "fake-model").mkdir(parents=True)
    (run / "logs" / "eval" / "fake-model").mkdir(parents=True)
    ids = [f"astropy__astropy-1{i:04d}" for i in range(10)]
    resolved, unresolved, errors = ids[:4], ids[4:9], ids[9:]
    report = {
        "total_instances": 10, "submitted_instances": 10, "completed_instances": 9, "resolved_instances": 4,
        "unresolved_instances": 5, "empty_patch_instances": 0, "error_instances": 1,
        "completed_ids": sorted(resolved + unresolved), "incomplete_ids": [], "empty_patch_ids": [],
        "submitted_ids": ids, "resolved_ids": resolved, "unresolved_ids": unresolved, "error_ids": errors,
        "schema_version": 2,
    }
    results = {"accuracy": 40.0, "submitted_accuracy": 40.0, **report, "harness_exit_code": 0,
               "predictions_path": f"{TASK_ROOT}/swe-bench-verified-mini/outputs/{SWE_TS}/predictions/fake-model/"
                                   "swe_bench_verified_mini.json",
               "run_id": f"fake-model_{SWE_TS}"}
    (run / "results" / "fake-model" / "swe_bench_verified_mini.json").write_text(json.dumps(results, indent=2))
    # the config the tool dumps at the start of a run (mmengine Config.dump of the agent config)
    (run / "configs").mkdir()
    (run / "configs" / f"{SWE_TS}_4242.py").write_text(
        "datasets=[\n    dict(abbr='swe_bench_verified_mini',\n        filter_spec='',\n        name='verified_mini',\n"
        "        path='/data/swe/verified_mini',\n        shuffle=False,\n        split='test',\n"
        "        step_limit=200,\n        type='ais_bench.benchmark.datasets.SWEBenchDataset'),\n    ]\n"
        "models=[\n    dict(abbr='fake-model',\n        api_key='',\n        attr='local',\n        batch_size=4,\n"
        "        model='fake-model',\n        type='LiteLLMChat',\n        url='http://127.0.0.1:8000/v1'),\n    ]\n"
        f"work_dir='{TASK_ROOT}/swe-bench-verified-mini/outputs/{SWE_TS}'\n")
    (run / "logs" / "eval" / "fake-model" / "swe_bench_verified_mini.out").write_text(
        "[2026-11-30 11:40:02,118] [ais_bench] [INFO] Report: 4 resolved, 5 unresolved, 1 errors (of 10 submitted)\n")
    meta = TaskMeta(id="swe-bench-verified-mini", suite="swe_bench_verified_mini", mode="agent", model="fake-model",
                    model_abbr="fake-model", api_base="http://127.0.0.1:8000/v1",
                    max_out_len=32768, batch_size=4,
                    created_at=datetime(2026, 11, 30, 11, 0, tzinfo=UTC), host="eval-a")
    (task / "task.json").write_text(meta_json(meta))
    (task / "exit_code").write_text("0\n")
    (task / "run.log").write_text("hand-made fixture: the shape of an AISBench SWE-bench run, not a real run\n")
    (task / "HAND-MADE").write_text("Written by scripts/aisbench_fixtures.py:write_swebench from the shape of\n"
                                   "ais_bench/benchmark/tasks/swebench/swebench_eval.py; not produced by ais_bench.\n")
    return task


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", default=os.environ.get("AISBENCH_VENV", "/work/venvs/aisbench"))
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "aisbench"))
    ap.add_argument("--swebench-only", action="store_true", help="rewrite only the hand-made SWE-bench task")
    args = ap.parse_args()
    if args.swebench_only:
        print(f"wrote {write_swebench(Path(args.out) / 'task_root')} (hand-made)")
        return 0
    venv = Path(args.venv)
    if not (venv / "bin" / "ais_bench").exists():
        print(f"no ais_bench in {venv}: create the venv first (see this script's docstring)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="aisbench-fixtures-"))
    cache = work / "cache" / "ais_bench" / "datasets" / "gsm8k"
    cache.mkdir(parents=True)
    lines = "".join(json.dumps(q) + "\n" for q in GSM8K)
    (cache / "test.jsonl").write_text(lines)
    (cache / "train.jsonl").write_text(lines)  # AISBench's gsm8k loader reads both splits
    tokenizer = work / "tokenizer"
    subprocess.run([str(venv / "bin" / "python"), "-c", TOKENIZER, str(tokenizer)], check=True)
    host = HostEntry(name="eval-a", host="local", benchmark_src=str(work), task_root=TASK_ROOT,
                     ais_bench=str(venv / "bin" / "ais_bench"),
                     env={"AIS_BENCH_DATASETS_CACHE": str(work / "cache"), "HF_HUB_OFFLINE": "1",
                          "TRANSFORMERS_OFFLINE": "1"})
    Path(TASK_ROOT).mkdir(parents=True, exist_ok=True)
    server = FakeOpenAI(answer="18").start()
    try:
        print(f"fake model server at {server.base_url}", flush=True)
        acc = write_task(host, "gsm8k-accuracy", "gsm8k", server.base_url, 512, 4, None)
        run(acc)
        perf = write_task(host, "perf-gsm8k", "perf_gsm8k", server.base_url, 512, 4, str(tokenizer))
        run(perf)
        base = server.base_url
    finally:
        server.stop()
    down = write_task(host, "gsm8k-server-down", "gsm8k", base, 512, 4, None)
    run(down)
    out = Path(args.out) / "task_root"
    out.mkdir(parents=True, exist_ok=True)
    for task in (acc, perf, down):
        target = out / task.name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(task, target, ignore=shutil.ignore_patterns("status_tmp", "__pycache__"))
        os.chmod(target, 0o755)  # a checkout keeps no dir modes; the launch sets 700 on the host
    write_swebench(out)
    print(f"wrote {out} (swe-bench-verified-mini is hand-made)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
