"""A local task root read as experiments: the fixtures (made by the real ais_bench) and task
dirs changed into every state the runbook names."""

from __future__ import annotations

import csv
import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.aisbench.formats import PreflightStep, TaskRow
from services.aisbench.models import DatasetTrial, TaskExperiment
from services.aisbench.source import AISBenchSource
from services.aisbench.table import LOCAL, LOCAL_TABLE, TaskTable
from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.models import State, TrialStatus
from services.core.plain import dump as plain_dump
from services.core.registry import open_sources
from services.core.results import source_results
from tests.support.ais_bench_standin import copy_fixture_root

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return copy_fixture_root(tmp_path / "task_root")


def source(root: Path) -> AISBenchSource:
    found = [s for s in open_sources(str(root), Config()) if s.kind == "aisbench"]
    assert len(found) == 1
    src = found[0]
    assert isinstance(src, AISBenchSource)
    return src


async def scan(root: Path) -> dict[str, TaskExperiment]:
    snap = await source(root).scan()
    out = {}
    for e in snap.experiments:
        assert isinstance(e, TaskExperiment)
        out[e.id] = e
    return out


def only_trial(exp: TaskExperiment) -> DatasetTrial:
    [t] = exp.trials
    assert isinstance(t, DatasetTrial)
    return t


async def test_the_fixture_tasks_read_exactly(root: Path) -> None:
    exps = await scan(root)
    assert sorted(exps) == ["gsm8k-accuracy", "gsm8k-server-down", "perf-gsm8k", "swe-bench-verified-mini"]
    acc = exps["gsm8k-accuracy"]
    assert (acc.state, acc.state_raw, acc.score, acc.model, acc.benchmark) == (State.finished, "finished", 0.5,
                                                                               "fake-model", "gsm8k")
    t = only_trial(acc)
    assert (t.trial_name, t.task_name, t.status, t.reward, t.metric, t.kind) == (
        "fake-model/gsm8k", "gsm8k", TrialStatus.valid, 0.5, "accuracy", "accuracy")
    assert t.predictions is not None and (t.predictions.total, t.predictions.failed) == (4, 0)
    assert acc.task.summary == ["gsm8k accuracy fake-model=50.00"]
    assert (acc.counts.valid, acc.counts.expected, acc.task.exit_code) == (1, 1, 0)

    perf = exps["perf-gsm8k"]
    t = only_trial(perf)
    assert (perf.state, perf.score, t.kind, t.status) == (State.finished, None, "perf", TrialStatus.valid)
    rows = list(csv.DictReader((root / "perf-gsm8k" / t.files["perf_csv"]).read_text().splitlines()))
    for row in rows:
        for col in ("Median", "P75", "P90", "P99"):
            assert t.perf_stats[row["Performance Parameters"]][col] == pytest.approx(float(row[col].split()[0]))
    assert t.perf_units["TTFT"] == "ms" and t.perf_common["Total Requests"] == "4"
    raw = json.loads((root / "perf-gsm8k" / t.files["perf"]).read_text())
    assert t.perf_common["Request Throughput"] == raw["Request Throughput"]["total"]

    down = exps["gsm8k-server-down"]
    t = only_trial(down)
    assert (down.state, down.task.exit_code, t.status, t.exception_type) == (State.failed, 0, TrialStatus.errored,
                                                                            "TINFER-RUNTIME-001")
    assert down.task.reason is not None and down.task.reason.startswith("exited 0 without a results file")
    assert "Cannot connect to host" in down.task.reason

    swe = exps["swe-bench-verified-mini"]
    t = only_trial(swe)
    assert (swe.state, swe.score, t.kind) == (State.finished, 0.4, "swebench")
    assert t.swebench == {"resolved": 4, "total": 10, "submitted": 10, "completed": 9, "unresolved": 5,
                          "empty_patch": 0, "error": 1, "harness_exit_code": 0}


async def test_audits_of_the_fixtures(root: Path) -> None:
    exps = await scan(root)
    reports = {k: audit_experiment(e, now=NOW) for k, e in exps.items()}
    assert {k: r.verdict for k, r in reports.items()} == {
        "gsm8k-accuracy": "finalize", "perf-gsm8k": "finalize", "gsm8k-server-down": "resume",
        "swe-bench-verified-mini": "finalize"}
    down = reports["gsm8k-server-down"]
    assert [c.id for c in down.checks] == ["finished", "results_file", "score", "preflight", "params"]
    assert down.check("finished").remediation == "aisbench_resume"
    assert "AISBench exits 0 even when every request failed" in down.notes[0]
    assert reports["gsm8k-accuracy"].check("params").status.value == "warn"  # 512 truncates thinking models
    swe = reports["swe-bench-verified-mini"]
    assert swe.check("score").evidence == "fake-model/swe_bench_verified_mini: resolved 4/10, 1 error instance(s)"
    assert swe.check("finished").remediation is None  # its dir has no run.sh of evaldesk's: not resumable


def write_exit(task: Path, code: str | None) -> None:
    if code is None:
        (task / "exit_code").unlink(missing_ok=True)
    else:
        (task / "exit_code").write_text(code + "\n")


async def test_states_without_an_exit_code(root: Path) -> None:
    task = root / "gsm8k-accuracy"
    write_exit(task, None)
    (task / "pid").write_text(f"{os.getpid()}\n")  # alive
    exps = await scan(root)
    assert exps["gsm8k-accuracy"].state == State.running
    (task / "pid").write_text("999999999\n")  # no such process: killed without a trace
    exps = await scan(root)
    exp = exps["gsm8k-accuracy"]
    assert exp.state == State.failed and "gone and left no exit code" in str(exp.task.reason)
    (task / "run.sh").unlink()
    exps = await scan(root)
    assert "no run.sh" in str(exps["gsm8k-accuracy"].task.reason)


async def test_a_nonzero_exit_code_fails_even_with_results(root: Path) -> None:
    write_exit(root / "gsm8k-accuracy", "3")
    exp = (await scan(root))["gsm8k-accuracy"]
    assert exp.state == State.failed and exp.task.reason == "ais_bench exited with code 3"


def add_dataset_to_dump(task: Path, abbr: str, path: str) -> None:
    """One more dataset in the run's dumped config, as mmengine's Config.dump writes it."""
    [dump] = task.glob("outputs/*/configs/*.py")
    text = dump.read_text()
    assert "\ndatasets=[\n" in text
    dump.write_text(text.replace("\ndatasets=[\n", f"\ndatasets=[\n    dict(abbr='{abbr}',\n        path='{path}',\n"
                                 "        type='ais_bench.benchmark.datasets.math.MATHDataset'),\n", 1))


async def test_exit_0_with_one_of_two_datasets_missing_is_failed(root: Path) -> None:
    task = root / "gsm8k-accuracy"
    add_dataset_to_dump(task, "math_prm800k_500", "ais_bench/datasets/math")
    run = next((task / "outputs").iterdir())
    logs = run / "logs" / "infer" / "fake-model"
    shutil.copy(root / "gsm8k-server-down" / next((root / "gsm8k-server-down" / "outputs").iterdir()).relative_to(
        root / "gsm8k-server-down") / "logs/infer/fake-model/gsm8k.out", logs / "math_prm800k_500.out")
    exp = (await scan(root))["gsm8k-accuracy"]
    assert exp.state == State.failed
    assert exp.task.reason is not None and exp.task.reason.startswith(
        "exited 0 but 1 of 2 datasets have no results file (math_prm800k_500)")
    assert (exp.counts.valid, exp.counts.errored, exp.counts.expected) == (1, 1, 2)


async def test_a_dataset_the_dumped_config_names_without_any_file_is_missing(root: Path) -> None:
    # not a log, not a prediction: only the config says the run was to measure it
    add_dataset_to_dump(root / "gsm8k-accuracy", "openai_humaneval", "ais_bench/datasets/humaneval")
    exp = (await scan(root))["gsm8k-accuracy"]
    assert exp.state == State.failed and "(openai_humaneval)" in str(exp.task.reason)
    assert sorted(t.trial_name for t in exp.trials) == ["fake-model/gsm8k", "fake-model/openai_humaneval"]


async def test_a_math500_run_is_finished_under_the_tools_own_abbr(root: Path) -> None:
    # the suite is math500; AISBench names its dataset math_prm800k_500
    # (configs/datasets/math/math500_gen_0_shot_cot_chat_prompt.py): its results file is that name
    task = root / "gsm8k-accuracy"
    meta = json.loads((task / "task.json").read_text())
    meta["suite"] = "math500"
    (task / "task.json").write_text(json.dumps(meta))
    [dump] = task.glob("outputs/*/configs/*.py")
    dump.write_text(dump.read_text().replace("abbr='gsm8k'", "abbr='math_prm800k_500'"))
    for f in list((task / "outputs").rglob("fake-model/gsm8k.*")):
        f.rename(f.with_name("math_prm800k_500" + f.suffix))
    exp = (await scan(root))["gsm8k-accuracy"]
    assert exp.state == State.finished, exp.task.reason
    assert [t.trial_name for t in exp.trials] == ["fake-model/math_prm800k_500"]
    assert (exp.counts.valid, exp.counts.expected) == (1, 1)


async def test_the_dumped_config_is_parsed_not_run_and_its_key_kept_nowhere(root: Path) -> None:
    task = root / "gsm8k-accuracy"
    [dump] = task.glob("outputs/*/configs/*.py")
    marker = root / "ran"
    dump.write_text(dump.read_text().replace("api_key=''", "api_key='sk-secret-in-dump'")
                    + f"\nimport pathlib; pathlib.Path({str(marker)!r}).write_text('x')\n")
    snap = await source(root).scan()
    exp = next(e for e in snap.experiments if e.id == "gsm8k-accuracy")
    assert exp.state == State.finished and not marker.exists()
    assert "sk-secret-in-dump" not in json.dumps(plain_dump(exp, json=True))
    assert "sk-secret-in-dump" not in json.dumps(plain_dump(snap, json=True))
    dump.write_text("datasets=[dict(abbr='gsm8k'")  # torn
    snap = await source(root).scan()
    assert any("not a config AISBench dumps" in e.message for e in snap.errors)


async def test_a_swebench_results_file_without_the_harness_report_is_a_failed_eval(root: Path) -> None:
    # swebench_eval.py with no harness report writes only these three keys (and may say exit 0)
    task = root / "swe-bench-verified-mini"
    [result] = task.glob("outputs/*/results/fake-model/*.json")
    full = json.loads(result.read_text())
    for code in (1, 0):
        result.write_text(json.dumps({"harness_exit_code": code, "predictions_path": full["predictions_path"],
                                      "run_id": full["run_id"]}, indent=2))
        exp = (await scan(root))["swe-bench-verified-mini"]
        t = only_trial(exp)
        assert exp.state == State.failed and t.status == TrialStatus.errored
        assert (exp.counts.valid, exp.counts.errored, exp.score) == (0, 1, None)
        assert t.exception_type == "HarnessReportMissing" and f"harness exit code {code}" in str(t.exception_message)
        assert str(exp.task.reason).startswith("exited 0 without a SWE-bench harness report")
        report = audit_experiment(exp, now=NOW)
        assert report.verdict != "finalize" and report.check("results_file").status.value == "fail"
    result.write_text(json.dumps(full))  # the report merged in: a result
    exp = (await scan(root))["swe-bench-verified-mini"]
    assert exp.state == State.finished and only_trial(exp).swebench["resolved"] == 4


async def test_an_unreadable_results_file_is_a_problem_not_a_crash(root: Path) -> None:
    task = root / "gsm8k-accuracy"
    result = next(task.glob("outputs/*/results/fake-model/gsm8k.json"))
    result.write_text('{"accuracy": 50.0')  # torn
    snap = await source(root).scan()
    exp = next(e for e in snap.experiments if e.id == "gsm8k-accuracy")
    assert exp.state == State.failed
    assert any("unreadable results file" in e.message for e in snap.errors)


async def test_rows_of_the_task_table_give_the_other_states(root: Path) -> None:
    table = TaskTable(root / LOCAL_TABLE, LOCAL, str(root))
    base = dict(where=LOCAL, task_root=str(root), suite="gsm8k", model="m", api_base="http://h:1/v1",
                created_at=NOW - timedelta(hours=1))
    table.put(TaskRow(id="asked", **base))  # type: ignore[arg-type]
    table.put(TaskRow(id="ready", max_out_len=4096, batch_size=8, **base))  # type: ignore[arg-type]
    table.put(TaskRow(id="stuck", max_out_len=4096, batch_size=8, preflight=[
        PreflightStep(step="SSH reachable", ok=True, evidence="ok"),
        PreflightStep(step="source dir present", ok=False, evidence="no AISBench source dir /opt/x on h")],
        **base))  # type: ignore[arg-type]
    table.put(TaskRow(id="gone", max_out_len=4096, batch_size=8, launched_at=NOW - timedelta(minutes=50),
                      **base))  # type: ignore[arg-type]
    exps = await scan(root)
    got = {k: (e.state.value, e.state_raw) for k, e in exps.items() if k in ("asked", "ready", "stuck", "gone")}
    assert got == {"asked": ("needs_input", "needs_input"), "ready": ("pending", "pending"),
                   "stuck": ("blocked", "blocked"), "gone": ("removed", "removed")}
    assert exps["stuck"].task.reason == ("preflight failed at 'source dir present': no AISBench source dir /opt/x "
                                         "on h")
    assert "max-out-len and batch-size not given" in str(exps["asked"].task.reason)
    assert exps["asked"].counts.expected is None  # the datasets are known from the run's own dumped config
    report = audit_experiment(exps["stuck"], now=NOW)
    assert report.check("preflight").status.value == "fail" and report.verdict == "launch"
    assert audit_experiment(exps["asked"], now=NOW).check("params").remediation == "aisbench_launch"


async def test_trials_view_reads_a_dataset_files_under_stable_names(root: Path) -> None:
    src = source(root)
    snap = await src.scan()
    exp = next(e for e in snap.experiments if e.id == "perf-gsm8k")
    t = only_trial(exp)  # type: ignore[arg-type]
    base = f"{exp.path}/{t.path}"
    fs = src.fs()
    assert b'"Total Requests"' in await fs.read_regular(f"{base}/result.json", 1 << 20)
    assert (await fs.read_regular(f"{base}/summary.txt", 1 << 20)).startswith(b"Performance Parameters,")
    assert b"Task [fake-model/gsm8k]" in await fs.read_regular(f"{base}/infer.log", 1 << 20)
    assert b"evaldesk: start" in await fs.read_regular(f"{base}/run.log", 1 << 20)
    assert await fs.stat(f"{base}/eval.log") is None  # perf runs have no eval stage
    view = await source_results(src, exp)
    assert view is not None and [p.title for p in view.plots] == ["Latency percentiles · fake-model/gsm8k"]
    [ttft] = [ln for ln in view.plots[0].lines if ln.label.startswith("TTFT")]
    assert ttft.values == [t.perf_stats["TTFT"][k] for k in ("Median", "P75", "P90", "P99")]


async def test_evidence_of_a_failed_dataset_has_the_traceback(root: Path) -> None:
    src = source(root)
    snap = await src.scan()
    exp = next(e for e in snap.experiments if e.id == "gsm8k-server-down")
    ev = await src.evidence(exp, exp.trials[0])
    assert ev.exception_type == "TINFER-RUNTIME-001"
    assert ev.traceback and ev.traceback.startswith("Traceback") and "warm_up" in ev.traceback


async def test_a_finished_task_is_not_read_again_until_it_changes(root: Path) -> None:
    src = source(root)
    await src.scan()
    result = next((root / "gsm8k-accuracy").glob("outputs/*/results/fake-model/gsm8k.json"))
    result.write_text('{"accuracy": 75.0}')
    exp = next(e for e in (await src.scan()).experiments if e.id == "gsm8k-accuracy")
    assert exp.score == 0.5  # unchanged exit code and run.log: the cached reading
    with (root / "gsm8k-accuracy" / "run.log").open("a") as fh:
        fh.write("regraded\n")
    exp = next(e for e in (await src.scan()).experiments if e.id == "gsm8k-accuracy")
    assert exp.score == 0.75


def test_a_folder_of_task_roots_and_harbor_jobs_opens_one_source_per_kind(tmp_path: Path) -> None:
    from services.aisbench.demo import write_demo
    from services.core.times import DEMO_NOW
    from tests.support.harbor_factory import healthy_job

    healthy_job(tmp_path / "demo", n_tasks=2, n_rep=1).write()
    write_demo(tmp_path / "demo", DEMO_NOW)
    kinds = sorted(s.kind for s in open_sources(str(tmp_path / "demo"), Config()))
    assert kinds == ["aisbench", "harbor"]


async def test_a_runbook_agent_task_dir_on_this_machine_is_found_and_read(tmp_path: Path) -> None:
    # eval_run.py's agent layout: a whole config.py, run.sh, bootstrap.sh, aisbench.log — no cfg/
    task = tmp_path / "root" / "20261130_183900_ab12"
    shutil.copytree(Path(__file__).resolve().parents[2] / "fixtures" / "aisbench" / "task_root" /
                    "swe-bench-verified-mini" / "outputs", task / "outputs")
    (task / "config.py").write_text("models = []\n")
    (task / "run.sh").write_text("#!/bin/bash\n")
    (task / "bootstrap.sh").write_text("#!/bin/bash\n")
    (task / "aisbench.log").write_text("[ais_bench] done\n")
    (task / "exit_code").write_text("0\n")
    exps = await scan(tmp_path / "root")
    exp = exps["20261130_183900_ab12"]
    assert exp.state == State.finished and exp.task.run_log == "aisbench.log"
    assert [t.trial_name for t in exp.trials] == ["fake-model/swe_bench_verified_mini"]
