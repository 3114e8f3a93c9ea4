"""What evaldesk writes into a task dir `<task_root>/<task-id>/` to run one AISBench task:

    task.json                 what was asked (suite, model, API base, max-out-len, batch size …;
                              the API key's env var name, never the key)
    cfg/config.py             datasets + summarizer + the model config below (read_base)
    cfg/models/api_model.py   the model config; the only file that holds the API key (mode 600
                              in a task dir of mode 700)
    run.sh                    cd to the AISBench source, log to run.log, record pid and the exit
                              code (`exit_code`, written by a trap), run ais_bench with
                              `--work-dir <task dir>/outputs`; extra arguments (`--reuse TS`)
                              pass through
    outputs/                  AISBench's work dir (formats.py)

Everything here is a pure function of the request and the host entry, so the fixture script,
the launch plan and the tests render exactly the same files.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from urllib.parse import urlsplit

from services.aisbench.formats import HostEntry, Mode, TaskMeta

KEY_PLACEHOLDER = "__EVALDESK_API_KEY__"
TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class Suite:
    name: str
    module: str  # ais_bench.benchmark.configs.datasets.<module>
    variable: str
    mode: Mode
    summarizer: str  # ais_bench.benchmark.configs.summarizers.<summarizer>
    stream: bool = False
    needs_num_prompts: bool = False


_ACC = "example"
_PERF = "perf.default_perf"

# The suites of the runbook. Composed ones name a dataset config of the tool
# (ais_bench/benchmark/configs/datasets/<module>.py) and its list variable; which datasets
# that list holds, and their abbrs, is read back from the config the run dumps
# (services.aisbench.runconfig), never kept here. Agent suites run a whole config of their
# own (services.aisbench.agentcfg), after the tool's agent example configs.
SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("gsm8k", "gsm8k.gsm8k_gen_0_shot_cot_chat_prompt", "gsm8k_datasets", "accuracy", _ACC),
    Suite("mmlu", "mmlu.mmlu_gen_0_shot_cot_chat_prompt", "mmlu_datasets", "accuracy", _ACC),
    Suite("ceval", "ceval.ceval_gen_0_shot_cot_chat_prompt", "ceval_datasets", "accuracy", _ACC),
    Suite("math500", "math.math500_gen_0_shot_cot_chat_prompt", "math_datasets", "accuracy", _ACC),
    Suite("aime2024", "aime2024.aime2024_gen_0_shot_chat_prompt", "aime2024_datasets", "accuracy", _ACC),
    Suite("aime2025", "aime2025.aime2025_gen_0_shot_chat_prompt", "aime2025_datasets", "accuracy", _ACC),
    Suite("aime2026", "aime2026.aime2026_gen_0_shot_chat_prompt", "aime2026_datasets", "accuracy", _ACC),
    Suite("gpqa", "gpqa.gpqa_gen_0_shot_cot_chat_prompt", "gpqa_datasets", "accuracy", _ACC),
    Suite("humaneval", "humaneval.humaneval_gen_0_shot", "humaneval_datasets", "accuracy", _ACC),
    Suite("mmlu_pro", "mmlu_pro.mmlu_pro_gen_0_shot_str", "mmlu_pro_datasets", "accuracy", _ACC),
    Suite("longbenchv2", "longbenchv2.longbenchv2_gen", "LongBenchv2_datasets", "accuracy", _ACC),
    Suite("livecodebench", "livecodebench.livecodebench_code_generate_lite_gen_0_shot_chat", "LCB_datasets",
          "accuracy", _ACC),
    Suite("mmmu", "mmmu.mmmu_gen", "mmmu_datasets", "accuracy", _ACC),
    Suite("perf_gsm8k", "gsm8k.gsm8k_gen_0_shot_cot_str_perf", "gsm8k_datasets", "perf", _PERF, stream=True),
    Suite("perf_sharegpt", "sharegpt.sharegpt_gen", "sharegpt_datasets", "perf", _PERF, stream=True),
    Suite("perf_synthetic", "synthetic.synthetic_gen_string", "synthetic_datasets", "perf", _PERF, stream=True,
          needs_num_prompts=True),
    # agent suites: `module` names the whole-config template (services.aisbench.agentcfg), `variable`
    # the dataset's key in the host's `agent_datasets` (its path on the host)
    Suite("swe_bench_verified", "swe_bench", "verified", "agent", ""),
    Suite("swe_bench_verified_mini", "swe_bench", "verified_mini", "agent", ""),
    Suite("swe_bench_multilingual", "swe_bench", "multilingual", "agent", ""),
    Suite("terminal_bench_2", "harbor_terminal", "terminal_bench_2", "agent", ""),
    Suite("terminal_bench_2_mini", "harbor_terminal", "terminal_bench_2_mini", "agent", ""),
    Suite("tau2_bench", "tau2", "tau2", "agent", ""),
)}

# The runbook's defaults, used only when a person says "just run it": 2048 tokens, 16-way
# accuracy, 32-way perf
DEFAULT_MAX_OUT_LEN = 2048
DEFAULT_BATCH = {"accuracy": 16, "perf": 32, "agent": 60}
HEADROOM_TOKENS = 8192  # input + output must fit max-model-len; the runbook keeps 8K for the input


class RequestError(ValueError):
    """A launch request that cannot be rendered (unknown suite, bad URL …)."""


def suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise RequestError(f"unknown suite {name!r}; evaldesk launches {', '.join(sorted(SUITES))}") from None


def check_task_id(task_id: str) -> str:
    if not TASK_ID.match(task_id):
        raise RequestError(f"task id {task_id!r}: letters, digits, '.', '_' and '-' only (≤ 128)")
    return task_id


def model_abbr(model: str) -> str:
    """A model abbr AISBench can use as a dir name."""
    abbr = re.sub(r"[^A-Za-z0-9._-]+", "-", model.strip()).strip("-.") or "model"
    return abbr[:64]


def api_url(api_base: str) -> str:
    """The `url` AISBench joins `v1/chat/completions` to: the API base without its /v1."""
    parts = urlsplit(api_base.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RequestError(f"API base {api_base!r} is not an http(s)://host:port/v1 URL")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return f"{parts.scheme}://{parts.netloc}{path}/"


def models_url(api_base: str) -> str:
    return api_url(api_base) + "v1/models"


def paths(task_root: str, task_id: str) -> dict[str, str]:
    d = posixpath.join(task_root, check_task_id(task_id))
    return {
        "dir": d, "meta": f"{d}/task.json", "cfg": f"{d}/cfg", "models": f"{d}/cfg/models",
        "config": f"{d}/cfg/config.py", "model": f"{d}/cfg/models/api_model.py", "run": f"{d}/run.sh",
        "log": f"{d}/run.log", "exit_code": f"{d}/exit_code", "pid": f"{d}/pid", "outputs": f"{d}/outputs",
    }


def render_config(s: Suite) -> str:
    return (
        "# AISBench config written by evaldesk: the datasets and summarizer of the suite, and the\n"
        "# model config beside it (cfg/models/api_model.py).\n"
        "from mmengine.config import read_base\n\n"
        "with read_base():\n"
        f"    from ais_bench.benchmark.configs.datasets.{s.module} import {s.variable}\n"
        f"    from ais_bench.benchmark.configs.summarizers.{s.summarizer} import summarizer\n"
        "    from .models.api_model import models\n\n"
        f"datasets = [*{s.variable}]\n"
    )


def render_model(s: Suite, meta: TaskMeta, tokenizer_path: str | None) -> str:
    """The model config with `KEY_PLACEHOLDER` where the key goes; the key is put in on the
    host by the write path's `aisbench_model_config` step, never here."""
    assert meta.api_base and meta.model and meta.max_out_len and meta.batch_size
    lines = [
        "# AISBench model config written by evaldesk. It holds the API key: it stays in this task dir.",
        "from ais_bench.benchmark.models import VLLMCustomAPIChat",
    ]
    if s.mode == "accuracy":
        lines.append("from ais_bench.benchmark.utils.postprocess.model_postprocessors import "
                     "extract_non_reasoning_content")
    lines += [
        "",
        "models = [",
        "    dict(",
        '        attr="service",',
        "        type=VLLMCustomAPIChat,",
        f"        abbr={json.dumps(meta.model_abbr)},",
        f"        path={json.dumps(tokenizer_path or '')},",
        f"        model={json.dumps(meta.model)},",
        f"        stream={s.stream},",
        "        request_rate=0,",
        "        retry=2,",
        f'        api_key="{KEY_PLACEHOLDER}",',
        f"        url={json.dumps(api_url(meta.api_base))},",
        f"        max_out_len={int(meta.max_out_len)},",
        f"        batch_size={int(meta.batch_size)},",
        "        trust_remote_code=False,",
        "        generation_kwargs=dict(temperature=0.01),",
    ]
    if s.mode == "accuracy":
        lines.append("        pred_postprocessor=dict(type=extract_non_reasoning_content),")
    lines += ["    )", "]", ""]
    return "\n".join(lines)


def with_key(template: str, key: str) -> str:
    """The model config with the key in it, quoted as a Python string literal."""
    return template.replace(f'"{KEY_PLACEHOLDER}"', json.dumps(key))


def ais_bench_argv(host: HostEntry, task_dir: str, s: Suite, num_prompts: int | None) -> list[str]:
    argv = [host.ais_bench, f"{task_dir}/cfg/config.py", "--work-dir", f"{task_dir}/outputs"]
    if s.mode == "perf":
        argv += ["--mode", "perf"]
    if num_prompts:
        argv += ["--num-prompts", str(int(num_prompts))]
    return argv


def render_run_sh(host: HostEntry, task_dir: str, argv: list[str]) -> str:
    """run.sh: everything it prints goes to run.log; `exit_code` is written when it ends, however
    it ends (a trap); `pid` lets a scan tell a live run from one killed without a trace."""
    q = shlex.quote
    exports = "".join(f"export {k}={q(v)}\n" for k, v in sorted(host.env.items())
                      if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k))
    return (
        "#!/usr/bin/env bash\n"
        "# An AISBench task written by evaldesk. Extra arguments (--reuse TS) go to ais_bench.\n"
        f"TASK_DIR={q(task_dir)}\n"
        'exec >>"$TASK_DIR/run.log" 2>&1 </dev/null\n'
        'rm -f "$TASK_DIR/exit_code"\n'
        'echo $$ >"$TASK_DIR/pid"\n'
        "trap 'echo $? >\"$TASK_DIR/exit_code\"' EXIT\n"
        'echo "evaldesk: start $(date -u +%Y-%m-%dT%H:%M:%SZ) pid $$ args: $*"\n'
        f"{exports}"
        f"cd {q(host.benchmark_src)} || exit 127\n"
        f"{shlex.join(argv)} \"$@\"\n"
    )


def container_name(host: HostEntry, task_id: str) -> str:
    return f"{host.container_prefix}{task_id}"


def detach_argv(host: HostEntry, task_id: str, task_dir: str, extra: list[str]) -> list[str]:
    """The command that starts run.sh and returns at once: in the task's container (docker
    exec -d) or on the host (setsid -f nohup, its output already redirected by run.sh)."""
    run = [f"{task_dir}/run.sh", *extra]
    if host.uses_docker:
        return ["docker", "exec", "-d", container_name(host, task_id), "bash", *run]
    return ["setsid", "-f", "nohup", "bash", *run]


def container_argv(host: HostEntry, task_id: str) -> list[str]:
    """The task's own container: the image, host network, the host's mounts and docker.sock,
    kept alive by `sleep infinity`. Never someone else's container."""
    argv = ["docker", "run", "-d", "--name", container_name(host, task_id), "--network", "host"]
    for m in host.mounts:
        argv += ["-v", f"{m}:{m}"]
    argv += ["-v", "/var/run/docker.sock:/var/run/docker.sock", str(host.image), "sleep", "infinity"]
    return argv


def meta_json(meta: TaskMeta) -> str:
    return json.dumps(meta.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False) + "\n"
