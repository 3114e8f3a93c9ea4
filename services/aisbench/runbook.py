"""Tasks made by the runbook's own scripts (`eval_run.py`), read beside evaldesk's.

Its task table is `~/.ais-bench-eval/tasks.json` (beside the hosts file):
`{"version": 1, "updated_at", "tasks": [{task_id, host, container, task_dir, work_dir, suite,
category, api_base, model, num_prompts, batch_size, step_limit, max_out_len, tokenizer_path,
reuse_of, started_at, status, last_checked, output_ts, …}]}` — never an API key. Its task dir
`<task_root>/<task_id>/` holds `run.sh` (pipefail, `trap 'echo $? > exit_code' EXIT`, cd to the
source, `ais_bench … --work-dir <task_dir>/outputs --debug 2>&1 | tee aisbench.log`),
`bootstrap.sh` (`setsid bash run.sh &`, `echo $! > bootstrap.pid`), `cfg/models/api_model.py`
(+ `cfg/datasets/<name>.py`) or, for agent suites, a whole `config.py`; runs go in the
container `ais-bench-eval-<task_id>`, started by `docker exec <container> bash bootstrap.sh`.

Such a task is read like evaldesk's own (the same reading, the same states); a row of this
table becomes a `TaskRow` with `origin="runbook"`, never written into evaldesk's table. Its
resume is the runbook's: run.sh with `--reuse <run>` (perf: without), then bootstrap.sh again.
"""

from __future__ import annotations

import json
import posixpath
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from services.aisbench.formats import HostEntry, TaskRow

RUN_LOG = "aisbench.log"
BOOTSTRAP = "bootstrap.sh"
BOOTSTRAP_PID = "bootstrap.pid"
# `ais_bench … --debug [--reuse [TS]] 2>&1 | tee <task_dir>/aisbench.log` (eval_run.py)
AIS_LINE = re.compile(r"^(?P<cmd>ais_bench\s.*?)(?P<tail>\s+2>&1\s*\|\s*tee\s+\S+\s*)$")
REUSE = re.compile(r"\s--reuse(?:\s+(?!-)\S+)?")


class RunbookTask(BaseModel):
    model_config = ConfigDict(extra="ignore")

    task_id: str
    host: str
    container: str | None = None
    task_dir: str
    work_dir: str | None = None
    suite: str = ""
    category: str = "accuracy"
    api_base: str = ""
    model: str = ""
    num_prompts: int | None = None
    batch_size: int | None = None
    max_out_len: int | None = None
    started_at: str | None = None
    status: str | None = None
    output_ts: str | None = None


def tasks_path(hosts_file: str) -> Path:
    return Path(hosts_file).expanduser().parent / "tasks.json"


def load(path: Path) -> tuple[list[RunbookTask], str | None]:
    """The table's tasks, and what was wrong with it (absent: no tasks, no problem)."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [], None
    except (OSError, ValueError) as exc:
        return [], f"{path}: cannot read the runbook's task table: {exc}"
    raw = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        return [], f"{path}: not the runbook's task table (no tasks list)"
    out: list[RunbookTask] = []
    bad = 0
    for item in raw:
        try:
            out.append(RunbookTask.model_validate(item))
        except ValidationError:
            bad += 1
    return out, (f"{path}: {bad} task record(s) without task_id/host/task_dir skipped" if bad else None)


def _when(text: str | None) -> datetime:
    # eval_run.py writes time.strftime("%Y-%m-%dT%H:%M:%S%z"): local time with its offset
    if text:
        for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S"):
            try:
                ts = datetime.strptime(text, fmt)
                return ts if ts.tzinfo else ts.replace(tzinfo=UTC)
            except ValueError:
                continue
    return datetime.fromtimestamp(0, UTC)


def rows_for(tasks: list[RunbookTask], entry: HostEntry, where: str, task_root: str) -> list[TaskRow]:
    """The runbook's tasks on this host under this task root, as rows."""
    root = task_root.rstrip("/")
    out = []
    for t in tasks:
        if t.host not in (entry.host, entry.name) or posixpath.dirname(t.task_dir.rstrip("/")) != root:
            continue
        when = _when(t.started_at)
        out.append(TaskRow(
            id=posixpath.basename(t.task_dir.rstrip("/")), where=where, task_root=root, suite=t.suite,
            model=t.model, api_base=t.api_base,
            mode="perf" if t.category == "perf" else "agent" if t.category == "agent" else "accuracy",
            max_out_len=t.max_out_len, batch_size=t.batch_size, num_prompts=t.num_prompts, created_at=when,
            launched_at=when, origin="runbook", container=t.container, output_ts=t.output_ts))
    return out


def with_reuse(run_sh: str, run: str | None) -> str:
    """run.sh with its ais_bench line carrying `--reuse <run>` (None: no --reuse at all).
    Raises ValueError when no such line is there."""
    lines = run_sh.split("\n")
    for i, line in enumerate(lines):
        m = AIS_LINE.match(line)
        if m:
            cmd = REUSE.sub("", m.group("cmd"))
            lines[i] = cmd + (f" --reuse {run}" if run else "") + m.group("tail")
            return "\n".join(lines)
    raise ValueError("run.sh has no `ais_bench … | tee …` line")
