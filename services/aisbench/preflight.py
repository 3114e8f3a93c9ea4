"""The runbook's preflight, read-only, each step reported:

1. SSH reachable
2. image (docker mode) or environment (`ais_bench` on PATH) present
3. source dir present (and the task root usable)
4. model API healthy — checked FROM the eval host (`curl` there), because what matters is the
   eval host's route to the model server, not this machine's

Any failure means `blocked`, and the failing step's evidence says what is missing. Every
command is an argv run by the host's `Runner`; paths and URLs travel as data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from services.aisbench.formats import HostEntry, PreflightStep
from services.aisbench.taskdir import models_url
from services.core.source import SourceUnavailable
from services.transport.process import CommandNotFound, CommandResult, Runner

STEP_SSH = "SSH reachable"
STEP_ENV = "image/environment present"
STEP_SRC = "source dir present"
STEP_API = "model API healthy (from the eval host)"
TIMEOUT_S = 30.0


@dataclass
class Preflight:
    steps: list[PreflightStep] = field(default_factory=list)
    max_model_len: int | None = None
    served: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps) and len(self.steps) == 4

    @property
    def failed(self) -> PreflightStep | None:
        return next((s for s in self.steps if not s.ok), None)


async def run_bounded(runner: Runner, argv: list[str], timeout_s: float = TIMEOUT_S) -> CommandResult:
    """A command on the eval host whose failure to start or to answer is a result, not a raise."""
    try:
        return await runner.run(argv, timeout_s=timeout_s)
    except CommandNotFound as exc:
        return CommandResult(127, "", "", error=str(exc))
    except TimeoutError:
        return CommandResult(None, "", "", error=f"no answer within {timeout_s:g}s")


def _where(runner: Runner) -> str:
    return runner.host or "this machine"


async def check_ssh(runner: Runner) -> PreflightStep:
    try:
        res = await run_bounded(runner, ["true"])
    except SourceUnavailable as exc:
        return PreflightStep(step=STEP_SSH, ok=False, evidence=f"{exc.where}: {exc.message}")
    if res.error or res.exit_code != 0:
        return PreflightStep(step=STEP_SSH, ok=False, evidence=f"{_where(runner)}: {res.error or res.exit_code}")
    evidence = f"{runner.host} answered over SSH" if runner.host else "this machine (local, no SSH needed)"
    return PreflightStep(step=STEP_SSH, ok=True, evidence=evidence)


async def check_environment(runner: Runner, host: HostEntry) -> PreflightStep:
    if host.uses_docker:
        res = await run_bounded(runner, ["docker", "image", "inspect", "--format", "{{.Id}}", str(host.image)])
        if res.error and res.exit_code == 127:
            return PreflightStep(step=STEP_ENV, ok=False, evidence=f"docker is not installed on {_where(runner)}")
        if res.exit_code != 0:
            why = (res.stderr_tail or res.stdout_tail or res.error or "").strip().splitlines()[-1:] or ["no output"]
            return PreflightStep(step=STEP_ENV, ok=False,
                                 evidence=f"image {host.image} not on {_where(runner)}: {why[0][:200]}")
        digest = res.stdout_tail.strip()[:19]
        return PreflightStep(step=STEP_ENV, ok=True, evidence=f"image {host.image} present ({digest})")
    res = await run_bounded(runner, ["sh", "-c", 'command -v "$1"', "sh", host.ais_bench])
    found = res.stdout_tail.strip().splitlines()
    if res.exit_code != 0 or not found:
        return PreflightStep(step=STEP_ENV, ok=False,
                             evidence=f"{host.ais_bench} not found on the PATH of {_where(runner)}")
    return PreflightStep(step=STEP_ENV, ok=True, evidence=f"{host.ais_bench} at {found[-1][:200]}")


async def check_source(runner: Runner, host: HostEntry, task_root: str) -> PreflightStep:
    res = await run_bounded(runner, ["test", "-d", host.benchmark_src])
    if res.exit_code != 0:
        return PreflightStep(step=STEP_SRC, ok=False,
                             evidence=f"no AISBench source dir {host.benchmark_src} on {_where(runner)}")
    # the task root may not exist yet (a fresh /tmp): then its parent must take a new dir
    probe = await run_bounded(runner, ["sh", "-c", 'd="$1"; while [ ! -d "$d" ]; do d=$(dirname "$d"); done; '
                                            '[ -w "$d" ] && echo "$d"', "sh", task_root])
    usable = probe.stdout_tail.strip()
    if probe.exit_code != 0 or not usable:
        return PreflightStep(step=STEP_SRC, ok=False,
                             evidence=f"source dir {host.benchmark_src} present, but the task root {task_root} "
                                      f"is not writable on {_where(runner)}")
    root_note = "task root writable" if usable.rstrip("/") == task_root.rstrip("/") else f"task root will be " \
        f"made under {usable}"
    return PreflightStep(step=STEP_SRC, ok=True, evidence=f"{host.benchmark_src} present; {root_note}")


async def check_api(runner: Runner, api_base: str, model: str | None) -> tuple[PreflightStep, int | None, list[str]]:
    url = models_url(api_base)
    res = await run_bounded(runner, ["curl", "-sS", "-m", "10", "-o", "-", "-w", "\n%{http_code}", url])
    if res.exit_code == 127 or (res.error and "not found" in res.error):
        return PreflightStep(step=STEP_API, ok=False, evidence=f"curl is not installed on {_where(runner)}"), \
            None, []
    lines = res.stdout_tail.rstrip("\n").splitlines()
    code = lines[-1].strip() if lines else ""
    body = "\n".join(lines[:-1])
    if res.exit_code != 0 or not code.isdigit() or code == "000":
        why = (res.stderr_tail.strip().splitlines() or [f"curl exit {res.exit_code}"])[-1]
        return PreflightStep(step=STEP_API, ok=False,
                             evidence=f"GET {url} from {_where(runner)} failed: {why[:200]}"), None, []
    status = int(code)
    if status in (401, 403):
        return PreflightStep(step=STEP_API, ok=True,
                             evidence=f"GET {url} from {_where(runner)} → {status}: the server answers and wants "
                                      "the API key (used by the run, never by this check)"), None, []
    if status != 200:
        return PreflightStep(step=STEP_API, ok=False,
                             evidence=f"GET {url} from {_where(runner)} → HTTP {status}"), None, []
    served: list[str] = []
    max_len: int | None = None
    try:
        data = json.loads(body)
        for m in data.get("data", []) if isinstance(data, dict) else []:
            if isinstance(m, dict) and isinstance(m.get("id"), str):
                served.append(m["id"])
                if model in (None, m["id"]) and isinstance(m.get("max_model_len"), int):
                    max_len = m["max_model_len"]
    except ValueError:
        return PreflightStep(step=STEP_API, ok=False,
                             evidence=f"GET {url} → 200 but not an OpenAI model list"), None, []
    if model and served and model not in served:
        return PreflightStep(step=STEP_API, ok=False,
                             evidence=f"the server at {url} serves {', '.join(served[:5])}, not {model}"), None, served
    extra = f", max_model_len {max_len}" if max_len else ""
    return PreflightStep(step=STEP_API, ok=True,
                         evidence=f"GET {url} from {_where(runner)} → 200, serves {', '.join(served[:3]) or '?'}"
                                  f"{extra}"), max_len, served


async def run_preflight(runner: Runner, host: HostEntry, task_root: str, api_base: str,
                        model: str | None) -> Preflight:
    pf = Preflight()
    ssh = await check_ssh(runner)
    pf.steps.append(ssh)
    if not ssh.ok:
        return pf
    pf.steps.append(await check_environment(runner, host))
    pf.steps.append(await check_source(runner, host, task_root))
    api, pf.max_model_len, pf.served = await check_api(runner, api_base, model)
    pf.steps.append(api)
    return pf
