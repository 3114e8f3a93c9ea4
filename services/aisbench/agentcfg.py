"""The whole config of an agent suite (SWE-bench, Terminal-Bench 2, tau2-bench).

Agent suites are not composed from a dataset config: each runs one whole config, written here
from the tool's own agent examples (ais_bench/configs/swe_bench_examples/
mini_swe_agent_swe_bench_verified.py, agent_example/harbor_terminal_bench_2_task.py,
agent_example/tau2_bench_task.py), with the fields the runbook's eval_run.py sets: the model
and API base (with its /v1: LiteLLM, Harbor and tau2 want it, unlike VLLMCustomAPI's `url`),
the concurrency (instances), the step limit, and the dataset's path on the eval host — a fact
of that host, so it comes from its hosts entry (`agent_datasets`), never guessed.

The SWE-bench config holds the API key: it is rendered with `KEY_PLACEHOLDER`, and the key goes
in on the host only (services.aisbench.steps).
"""

from __future__ import annotations

import json

from services.aisbench.formats import HostEntry, TaskMeta
from services.aisbench.taskdir import KEY_PLACEHOLDER, RequestError, Suite

DEFAULT_STEP_LIMIT = 200


def agent_api_base(api_base: str) -> str:
    base = api_base.strip().rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def dataset_path(s: Suite, host: HostEntry) -> str | None:
    """The dataset's path on the host; None for a suite whose data ships with its package (tau2)."""
    if s.module == "tau2":
        return None
    path = host.agent_datasets.get(s.variable)
    if not path:
        raise RequestError(f"suite {s.name}: no path of dataset {s.variable!r} on {host.label}: set "
                           f"agent_datasets.{s.variable} in its hosts entry (the runbook keeps them per host)")
    return path


def render(s: Suite, meta: TaskMeta, host: HostEntry, step_limit: int | None = None) -> str:
    """The whole config.py of agent suite `s`. Raises RequestError when the host lacks its data."""
    q = json.dumps
    assert meta.model and meta.api_base and meta.batch_size
    api = agent_api_base(meta.api_base)
    path = dataset_path(s, host)
    head = "# AISBench agent config written by evaldesk, after the tool's own agent example.\n"
    if s.module == "swe_bench":
        return head + (
            "from ais_bench.benchmark.datasets import SWEBenchDataset\n"
            "from ais_bench.benchmark.partitioners import NaivePartitioner\n"
            "from ais_bench.benchmark.runners import LocalRunner\n"
            "from ais_bench.benchmark.tasks import SWEBenchInferTask, SWEBenchEvalTask\n"
            "from ais_bench.benchmark.summarizers import SWEBenchSummarizer\n\n"
            f"STEP_LIMIT = {int(step_limit or DEFAULT_STEP_LIMIT)}\n\n"
            "models = [\n    dict(\n        attr=\"local\",\n        abbr=\"swebench\",\n"
            "        type=\"LiteLLMChat\",\n"
            f"        model={q(meta.model)},\n        api_key=\"{KEY_PLACEHOLDER}\",\n        url={q(api)},\n"
            f"        batch_size={int(meta.batch_size)},\n"
            "        generation_kwargs=dict(temperature=0.6, top_p=0.95),\n"
            "    )\n]\n\n"
            "datasets = [\n    dict(\n        type=SWEBenchDataset,\n"
            f"        abbr={q('swe_bench_' + s.variable)},\n        path={q(path)},\n        name={q(s.variable)},\n"
            "        split=\"test\",\n        filter_spec=\"\",\n        shuffle=False,\n"
            "        step_limit=STEP_LIMIT,\n"
            "    )\n]\n\n"
            "summarizer = dict(attr=\"accuracy\", type=SWEBenchSummarizer)\n\n"
            "infer = dict(\n    partitioner=dict(type=NaivePartitioner),\n"
            "    runner=dict(type=LocalRunner, task=dict(type=SWEBenchInferTask)),\n)\n\n"
            "eval = dict(\n    partitioner=dict(type=NaivePartitioner),\n"
            "    runner=dict(type=LocalRunner, task=dict(type=SWEBenchEvalTask)),\n)\n"
        )
    if s.module == "harbor_terminal":
        out_len = int(meta.max_out_len or 4096)
        return head + (
            "from ais_bench.benchmark.tasks.custom_tasks.harbor_task import HarborTask\n"
            "from ais_bench.benchmark.tasks.base import EmptyTask\n"
            "from ais_bench.benchmark.summarizers.harbor import HarborSummarizer\n\n"
            "models = [\n    dict(\n        abbr=\"terminus-2\",\n        agent_name=\"terminus-2\",\n"
            f"        model_names=[{q('hosted_vllm/' + meta.model)}],\n"
            f"        agent_kwargs=dict(\n            api_base={q(api)},\n"
            "            model_info=dict(\n                max_input_tokens=128000,\n"
            f"                max_output_tokens={out_len},\n                input_cost_per_token=0.0,\n"
            "                output_cost_per_token=0.0,\n            ),\n"
            f"            llm_call_kwargs=dict(max_tokens={out_len}),\n        ),\n"
            "        agent_env=None,\n    )\n]\n\n"
            "datasets = [\n    dict(\n        abbr=\"harbor_terminal-bench-2\",\n        args=dict(\n"
            f"            n_attempts=1,\n            n_concurrent_trials={int(meta.batch_size)},\n"
            f"            environment_type=\"docker\",\n            environment_delete=False,\n"
            f"            path={q(path)},\n            yes=True,\n        ),\n    )\n]\n\n"
            "infer = dict(runner=dict(task=dict(type=EmptyTask)))\n\n"
            "eval = dict(runner=dict(task=dict(type=HarborTask)))\n\n"
            "summarizer = dict(attr=\"accuracy\", type=HarborSummarizer)\n"
        )
    if s.module == "tau2":
        return head + (
            "from ais_bench.benchmark.tasks.custom_tasks.tau2_bench_task import TAU2BenchTask\n"
            "from ais_bench.benchmark.tasks.base import EmptyTask\n\n"
            "models = [\n    dict(\n        abbr=\"tau2-openai-v1-chat\",\n        api_key=None,\n        agent=None,\n"
            f"        llm_agent={q('openai/' + meta.model)},\n"
            f"        llm_args_agent=dict(api_base={q(api)}, temperature=0.5),\n    )\n]\n\n"
            "datasets = [\n    dict(\n        abbr=\"tau2_bench_airline\",\n        args=dict(\n"
            "            domain=\"airline\",\n            num_trials=1,\n"
            f"            llm_user={q('openai/' + meta.model)},\n"
            f"            llm_args_user=dict(api_base={q(api)}, temperature=0.0),\n"
            f"            max_concurrency={int(meta.batch_size)},\n        ),\n    )\n]\n\n"
            "infer = dict(runner=dict(task=dict(type=EmptyTask)))\n\n"
            "eval = dict(runner=dict(task=dict(type=TAU2BenchTask)))\n\n"
            "summarizer = dict(attr=\"accuracy\")\n"
        )
    raise RequestError(f"suite {s.name}: no agent config template {s.module!r}")
