"""A stand-in `ais_bench` for tests: the real one lives only in a separate 6.6 GB venv.

It takes the same command line evaldesk's run.sh gives the real tool
(`ais_bench CONFIG --work-dir W [--mode perf] [--num-prompts N] [--reuse TS]`), reads the
model config beside CONFIG (url, api_key, abbr, model, stream), asks the OpenAI-compatible
server the same 4 gsm8k questions the fixtures use, and writes what the real tool writes, in
its shapes (see tests/fixtures/aisbench, made by the real one):

    W/<YYYYMMDD_HHMMSS>/configs/<ts>_<pid>.py          (the config as run: the key is in it)
    W/<ts>/predictions/<abbr>/gsm8k.jsonl              W/<ts>/results/<abbr>/gsm8k.json {"accuracy": …}
    W/<ts>/summary/summary_<ts>.{txt,csv,md}           W/<ts>/logs/{infer,eval}/<abbr>/gsm8k.out
    -m perf: W/<ts>/performances/<abbr>/gsm8k.{json,csv} and no summary

With the server down (or refusing the key) it logs the real `TINFER-RUNTIME-001 warmup failed`
error, writes no results file and still exits 0 — like the real tool. AIS_BENCH_STANDIN_SLEEP=S
keeps it running S seconds first, AIS_BENCH_STANDIN_HOLD=FILE until FILE exists, so a test can
watch a task run and change the world under it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import stat
import sys
import time
import urllib.error
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path

QUESTIONS = [
    ("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
     "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck "
     "egg. How much in dollars does she make every day at the farmers' market?", "18"),
    ("A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take?",
     "3"),
    ("Tom has 9 apples and buys 9 more. How many apples does he have?", "18"),
    ("James decides to run 3 sprints 3 times a week. He runs 60 meters each sprint. How many total meters does "
     "he run a week?", "540"),
]
# the abbr of each dataset config's dataset, as the tool's own configs name them
# (ais_bench/benchmark/configs/datasets/<dir>/<config>.py in ais-bench-benchmark 3.1)
ABBRS = {"math": "math_prm800k_500", "humaneval": "openai_humaneval", "longbenchv2": "LongBenchv2",
         "livecodebench": "lcb_code_generation"}
RULE = "^" * 128
END = "$" * 128


def log(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    with path.open("a") as fh:
        for line in lines:
            fh.write(f"[{stamp}] [ais_bench] [INFO] {line}\n" if not line.startswith(("Traceback", " ", "ais_")) else
                     line + "\n")


def field(text: str, name: str) -> str | None:
    m = re.search(rf"\b{name}=(\"[^\"]*\"|'[^']*'|True|False|\d+)", text)
    if not m:
        return None
    raw = m.group(1)
    return json.loads(raw) if raw.startswith('"') else raw.strip("'")


def ask(url: str, key: str, model: str, question: str, stream: bool) -> tuple[str, float, float]:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": question}], "max_tokens": 512,
                       "stream": stream}).encode()
    req = urllib.request.Request(url + "v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {key}"} if key else {})})
    t0 = time.perf_counter()
    first = None
    text = ""
    with urllib.request.urlopen(req, timeout=10) as resp:
        if stream:
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                piece = (chunk["choices"][0].get("delta") or {}).get("content") or ""
                if piece and first is None:
                    first = time.perf_counter()
                text += piece
        else:
            text = json.loads(resp.read())["choices"][0]["message"]["content"]
    end = time.perf_counter()
    return text, ((first or end) - t0) * 1000, (end - t0) * 1000


def fail_warmup(run: Path, abbr: str, ds: str, url: str, why: str) -> None:
    log(run / "logs" / "infer" / abbr / f"{ds}.out", [
        f"Task [{abbr}/{ds}]", "Start warmup, run with concurrency: 1",
        "Traceback (most recent call last):",
        '  File "ais_bench/benchmark/tasks/openicl_api_infer.py", line 467, in warm_up',
        "    raise AISBenchRuntimeError(",
        "ais_bench.benchmark.utils.logging.exceptions.AISBenchRuntimeError: [TINFER-RUNTIME-001]warmup failed. "
        "Exit task because all warmup requests failed, failed reasons: {\"After 2 retries, request failed with "
        f"exception: {why}\": 1}} | Visit https://ais-bench-benchmark.readthedocs.io/zh-cn/latest/faqs/"
        "error_codes.html#tinfer-runtime-001 for further help."])
    log(run / "logs" / "eval" / abbr / f"{ds}.out", [f"Task {abbr}/{ds}: No predictions found."])
    print(f"[ais_bench] [ERROR] [RUNNER-TASK-001]task failed. OpenICLApiInfer{abbr}/{ds} failed with code 1, see "
          f"{run}/logs/infer/{abbr}/{ds}.out", flush=True)


def summary(run: Path, ts: str, abbr: str, ds: str, value: str, version: str) -> None:
    d = run / "summary"
    d.mkdir(parents=True, exist_ok=True)
    metric, mode = ("accuracy", "gen") if value != "-" else ("-", "-")
    ver = version if value != "-" else "-"
    table = (f"dataset    version    metric    mode      {abbr}\n---------  ---------  --------  ------  "
             f"{'-' * max(12, len(abbr))}\n{ds:<9}  {ver:<9}  {metric:<8}  {mode:<6}  {value:>12}")
    csv = f"dataset,version,metric,mode,{abbr}\n{ds},{ver},{metric},{mode},{value}\n"
    md = f"| dataset | version | metric | mode | {abbr} |\n|----- | ----- | ----- | ----- | -----|\n" \
         f"| {ds} | {ver} | {metric} | {mode} | {value} |\n"
    (d / f"summary_{ts}.txt").write_text(f"{ts}\ntabulate format\n{RULE}\n{table}\n{END}\n\ncsv format\n{RULE}\n"
                                         f"{csv}{END}\n")
    (d / f"summary_{ts}.csv").write_text(csv)
    (d / f"summary_{ts}.md").write_text(md)
    print(table, flush=True)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return round(s[lo] + (s[hi] - s[lo]) * (k - lo), 1)


def perf_files(run: Path, abbr: str, ds: str, ttft: list[float], e2e: list[float], total_ms: float) -> None:
    d = run / "performances" / abbr
    d.mkdir(parents=True, exist_ok=True)
    n = len(e2e)
    tpot = [(e - t) / 10 for e, t in zip(e2e, ttft, strict=True)]
    rows = []
    for name, vals in (("E2EL", e2e), ("TTFT", ttft), ("TPOT", tpot), ("ITL", tpot)):
        stats = [sum(vals) / n, min(vals), max(vals), pct(vals, 50), pct(vals, 75), pct(vals, 90), pct(vals, 99)]
        rows.append(f"{name},total," + ",".join(f"{round(v, 1)} ms" for v in stats) + f",{n}")
    rows.append(f"InputTokens,total,{','.join(['32.0'] * 7)},{n}")
    rows.append(f"OutputTokens,total,{','.join(['11.0'] * 7)},{n}")
    (d / f"{ds}.csv").write_text("Performance Parameters,Stage,Average,Min,Max,Median,P75,P90,P99,N\n"
                                 + "\n".join(rows) + "\n")
    secs = max(total_ms, 0.001) / 1000
    common = {"Benchmark Duration": {"total": f"{round(total_ms, 4)} ms"}, "Total Requests": {"total": n},
              "Failed Requests": {"total": 0}, "Success Requests": {"total": n},
              "Concurrency": {"total": round(sum(e2e) / max(total_ms, 0.001), 4)}, "Max Concurrency": {"total": n},
              "Request Throughput": {"total": f"{round(n / secs, 4)} req/s"},
              "Total Input Tokens": {"total": 32 * n},
              "Output Token Throughput": {"total": f"{round(11 * n / secs, 4)} token/s"}}
    (d / f"{ds}.json").write_text(json.dumps(common, indent=4))


def main() -> int:
    ap = argparse.ArgumentParser(prog="ais_bench")
    ap.add_argument("config", nargs="?")
    ap.add_argument("-w", "--work-dir", required=True)
    ap.add_argument("-m", "--mode", default="all")
    ap.add_argument("--num-prompts", type=int)
    ap.add_argument("-r", "--reuse", nargs="?", const="latest")
    # the composed form the runbook's eval_run.py gives: --config-dir D --models M --datasets NAME…
    ap.add_argument("--config-dir")
    ap.add_argument("--models")
    ap.add_argument("--datasets", nargs="+")
    for flag in ("--merge-ds", "--dump-eval-details", "--debug"):
        ap.add_argument(flag, action="store_true")
    args = ap.parse_args()
    try:
        if args.config_dir:
            model_text = (Path(args.config_dir) / "models" / f"{args.models}.py").read_text()
            # a dataset config name is <dir>_gen…: its dir under configs/datasets/ says the dataset
            cfg_text = "".join(f"configs.datasets.{n.split('_gen')[0]}.{n}\n" for n in args.datasets or [])
        else:
            cfg = Path(args.config)
            cfg_text = cfg.read_text()
            model_text = (cfg.parent / "models" / "api_model.py").read_text()
    except (OSError, TypeError) as exc:
        print(f"[ais_bench] [ERROR] [TMAN-CFG-001] cannot read the config: {exc}", file=sys.stderr)
        return 1
    m = re.search(r"configs\.datasets\.(\w+)\.", cfg_text)
    ds = ABBRS.get(m.group(1), m.group(1)) if m else "dataset"
    abbr = field(model_text, "abbr") or "model"
    model = field(model_text, "model") or ""
    url = field(model_text, "url") or "http://localhost:8080/"
    key = field(model_text, "api_key") or ""
    stream = field(model_text, "stream") == "True"
    work = Path(args.work_dir)
    if args.reuse:
        runs = sorted(p.name for p in work.glob("*_*") if p.is_dir()) if work.exists() else []
        ts = runs[-1] if args.reuse == "latest" and runs else args.reuse
    else:
        ts = datetime.now().strftime("%Y%m%d_%H%M%S")
    run = work / ts
    (run / "configs").mkdir(parents=True, exist_ok=True)
    # the dump's shape (mmengine Config.dump): the key is in it, as in the real one
    (run / "configs" / f"{datetime.now().strftime('%Y%m%d_%H%M%S')}_{os.getpid()}.py").write_text(
        f"datasets=[\n    dict(abbr={ds!r},\n        path='ais_bench/datasets/{m.group(1) if m else ds}'),\n    ]\n"
        f"models=[\n    dict(abbr={abbr!r},\n        api_key={key!r},\n        model={model!r}),\n    ]\n"
        f"work_dir={str(run)!r}\n")
    print(f"[ais_bench] [INFO] Current exp folder: {run}", flush=True)
    time.sleep(float(os.environ.get("AIS_BENCH_STANDIN_SLEEP") or 0))
    hold = os.environ.get("AIS_BENCH_STANDIN_HOLD")
    deadline = time.monotonic() + 120
    while hold and not Path(hold).exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # a test says when to go on (a sleep races a loaded machine)
    if args.mode == "perf" and args.reuse:
        # the real tool turns `-m perf --reuse` into perf_viz: no inference, the metrics of the
        # reused run reloaded (cli/task_manager.py); a run that measured nothing stays so
        print("[ais_bench] [WARNING] Detected --reuse in performance mode. The inference stage will be skipped, "
              "and performance metrics will be loaded from the reuse work dir.", flush=True)
        return 0
    questions = QUESTIONS[: args.num_prompts] if args.num_prompts else QUESTIONS
    answers: list[tuple[str, str, float, float]] = []
    t0 = time.perf_counter()
    for q, gold in questions:
        try:
            text, ttft, e2e = ask(url, key, model, q, stream or args.mode == "perf")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            why = f"ClientConnectorError: Cannot connect to host {url}: {reason}" if not isinstance(
                exc, urllib.error.HTTPError) else f"HTTP {exc.code}: {exc.reason}"
            fail_warmup(run, abbr, ds, url, why)
            if args.mode != "perf":
                summary(run, ts, abbr, ds, "-", "-")
            return 0  # the real tool exits 0 here too: only the missing results file tells
        answers.append((text, gold, ttft, e2e))
    total_ms = (time.perf_counter() - t0) * 1000
    log(run / "logs" / "infer" / abbr / f"{ds}.out", [f"Task [{abbr}/{ds}]", "Api infer task time elapsed: 0.10s"])
    if args.mode == "perf":
        perf_files(run, abbr, ds, [a[2] for a in answers], [a[3] for a in answers], total_ms)
        print(f"[ais_bench] [INFO] Performance Result files located in {run}/performances/{abbr}.", flush=True)
        return 0
    pred_dir = run / "predictions" / abbr
    pred_dir.mkdir(parents=True, exist_ok=True)
    right = 0
    with (pred_dir / f"{ds}.jsonl").open("w") as fh:
        for i, (text, gold, _, _) in enumerate(answers):
            got = re.findall(r"answer:\s*(-?\d+)", text)
            right += bool(got and got[-1] == gold)
            fh.write(json.dumps({"data_abbr": ds, "id": i, "success": True, "uuid": uuid.uuid4().hex,
                                 "origin_prompt": [{"role": "HUMAN", "prompt": questions[i][0]}],
                                 "prediction": text, "gold": f"#### {gold}"}) + "\n")
    accuracy = round(100.0 * right / len(answers), 2)
    res = run / "results" / abbr
    res.mkdir(parents=True, exist_ok=True)
    (res / f"{ds}.json").write_text(json.dumps({"accuracy": accuracy}, indent=4))
    log(run / "logs" / "eval" / abbr / f"{ds}.out", [f"Task {abbr}/{ds}: {{'accuracy': {accuracy}}}"])
    summary(run, ts, abbr, ds, f"{accuracy:.2f}", "50861a")
    return 0


def install(bin_dir: Path) -> Path:
    """Put an executable `ais_bench` running this file into `bin_dir`; its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "ais_bench"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} \"$@\"\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return exe


def copy_fixture_root(dest: Path) -> Path:
    """The committed fixture task root, copied where a test may change it."""
    src = Path(__file__).resolve().parents[1] / "fixtures" / "aisbench" / "task_root"
    shutil.copytree(src, dest)
    return dest


if __name__ == "__main__":
    raise SystemExit(main())
