"""The preflight step by step, launch plans in host and docker mode, the key that never leaves
the remote config, and requests refused with a clear reason. Commands run for real on this
machine (the task root is local); `docker` and `ais_bench` are stand-ins on PATH."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.aisbench import actions
from services.aisbench.formats import HostEntry
from services.aisbench.hosts import HostsError, parse_hosts
from services.aisbench.preflight import check_api, run_preflight
from services.aisbench.source import AISBenchSource
from services.core.config import Config, ConfigError, load_config
from services.core.journal import Journal
from services.core.plain import dump
from services.core.registry import open_sources
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.errors import StepFailed, WriteRefused
from services.transport.process import LocalRunner
from tests.support.ais_bench_standin import install
from tests.support.openai_server import FakeOpenAI

KEY = "sk-actions-test-77aa88bb99cc"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

DOCKER = """#!/bin/sh
echo "$@" >> "{log}"
case "$1 $2" in
  "image inspect") [ "$5" = "ais-bench:3.1" ] && {{ echo sha256:4f1c2a9e0b7d11; exit 0; }}
                   echo "Error: No such image: $5" >&2; exit 1;;
  "run -d") echo 9c1f0e; exit 0;;
  "exec -d") shift 3; setsid -f nohup "$@" >/dev/null 2>&1 </dev/null; exit 0;;
  "start "*) exit 0;;
esac
exit 2
"""


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI(api_key=KEY, models_need_key=False).start()
    yield server
    server.stop()


@pytest.fixture
def host_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    install(bin_dir)
    docker = bin_dir / "docker"
    docker.write_text(DOCKER.format(log=tmp_path / "docker.log"))
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def local_source(root: Path, entry: HostEntry | None = None) -> AISBenchSource:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".evaldesk-tasks.json").write_text('{"tasks": []}')
    [src] = [s for s in open_sources(str(root), Config()) if s.kind == "aisbench"]
    assert isinstance(src, AISBenchSource)
    if entry is not None:
        src.host_entry = entry
    return src


async def test_preflight_steps_in_order_with_evidence(tmp_path: Path, model: FakeOpenAI, host_bin: Path) -> None:
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    host = HostEntry(name="h", host="local", benchmark_src=str(src_dir), task_root=str(tmp_path / "new" / "root"))
    pf = await run_preflight(LocalRunner(), host, host.task_root, model.base_url, "fake-model")
    assert pf.ok and pf.max_model_len == 32768 and pf.served == ["fake-model"]
    assert [(s.step, s.ok) for s in pf.steps] == [("SSH reachable", True), ("image/environment present", True),
                                                  ("source dir present", True),
                                                  ("model API healthy (from the eval host)", True)]
    assert str(host_bin / "ais_bench") in pf.steps[1].evidence
    assert f"task root will be made under {tmp_path}" in pf.steps[2].evidence

    other = await run_preflight(LocalRunner(), host, host.task_root, model.base_url, "another-model")
    assert not other.ok and other.failed is not None
    assert other.failed.evidence.endswith("serves fake-model, not another-model")


async def test_preflight_names_what_is_missing(tmp_path: Path, model: FakeOpenAI, host_bin: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    docker_host = HostEntry(name="h", host="local", image="ais-bench:9.9", benchmark_src=str(tmp_path / "nope"),
                            task_root=str(tmp_path))
    pf = await run_preflight(LocalRunner(), docker_host, str(tmp_path), "http://127.0.0.1:9/v1", None)
    failed = {s.step: s.evidence for s in pf.steps if not s.ok}
    assert failed["image/environment present"].startswith("image ais-bench:9.9 not on this machine: Error: No such")
    assert failed["source dir present"] == f"no AISBench source dir {tmp_path / 'nope'} on this machine"
    assert "GET http://127.0.0.1:9/v1/models from this machine failed" in failed[
        "model API healthy (from the eval host)"]
    bare = tmp_path / "bare-bin"  # a host with a shell and coreutils, but no ais_bench and no curl
    bare.mkdir()
    for tool in ("sh", "true", "test", "dirname"):
        (bare / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    monkeypatch.setenv("PATH", str(bare))
    host = HostEntry(name="h", host="local", benchmark_src=str(tmp_path), task_root=str(tmp_path))
    pf = await run_preflight(LocalRunner(), host, str(tmp_path), model.base_url, None)
    failed = {s.step: s.evidence for s in pf.steps if not s.ok}
    assert failed["image/environment present"] == "ais_bench not found on the PATH of this machine"
    assert failed["model API healthy (from the eval host)"] == "curl is not installed on this machine"


async def test_a_server_that_wants_the_key_answers_401_and_that_is_healthy() -> None:
    server = FakeOpenAI(api_key=KEY).start()
    try:
        step, max_len, _ = await check_api(LocalRunner(), server.base_url, "fake-model")
    finally:
        server.stop()
    assert step.ok and "→ 401" in step.evidence and max_len is None
    assert KEY not in step.evidence


async def wait_for(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {path}")


async def test_docker_mode_launch_runs_in_the_tasks_own_container(tmp_path: Path, model: FakeOpenAI,
                                                                  host_bin: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISBENCH_API_KEY", KEY)
    root = tmp_path / "root"
    entry = HostEntry(name="eval-d", host="local", image="ais-bench:3.1", benchmark_src=str(tmp_path),
                      task_root=str(root))
    src = local_source(root, entry)
    config = Config()
    tid = (await actions.new_task(src, config, suite_name="gsm8k", model="fake-model", api_base=model.base_url,
                                  max_out_len=2048, batch_size=4, api_key_env="AISBENCH_API_KEY", task_id="d1",
                                  now=NOW)).id
    exp = next(e for e in (await src.scan()).experiments if e.id == tid)
    plan = await registry.plan("aisbench_launch", exp, src, config, NOW)
    assert plan.blocked is None, plan.preview
    commands = [s.args["argv"] for s in plan.steps if s.kind == "external" and s.handler == "command"]
    assert ["docker", "run", "-d", "--name", "ais-bench-eval-d1", "--network", "host", "-v", "/home:/home",
            "-v", "/data:/data", "-v", "/tmp:/tmp", "-v", "/mnt:/mnt", "-v",
            "/var/run/docker.sock:/var/run/docker.sock", "ais-bench:3.1", "sleep", "infinity"] in commands
    assert commands[-1] == ["docker", "exec", "-d", "ais-bench-eval-d1", "bash", f"{root}/d1/run.sh"]
    assert f"docker exec -d ais-bench-eval-d1 bash {root}/d1/run.sh" in "\n".join(plan.preview)
    journal = Journal(tmp_path / "journal.jsonl")
    record = await registry.apply("aisbench_launch", plan, exp.id, src, config, WritePath(journal))
    assert record.status == "applied"
    assert await wait_for(root / "d1" / "exit_code") == "0"
    assert "image inspect --format {{.Id}} ais-bench:3.1" in (tmp_path / "docker.log").read_text()
    exp = next(e for e in (await src.scan()).experiments if e.id == tid)
    assert exp.state.value == "finished" and exp.score == 0.5
    assert KEY.encode() not in (tmp_path / "journal.jsonl").read_bytes()
    assert KEY not in json.dumps(dump(plan, json=True))


async def test_a_missing_key_variable_stops_the_launch_and_names_it(tmp_path: Path, model: FakeOpenAI,
                                                                    host_bin: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    root = tmp_path / "root"
    src = local_source(root)
    config = Config()
    await actions.new_task(src, config, suite_name="gsm8k", model="fake-model", api_base=model.base_url,
                           max_out_len=2048, batch_size=4, api_key_env="NO_SUCH_KEY_VAR", task_id="k1", now=NOW)
    exp = next(e for e in (await src.scan()).experiments if e.id == "k1")
    plan = await registry.plan("aisbench_launch", exp, src, config, NOW)
    with pytest.raises(StepFailed) as err:
        await registry.apply("aisbench_launch", plan, exp.id, src, config, WritePath(Journal(tmp_path / "j")))
    assert "the environment variable NO_SUCH_KEY_VAR is not set here" in str(err.value)
    assert not (root / "k1" / "run.sh").exists() and not (root / "k1" / "exit_code").exists()
    with pytest.raises(WriteRefused, match="read-only"):
        await WritePath(read_only=True).apply(plan, registry.context("aisbench_launch", src, config))


async def test_requests_refused_with_a_reason(tmp_path: Path) -> None:
    src = local_source(tmp_path / "root")
    config = Config()
    ok = dict(suite_name="gsm8k", model="m", api_base="http://h:8000/v1", max_out_len=None, batch_size=None)
    with pytest.raises(WriteRefused, match="unknown suite 'gsm9k'"):
        await actions.new_task(src, config, **{**ok, "suite_name": "gsm9k"})  # type: ignore[arg-type]
    with pytest.raises(WriteRefused, match="is not an http"):
        await actions.new_task(src, config, **{**ok, "api_base": "h:8000"})  # type: ignore[arg-type]
    with pytest.raises(WriteRefused, match="task id"):
        await actions.new_task(src, config, **ok, task_id="../../etc")  # type: ignore[arg-type]
    with pytest.raises(WriteRefused, match="needs --num-prompts"):
        await actions.new_task(src, config, **{**ok, "suite_name": "perf_synthetic"})  # type: ignore[arg-type]
    await actions.new_task(src, config, **ok, task_id="x1")  # type: ignore[arg-type]
    with pytest.raises(WriteRefused, match="already in the task table"):
        await actions.new_task(src, config, **ok, task_id="x1")  # type: ignore[arg-type]
    exp = next(e for e in (await src.scan()).experiments if e.id == "x1")
    with pytest.raises(WriteRefused, match="over the server's max-model-len"):
        row = await src.row("x1")
        assert row is not None
        await src.put_row(row.model_copy(update={"max_model_len": 4096}))
        await actions.provide_inputs(exp, src, config, {"max_out_len": 8192, "batch_size": 4})
    plan = await actions.plan_launch(exp, src, config, NOW)  # still needs input: previewed, never applied
    assert plan.blocked == "needs input: max-out-len and batch-size" and not plan.steps
    with pytest.raises(WriteRefused, match="has no task dir: launch it instead"):
        await actions.plan_resume(exp, src, config, NOW)


def test_hosts_file_forms_and_errors() -> None:
    entry = {"host": "10.0.0.5", "benchmark_src": "/opt/ais", "task_root": "/tmp/ais"}
    assert [h.name for h in parse_hosts({"eval-a": entry}, "f")] == ["eval-a"]
    assert [h.name for h in parse_hosts([entry], "f")] == ["10.0.0.5"]
    assert [h.name for h in parse_hosts({"hosts": [{**entry, "name": "b"}]}, "f")] == ["b"]
    [h] = parse_hosts(entry, "f")
    assert h.uses_docker is False and h.task_root == "/tmp/ais"
    assert parse_hosts({**entry, "image": "ais:1"}, "f")[0].uses_docker
    with pytest.raises(HostsError, match=r"hosts.json: host 'bad': benchmark_src: Field required"):
        parse_hosts({"bad": {"host": "x"}}, "~/.ais-bench-eval/hosts.json")


def test_config_section_is_checked(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[aisbench]\nhosts_file = "/x/hosts.json"\napi_key_env = "K"\n')
    assert load_config(cfg, environ={}).aisbench.api_key_env == "K"
    cfg.write_text('[aisbench]\napi_key = "sk-do-not-store"\n')
    with pytest.raises(ConfigError, match=r"unknown key 'aisbench\.api_key'"):
        load_config(cfg, environ={})


RUNBOOK_SUITES = ("gsm8k", "mmlu", "ceval", "math500", "humaneval", "mmlu_pro", "longbenchv2", "aime2024",
                  "aime2025", "aime2026", "gpqa", "livecodebench", "perf_synthetic", "perf_gsm8k", "perf_sharegpt",
                  "swe_bench_verified", "swe_bench_verified_mini", "swe_bench_multilingual", "terminal_bench_2",
                  "terminal_bench_2_mini", "tau2_bench", "mmmu")


def test_every_suite_of_the_runbook_renders_a_config_the_tool_reads() -> None:
    import ast

    from services.aisbench import agentcfg
    from services.aisbench.formats import TaskMeta
    from services.aisbench.runconfig import parse_run_config
    from services.aisbench.taskdir import SUITES, render_config

    host = HostEntry(host="h", benchmark_src="/s", agent_datasets={
        "verified": "/d/v", "verified_mini": "/d/vm", "multilingual": "/d/ml", "terminal_bench_2": "/d/tb",
        "terminal_bench_2_mini": "/d/tbm"})
    meta = TaskMeta(id="t", model="qwen3", api_base="http://10.0.0.1:8000", max_out_len=4096, batch_size=8)
    abbrs = {}
    for name in RUNBOOK_SUITES:
        s = SUITES[name]
        if s.mode == "agent":
            text = agentcfg.render(s, meta, host)
            abbrs[name] = parse_run_config(text).datasets
            assert '"http://10.0.0.1:8000/v1"' in text  # agent configs want the /v1
        else:
            text = render_config(s)
            # ais_bench/benchmark/configs/datasets/<module>.py and its list variable
            assert f"from ais_bench.benchmark.configs.datasets.{s.module} import {s.variable}" in text
        ast.parse(text)
    assert abbrs == {"swe_bench_verified": ["swe_bench_verified"], "swe_bench_verified_mini":
                     ["swe_bench_verified_mini"], "swe_bench_multilingual": ["swe_bench_multilingual"],
                     "terminal_bench_2": ["harbor_terminal-bench-2"], "terminal_bench_2_mini":
                     ["harbor_terminal-bench-2"], "tau2_bench": ["tau2_bench_airline"]}
    assert SUITES["mmlu_pro"].module == "mmlu_pro.mmlu_pro_gen_0_shot_str"
    assert SUITES["livecodebench"].variable == "LCB_datasets"
    assert SUITES["longbenchv2"].variable == "LongBenchv2_datasets"


async def test_an_agent_suite_launches_with_its_whole_config(tmp_path: Path, model: FakeOpenAI, host_bin: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from services.aisbench.runconfig import parse_run_config

    monkeypatch.setenv("AISBENCH_API_KEY", KEY)
    root = tmp_path / "root"
    entry = HostEntry(name="eval-d", host="local", image="ais-bench:3.1", benchmark_src=str(tmp_path),
                      task_root=str(root))
    src = local_source(root, entry)
    config = Config()
    await actions.new_task(src, config, suite_name="swe_bench_verified_mini", model="fake-model",
                           api_base=model.base_url, max_out_len=32768, batch_size=2, api_key_env="AISBENCH_API_KEY",
                           task_id="a1", now=NOW)
    exp = next(e for e in (await src.scan()).experiments if e.id == "a1")
    with pytest.raises(WriteRefused, match=r"agent_datasets\.verified_mini"):
        await registry.plan("aisbench_launch", exp, src, config, NOW)  # the host's data path is never guessed
    src.host_entry = entry.model_copy(update={"agent_datasets": {"verified_mini": "/data/swe/verified_mini"}})
    exp = next(e for e in (await src.scan()).experiments if e.id == "a1")
    plan = await registry.plan("aisbench_launch", exp, src, config, NOW)
    assert plan.blocked is None, plan.preview
    assert plan.meta["ais_bench"] == ["ais_bench", f"{root}/a1/cfg/config.py", "--work-dir", f"{root}/a1/outputs"]
    record = await registry.apply("aisbench_launch", plan, exp.id, src, config,
                                  WritePath(Journal(tmp_path / "journal.jsonl")))
    assert record.status == "applied"
    cfg = root / "a1" / "cfg" / "config.py"
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600 and KEY in cfg.read_text()
    assert not (root / "a1" / "cfg" / "models").exists()
    run = parse_run_config(cfg.read_text())
    assert (run.models, run.datasets) == (["swebench"], ["swe_bench_verified_mini"])
    assert '"/data/swe/verified_mini"' in cfg.read_text()
    assert KEY not in json.dumps(dump(plan, json=True))
    assert KEY.encode() not in (tmp_path / "journal.jsonl").read_bytes()


def test_the_runbooks_hosts_file_and_run_sh_as_its_scripts_write_them() -> None:
    from services.aisbench import runbook

    # common.py's hosts.json: keyed by host, named by alias, the perf tokenizer as default_tokenizer
    [h] = parse_hosts({"hosts": {"90.90.122.21": {
        "host": "90.90.122.21", "port": 22, "user": "root", "alias": "eval-main", "image": "aisbench-swe:20260630",
        "benchmark_src": "/home/b", "task_root": "/tmp/ais-bench-eval", "default_tokenizer": "/home/weight/q"}}},
        "hosts.json")
    assert (h.name, h.tokenizer_path, h.uses_docker) == ("eval-main", "/home/weight/q", True)
    line = ("ais_bench --config-dir /t/x/cfg --models api_model --datasets gsm8k_gen_4_shot_cot_chat_prompt "
            "--merge-ds --dump-eval-details --work-dir /t/x/outputs --debug")
    run_sh = f"#!/bin/bash\nset -o pipefail\ncd /home/b\n{line} 2>&1 | tee /t/x/aisbench.log\n"
    again = runbook.with_reuse(run_sh, "20261130_183900")
    assert f"{line} --reuse 20261130_183900 2>&1 | tee /t/x/aisbench.log" in again
    assert runbook.with_reuse(again, "20261201_000000").count("--reuse") == 1  # one --reuse, the newest
    assert runbook.with_reuse(again, None) == run_sh  # perf: measure again
    with pytest.raises(ValueError, match="no `ais_bench"):
        runbook.with_reuse("#!/bin/bash\necho hi\n", "x")


async def test_a_docker_that_cannot_answer_is_said_not_taken_for_a_dead_task(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from services.aisbench.liveness import in_container
    from tests.support.docker_standin import install as install_docker

    install_docker(tmp_path / "bin", tmp_path / "state", [])
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    alive, why = await in_container(LocalRunner(), "ais-bench-eval-x", 4242)
    assert alive is False and "is gone" in why and "No such object" in why
    (tmp_path / "bin" / "docker").write_text(
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
        "Is the docker daemon running?' >&2\nexit 1\n")
    alive, why = await in_container(LocalRunner(), "ais-bench-eval-x", 4242)
    assert alive is None and "Cannot connect to the Docker daemon" in why
