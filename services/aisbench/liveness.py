"""Is a task without an exit code still running? In docker mode (the runbook's default) run.sh
runs inside the task's own container, where /proc of the host cannot see it; the host's
docker can:

1. `docker inspect --format {{.State.Running}} <container>` — a stopped or removed container
   runs nothing;
2. `docker exec <container> kill -0 <pid>` — run.sh's pid as it wrote it (its pid inside the
   container); without a pid file (tasks of the runbook's own scripts),
   `docker exec <container> pgrep -f ais_bench`, as its eval_status.py does.

Every command is an argv run by the host's Runner. The answer is (alive, evidence); alive is
None when docker itself cannot answer (not installed, no answer), which is said, not guessed.
"""

from __future__ import annotations

from services.aisbench.preflight import run_bounded
from services.core.source import SourceUnavailable
from services.transport.process import CommandResult, Runner

TIMEOUT_S = 20.0


async def _run(runner: Runner, argv: list[str]) -> CommandResult:
    return await run_bounded(runner, argv, TIMEOUT_S)


def _why(res: CommandResult) -> str:
    lines = (res.stderr_tail or res.stdout_tail or res.error or "").strip().splitlines()
    return lines[-1][:200] if lines else f"exit {res.exit_code}"


async def in_container(runner: Runner, container: str, pid: int | None) -> tuple[bool | None, str]:
    try:
        res = await _run(runner, ["docker", "inspect", "--format", "{{.State.Running}}", container])
        if res.exit_code == 127 or (res.error and res.exit_code is None):
            return None, f"docker cannot answer on the host: {_why(res)}"
        if res.exit_code != 0:
            if "no such" not in _why(res).lower():  # the daemon down, permission denied …: not an answer
                return None, f"docker inspect {container} on the host failed: {_why(res)}"
            return False, f"its container {container} is gone (docker inspect: {_why(res)})"
        if res.stdout_tail.strip().splitlines()[-1:] != ["true"]:
            return False, f"its container {container} is not running (docker inspect: {res.stdout_tail.strip()[:40]})"
        if pid is not None:
            res = await _run(runner, ["docker", "exec", container, "kill", "-0", str(pid)])
            if res.exit_code == 0:
                return True, f"run.sh (pid {pid}) runs in its container {container}"
            if res.exit_code is None:
                return None, f"docker exec in {container} did not answer: {_why(res)}"
            return False, f"run.sh (pid {pid}) is gone from its container {container}"
        res = await _run(runner, ["docker", "exec", container, "pgrep", "-f", "ais_bench"])
        if res.exit_code == 0 and res.stdout_tail.strip():
            return True, f"ais_bench runs in its container {container}"
        if res.exit_code == 1:
            return False, f"no ais_bench process in its container {container}"
        return None, f"docker exec in {container} did not answer: {_why(res)}"
    except SourceUnavailable as exc:
        return None, f"{exc.where}: {exc.message}"
