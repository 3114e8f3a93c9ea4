"""Launch, preflight, status and resume of AISBench tasks end to end: `evaldesk --batch` in a
subprocess, a real SSH server on loopback (the eval host), the fake OpenAI server on loopback
(the model server, reached FROM the eval host by curl) and a stand-in `ais_bench` on the
host's PATH that writes the documented outputs."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ais_bench_standin import install
from tests.support.docker_standin import install as install_docker
from tests.support.openai_server import FakeOpenAI
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server

ROOT = Path(__file__).resolve().parents[3]
KEY = "sk-evaldesk-test-9f8e7d6c5b4a"
KEY_ENV = "AISBENCH_TEST_KEY"
IMAGE = "aisbench-swe:20260630"


@dataclass
class EvalHost:
    server: InProcessSSHServer
    model: FakeOpenAI
    config: Path
    task_root: Path
    tmp: Path
    runs: list[subprocess.CompletedProcess[str]]

    async def evaldesk(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "tui.cli", "--config", str(self.config), *args]
        p = await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
        self.runs.append(p)
        return p

    async def wait_exit_code(self, task_id: str, timeout: float = 40) -> str:
        path = self.task_root / task_id / "exit_code"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists() and path.read_text().strip():
                return path.read_text().strip()
            await asyncio.sleep(0.2)
        log = self.task_root / task_id / "run.log"
        raise AssertionError(f"{task_id}: no exit code after {timeout}s; run.log: "
                             f"{log.read_text() if log.exists() else '-'}")


@pytest.fixture
async def host(ssh_server: InProcessSSHServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
               ) -> AsyncIterator[EvalHost]:
    bin_dir = tmp_path / "host-bin"
    install(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(KEY_ENV, KEY)
    src = tmp_path / "eval-host" / "ais_bench_src"
    src.mkdir(parents=True)
    task_root = tmp_path / "eval-host" / "tasks"
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps({"eval-a": {
        "host": "127.0.0.1", "port": ssh_server.port, "identity_file": str(ssh_server.client_key_path),
        "known_hosts": str(ssh_server.known_hosts_path), "image": "", "benchmark_src": str(src),
        "task_root": str(task_root)}}))
    config = tmp_path / "config.toml"
    config.write_text(f'ssh_config = "{ssh_server.ssh_config_path}"\njournal_path = "{tmp_path / "journal.jsonl"}"\n'
                      f'[aisbench]\nhosts_file = "{hosts}"\ntasks_file = "{tmp_path / "evaldesk-tasks.json"}"\n')
    model = FakeOpenAI(api_key=KEY, models_need_key=False).start()
    try:
        yield EvalHost(ssh_server, model, config, task_root, tmp_path, [])
    finally:
        model.stop()


def sm_lines(p: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    return [json.loads(ln.split("=", 1)[1]) for ln in p.stderr.splitlines() if ln.startswith("__SM_PROGRESS__=")]


def final(p: subprocess.CompletedProcess[str]) -> dict[str, object]:
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1, p.stdout  # the protocol: one final JSON on stdout
    data = json.loads(lines[0])
    assert isinstance(data, dict)
    return data


def no_key_here(h: EvalHost) -> None:
    """The key is nowhere on this machine's side: outputs, journal, records, the task table."""
    for p in h.runs:
        assert KEY not in p.stdout and KEY not in p.stderr
    state = Path(os.environ["XDG_STATE_HOME"])
    for base in (state, h.tmp / "journal.jsonl", h.tmp / "evaldesk-tasks.json"):
        files = [base] if base.is_file() else [f for f in base.rglob("*") if f.is_file()] if base.exists() else []
        for f in files:
            assert KEY.encode() not in f.read_bytes(), f


async def test_launch_needs_input_then_preflight_then_runs_to_finished(host: EvalHost) -> None:
    h = host
    url = h.model.base_url
    # 1. no max-out-len / batch size: needs_input, with the runbook's guidance and the server's real bound
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--suite", "gsm8k", "--model", "fake-model",
                         "--api-base", url, "--api-key-env", KEY_ENV, "--task-id", "t1", "--progress", "sm")
    out = final(p)
    assert p.returncode == 1 and out["ok"] is False and out["status"] == "needs_input", p.stderr
    ask = {a["name"]: a for a in out["ask"]}  # type: ignore[union-attr]
    assert set(ask) == {"max_out_len", "batch_size"}
    assert "max-model-len 32768: at most 24576" in ask["max_out_len"]["guidance"]
    assert ask["max_out_len"]["suggested"] == 24576
    assert "max-num-seqs" in ask["batch_size"]["guidance"]
    assert not (h.task_root / "t1").exists()
    p = await h.evaldesk("--batch", "list", "aisbench+ssh://eval-a", "--format", "json")
    [row] = json.loads(p.stdout)["experiments"]
    assert (row["id"], row["state"]) == ("t1", "needs_input")

    # 2. the dry run: each preflight step reported from the eval host, nothing written there
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--reuse", "t1", "--max-out-len", "2048",
                         "--batch-size", "4", "--progress", "sm")
    out = final(p)
    assert p.returncode == 0 and out["ok"] is True and out["status"] == "planned", (p.stdout, p.stderr)
    steps = [s["step"] for s in out["preflight"]]  # type: ignore[union-attr]
    assert steps == ["SSH reachable", "image/environment present", "source dir present",
                     "model API healthy (from the eval host)"]
    assert all(s["ok"] for s in out["preflight"])  # type: ignore[union-attr]
    progress = [str(x["message"]) for x in sm_lines(p)]
    reported = [re.match(r"preflight \d/4: ([^:]+): (ok|FAIL)", m) for m in progress]
    assert [r.group(1) for r in reported if r] == steps
    assert any("curl" in c for c in h.server.commands)  # the API was checked on the host, with curl
    assert out["command"] == ["setsid", "-f", "nohup", "bash", f"{h.task_root}/t1/run.sh"]
    assert f"{h.task_root}/t1" in "\n".join(out["preview"])  # type: ignore[arg-type]
    assert not (h.task_root / "t1").exists()

    # 3. apply: the task dir is written on the host and run.sh runs detached; the stand-in finishes it
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--reuse", "t1", "--apply", "--progress", "sm")
    out = final(p)
    assert p.returncode == 0 and out["ok"] is True and out["status"] == "running", (p.stdout, p.stderr)
    assert out["record"]
    assert await h.wait_exit_code("t1") == "0"
    task = h.task_root / "t1"
    assert stat.S_IMODE(task.stat().st_mode) == 0o700
    model_cfg = task / "cfg" / "models" / "api_model.py"
    assert stat.S_IMODE(model_cfg.stat().st_mode) == 0o600
    assert KEY in model_cfg.read_text()  # the one place the key goes
    for name in ("task.json", "run.sh", "run.log", "cfg/config.py"):
        assert KEY not in (task / name).read_text(), name
    assert h.model.authorized_calls >= 4  # the run used the key; the preflight did not need it

    p = await h.evaldesk("--batch", "list", "aisbench+ssh://eval-a", "--format", "json")
    [row] = json.loads(p.stdout)["experiments"]
    assert (row["state"], row["score"], row["valid"], row["expected"]) == ("finished", 0.5, 1, 1)
    p = await h.evaldesk("--batch", "audit", "aisbench+ssh://eval-a", "--format", "json", "--progress", "sm")
    out = final(p)
    [report] = out["experiments"]  # type: ignore[misc]
    checks = {c["id"]: c for c in report["checks"]}
    assert report["verdict"] == "finalize" and out["ok"] is True and p.returncode == 0
    assert checks["results_file"]["status"] == "pass" and checks["preflight"]["status"] == "pass"
    assert "accuracy 50.00" in checks["score"]["evidence"]
    p = await h.evaldesk("--batch", "trials", "aisbench+ssh://eval-a", "--format", "json")
    [trial] = json.loads(p.stdout)["trials"]
    assert (trial["trial_name"], trial["metric"], trial["metrics"]) == ("fake-model/gsm8k", "accuracy",
                                                                         {"accuracy": 50.0})
    journal = (h.tmp / "journal.jsonl").read_text()
    assert "aisbench_launch:apply" in journal
    no_key_here(h)


async def test_exit_0_without_results_is_failed_then_resume_finishes_it(host: EvalHost,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    h = host
    url = h.model.base_url
    hold = h.tmp / "go-on"
    monkeypatch.setenv("AIS_BENCH_STANDIN_HOLD", str(hold))  # it runs until the model server is down
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--suite", "gsm8k", "--model", "fake-model",
                         "--api-base", url, "--api-key-env", KEY_ENV, "--task-id", "t2", "--max-out-len", "2048",
                         "--batch-size", "4", "--apply", "--format", "json")
    assert p.returncode == 0, (p.stdout, p.stderr)
    p = await h.evaldesk("--batch", "list", "aisbench+ssh://eval-a", "--format", "json")
    assert json.loads(p.stdout)["experiments"][0]["state"] == "running"
    h.model.stop()
    hold.write_text("")
    assert await h.wait_exit_code("t2") == "0"  # AISBench's own habit: exit 0 with nothing measured
    p = await h.evaldesk("--batch", "audit", "aisbench+ssh://eval-a", "--format", "json")
    [report] = json.loads(p.stdout)["experiments"]
    assert p.returncode == 1 and report["state"] == "failed" and report["verdict"] == "resume"
    checks = {c["id"]: c for c in report["checks"]}
    assert "exited 0 without a results file" in checks["finished"]["evidence"]
    assert "TINFER-RUNTIME-001" in checks["results_file"]["evidence"]
    assert checks["results_file"]["status"] == "fail"

    # resume while the model server is still down: blocked, naming what is missing; nothing runs
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--reuse", "t2", "--apply", "--format", "json")
    out = json.loads(p.stdout)
    assert p.returncode == 1 and out["status"] == "blocked" and out["action"] == "aisbench_resume"
    assert "model API healthy (from the eval host)" in out["message"]
    assert (h.task_root / "t2" / "exit_code").read_text().strip() == "0"

    # the server is back: resume carries on from the same run dir (--reuse) and finishes
    run_dirs = sorted(p.name for p in (h.task_root / "t2" / "outputs").iterdir())
    h.model = FakeOpenAI(api_key=KEY, port=h.model.port, models_need_key=False).start()
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--reuse", "t2", "--apply", "--format", "json")
    out = json.loads(p.stdout)
    assert p.returncode == 0 and out["status"] == "running", (p.stdout, p.stderr)
    assert out["command"] == ["setsid", "-f", "nohup", "bash", f"{h.task_root}/t2/run.sh", "--reuse", run_dirs[-1]]
    assert await h.wait_exit_code("t2") == "0"
    assert sorted(p.name for p in (h.task_root / "t2" / "outputs").iterdir()) == run_dirs
    assert list((h.task_root / "t2" / "attempts").glob("*/exit_code"))  # the old exit code, kept aside
    p = await h.evaldesk("--batch", "list", "aisbench+ssh://eval-a", "--format", "json")
    assert json.loads(p.stdout)["experiments"][0]["state"] == "finished"
    no_key_here(h)


async def test_a_failed_perf_task_resumes_by_measuring_again(host: EvalHost, monkeypatch: pytest.MonkeyPatch) -> None:
    h = host
    url = h.model.base_url
    hold = h.tmp / "go-on"
    monkeypatch.setenv("AIS_BENCH_STANDIN_HOLD", str(hold))
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--suite", "perf_gsm8k", "--model",
                         "fake-model", "--api-base", url, "--api-key-env", KEY_ENV, "--task-id", "p1",
                         "--max-out-len", "512", "--batch-size", "4", "--apply", "--format", "json")
    assert p.returncode == 0, (p.stdout, p.stderr)
    h.model.stop()
    hold.write_text("")
    assert await h.wait_exit_code("p1") == "0"
    p = await h.evaldesk("--batch", "list", "aisbench+ssh://eval-a", "--format", "json")
    assert json.loads(p.stdout)["experiments"][0]["state"] == "failed"
    [first] = sorted(d.name for d in (h.task_root / "p1" / "outputs").iterdir())

    h.model = FakeOpenAI(api_key=KEY, port=h.model.port, models_need_key=False).start()
    await asyncio.sleep(1.1)  # run dirs are named by the second
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--reuse", "p1", "--format", "json")
    out = json.loads(p.stdout)
    assert "measures again" in "\n".join(out["preview"]) and "--reuse" not in out["command"], out
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--reuse", "p1", "--apply", "--format", "json")
    out = json.loads(p.stdout)
    assert p.returncode == 0 and out["status"] == "running", (p.stdout, p.stderr)
    assert out["command"] == ["setsid", "-f", "nohup", "bash", f"{h.task_root}/p1/run.sh"]  # no --reuse
    assert await h.wait_exit_code("p1") == "0"
    runs = sorted(d.name for d in (h.task_root / "p1" / "outputs").iterdir())
    assert runs[0] == first and len(runs) == 2  # a new run, measured
    assert list((h.task_root / "p1" / "outputs" / runs[1] / "performances" / "fake-model").glob("gsm8k.json"))
    p = await h.evaldesk("--batch", "list", "aisbench+ssh://eval-a", "--format", "json")
    assert json.loads(p.stdout)["experiments"][0]["state"] == "finished"


async def test_preflight_failure_is_blocked_and_named(host: EvalHost) -> None:
    h = host
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--suite", "gsm8k", "--model", "fake-model",
                         "--api-base", "http://127.0.0.1:9/v1", "--task-id", "t3", "--max-out-len", "2048",
                         "--batch-size", "4", "--apply", "--progress", "sm")
    out = final(p)
    assert p.returncode == 1 and out["ok"] is False and out["status"] == "blocked"
    assert "model API healthy (from the eval host)" in str(out["message"])
    assert [s["ok"] for s in out["preflight"]] == [True, True, True, False]  # type: ignore[union-attr]
    assert not (h.task_root / "t3").exists()
    p = await h.evaldesk("--batch", "audit", "aisbench+ssh://eval-a", "--format", "json")
    [report] = json.loads(p.stdout)["experiments"]
    checks = {c["id"]: c for c in report["checks"]}
    assert report["state"] == "blocked" and checks["preflight"]["status"] == "fail"
    assert "127.0.0.1:9" in checks["preflight"]["evidence"]

    # a missing AISBench source dir is named too
    hosts = json.loads((h.tmp / "hosts.json").read_text())
    hosts["eval-a"]["benchmark_src"] = str(h.tmp / "nowhere")
    (h.tmp / "hosts.json").write_text(json.dumps(hosts))
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--reuse", "t3", "--format", "json")
    out = json.loads(p.stdout)
    assert out["status"] == "blocked" and "no AISBench source dir" in out["message"]


async def test_unreachable_host_is_blocked_at_ssh(host: EvalHost) -> None:
    h = host
    await h.server.stop()
    p = await h.evaldesk("--batch", "list", "aisbench+ssh://eval-a", "--format", "json", "--progress", "sm")
    out = final(p)
    assert p.returncode == 2 and out["ok"] is False and "127.0.0.1" in str(out["message"])


def docker_mode(h: EvalHost) -> Path:
    """The eval host as the runbook has it: an image, run.sh in the task's own container; the
    host's `docker` is a stand-in on its PATH."""
    state = h.tmp / "docker-state"
    install_docker(h.tmp / "host-bin", state, [IMAGE])
    hosts = json.loads((h.tmp / "hosts.json").read_text())
    hosts["eval-a"]["image"] = IMAGE
    (h.tmp / "hosts.json").write_text(json.dumps(hosts))
    return state


async def launch_held(h: EvalHost, task_id: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    hold = h.tmp / f"go-on-{task_id}"
    monkeypatch.setenv("AIS_BENCH_STANDIN_HOLD", str(hold))
    p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--suite", "gsm8k", "--model", "fake-model",
                         "--api-base", h.model.base_url, "--api-key-env", KEY_ENV, "--task-id", task_id,
                         "--max-out-len", "2048", "--batch-size", "4", "--apply", "--format", "json")
    out = json.loads(p.stdout)
    assert p.returncode == 0 and out["status"] == "running", (p.stdout, p.stderr)
    assert out["command"] == ["docker", "exec", "-d", f"ais-bench-eval-{task_id}", "bash",
                              f"{h.task_root}/{task_id}/run.sh"]
    pid_file = h.task_root / task_id / "pid"
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return hold


async def state_of(h: EvalHost, task_id: str) -> tuple[str, str]:
    p = await h.evaldesk("--batch", "audit", "aisbench+ssh://eval-a", "--format", "json")
    report = next(r for r in json.loads(p.stdout)["experiments"] if r["id"] == task_id)
    checks = {c["id"]: c for c in report["checks"]}
    return report["state"], checks["finished"]["evidence"]


async def test_docker_mode_a_killed_task_is_failed_not_running_forever(host: EvalHost,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    h = host
    calls = docker_mode(h) / "calls.log"
    hold = await launch_held(h, "d1", monkeypatch)
    pid = int((h.task_root / "d1" / "pid").read_text())
    state, evidence = await state_of(h, "d1")
    assert state == "running" and f"run.sh (pid {pid}) runs in its container ais-bench-eval-d1" in evidence
    assert f"exec ais-bench-eval-d1 kill -0 {pid}" in calls.read_text()
    os.killpg(pid, signal.SIGKILL)  # killed without a trace: no exit code
    await asyncio.sleep(0.3)
    state, evidence = await state_of(h, "d1")
    assert state == "failed" and f"run.sh (pid {pid}) is gone from its container ais-bench-eval-d1" in evidence
    assert not (h.task_root / "d1" / "exit_code").exists()
    hold.write_text("")


async def test_docker_mode_a_stopped_container_is_failed_and_a_finished_run_finished(
        host: EvalHost, monkeypatch: pytest.MonkeyPatch) -> None:
    h = host
    docker_mode(h)
    hold = await launch_held(h, "d2", monkeypatch)
    pid = int((h.task_root / "d2" / "pid").read_text())
    subprocess.run(["docker", "stop", "ais-bench-eval-d2"], check=True, capture_output=True)
    os.killpg(pid, signal.SIGKILL)  # what a stopped container does to what runs in it
    state, evidence = await state_of(h, "d2")
    assert state == "failed" and "its container ais-bench-eval-d2 is not running" in evidence
    subprocess.run(["docker", "rm", "-f", "ais-bench-eval-d2"], check=True, capture_output=True)
    state, evidence = await state_of(h, "d2")
    assert state == "failed" and "its container ais-bench-eval-d2 is gone" in evidence

    hold.write_text("")
    (await launch_held(h, "d3", monkeypatch)).write_text("")
    assert await h.wait_exit_code("d3") == "0"
    state, evidence = await state_of(h, "d3")
    assert state == "finished", evidence


def runbook_task(h: EvalHost, task_id: str, *, exit_code: str | None, pid: int | None, run_from: str | None,
                 category: str = "accuracy") -> dict[str, object]:
    """A task dir exactly as the runbook's eval_run.py writes one (its run.sh, bootstrap.sh,
    cfg/models/api_model.py), outputs copied from a fixture run of the real ais_bench, and its
    record for ~/.ais-bench-eval/tasks.json."""
    d = h.task_root / task_id
    (d / "cfg" / "models").mkdir(parents=True)
    (d / "cfg" / "models" / "api_model.py").write_text(
        'from ais_bench.benchmark.models import VLLMCustomAPIChat\n\nmodels = [\n    dict(\n        attr="service",\n'
        '        type=VLLMCustomAPIChat,\n        abbr="fake-model",\n        path="",\n        model="fake-model",\n'
        f'        stream=False,\n        api_key="{KEY}",\n        url="{h.model.base_url.removesuffix("v1")}",\n'
        '        max_out_len=2048,\n        batch_size=4,\n    )\n]\n')
    src = h.tmp / "eval-host" / "ais_bench_src"
    cmd = (f"ais_bench --config-dir {d}/cfg --models api_model --datasets gsm8k_gen_4_shot_cot_chat_prompt "
           f"--merge-ds --dump-eval-details --work-dir {d}/outputs --debug")
    (d / "run.sh").write_text(
        f"#!/bin/bash\n# ais-bench-eval task {task_id}\nset -o pipefail\ntrap 'echo $? > {d}/exit_code' EXIT\n"
        f"export PATH=/usr/local/python3.11.10/bin:$PATH\nexport TORCH_DEVICE_BACKEND_AUTOLOAD=0\ncd {src}\n"
        f"{cmd} 2>&1 | tee {d}/aisbench.log\n")
    (d / "bootstrap.sh").write_text(f"#!/bin/bash\nsetsid bash {d}/run.sh < /dev/null > /dev/null 2>&1 &\n"
                                    f"echo $! > {d}/bootstrap.pid\n")
    (d / "aisbench.log").write_text("[ais_bench] [INFO] Current exp folder\n")
    if exit_code is not None:
        (d / "exit_code").write_text(exit_code + "\n")
    if pid is not None:
        (d / "bootstrap.pid").write_text(f"{pid}\n")
    if run_from is not None:
        fixture = ROOT / "tests" / "fixtures" / "aisbench" / "task_root" / run_from / "outputs"
        shutil.copytree(fixture, d / "outputs")
    return {"task_id": task_id, "host": "127.0.0.1", "container": f"ais-bench-eval-{task_id}", "task_dir": str(d),
            "work_dir": f"{d}/outputs", "suite": "gsm8k", "category": category, "api_base": h.model.base_url,
            "model": "fake-model", "num_prompts": None, "batch_size": 4, "step_limit": None, "max_out_len": 2048,
            "tokenizer_path": None, "reuse_of": None, "started_at": "2026-11-30T18:39:00+0800", "status": "running"}


async def test_tasks_of_the_runbooks_own_scripts_are_read_with_their_states_and_resumed(
        host: EvalHost, monkeypatch: pytest.MonkeyPatch) -> None:
    h = host
    state = docker_mode(h)
    hosts = json.loads((h.tmp / "hosts.json").read_text())
    hosts["eval-a"]["alias"] = "eval-a"  # the runbook's own hosts.json: keyed by host, named by alias
    (h.tmp / "hosts.json").write_text(json.dumps({"hosts": {"127.0.0.1": hosts["eval-a"]}}))
    live = subprocess.Popen(["sleep", "120"], start_new_session=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        records = [
            runbook_task(h, "20261130_183900_ab12", exit_code="0", pid=None, run_from="gsm8k-accuracy"),
            runbook_task(h, "20261130_184000_cd34", exit_code=None, pid=live.pid, run_from=None),
            runbook_task(h, "20261130_184100_ef56", exit_code=None, pid=dead.pid, run_from="gsm8k-server-down"),
            runbook_task(h, "20261130_184200_aa00", exit_code="1", pid=None, run_from="gsm8k-server-down"),
        ]
        for r in records[1:3]:
            subprocess.run(["docker", "run", "-d", "--name", str(r["container"]), IMAGE, "sleep", "infinity"],
                           check=True, capture_output=True)
        gone = dict(records[0], task_id="20261129_090000_0000", task_dir=f"{h.task_root}/20261129_090000_0000")
        (h.tmp / "tasks.json").write_text(json.dumps({"version": 1, "tasks": [*records, gone]}))
        p = await h.evaldesk("--batch", "list", "aisbench+ssh://eval-a", "--format", "json")
        got = {r["id"]: r["state"] for r in json.loads(p.stdout)["experiments"]}
        assert got == {"20261130_183900_ab12": "finished", "20261130_184000_cd34": "running",
                       "20261130_184100_ef56": "failed", "20261130_184200_aa00": "failed",
                       "20261129_090000_0000": "removed"}, p.stdout
        assert f"kill -0 {live.pid}" in (state / "calls.log").read_text()

        # the killed one resumes the runbook's way: run.sh with --reuse <its run>, bootstrap.sh in its container
        tid = "20261130_184100_ef56"
        [run] = [d.name for d in (h.task_root / tid / "outputs").iterdir()]
        p = await h.evaldesk("--batch", "launch", "aisbench+ssh://eval-a", "--reuse", tid, "--apply", "--format",
                             "json")
        out = json.loads(p.stdout)
        assert p.returncode == 0 and out["status"] == "running", (p.stdout, p.stderr)
        assert out["command"] == ["docker", "exec", f"ais-bench-eval-{tid}", "bash",
                                  f"{h.task_root}/{tid}/bootstrap.sh"]
        assert f"--debug --reuse {run} 2>&1 | tee" in (h.task_root / tid / "run.sh").read_text()
        assert await h.wait_exit_code(tid) == "0", (h.task_root / tid / "aisbench.log").read_text()
        assert [d.name for d in (h.task_root / tid / "outputs").iterdir()] == [run]
        p = await h.evaldesk("--batch", "list", "aisbench+ssh://eval-a", "--format", "json")
        got = {r["id"]: r["state"] for r in json.loads(p.stdout)["experiments"]}
        assert got[tid] == "finished"
        # the runbook's table is read, never written nor copied into evaldesk's own
        assert json.loads((h.tmp / "tasks.json").read_text()) == {"version": 1, "tasks": [*records, gone]}
        own = h.tmp / "evaldesk-tasks.json"
        assert not own.exists() or tid not in own.read_text()
        no_key_here(h)
    finally:
        live.kill()
