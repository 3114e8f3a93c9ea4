"""A store's job states from its launcher (`[[stores]] status`): there is no SLURM, so the
launcher's own jobs table says which jobs are live. The command prints CSV rows `job,state`
(a header row is skipped); a state is a word (RUNNING, COMPLETED, FAILED, KILLED …) or the
TPU launcher's code (1-3 pending/running, 4 completed, 5 failed, 6 killed). A row names a job
by its name, or by an id ending in `/<name>` or `-<name>`. Without a status command a job's
state comes from its aggregate, as for a local job dir."""

from __future__ import annotations

import csv
import io
import subprocess

from services.core.config import CommandTemplate
from services.core.models import Experiment
from services.remediations.job_commands import expand
from services.transport.slurm import SlurmJobState, apply_state

CODES = {"1": "PENDING", "2": "RUNNING", "3": "RUNNING", "4": "COMPLETED", "5": "FAILED", "6": "CANCELLED"}
WORDS = {"KILLED": "CANCELLED", "SUCCEEDED": "COMPLETED", "DONE": "COMPLETED"}
TIMEOUT_S = 60.0


def parse(text: str) -> dict[str, str]:
    """job id → state word, from the command's CSV."""
    out: dict[str, str] = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 2 or not row[0].strip():
            continue
        job, state = row[0].strip(), row[1].strip().upper()
        state = CODES.get(state, WORDS.get(state, state))
        if job.lower() in ("job_id", "job", "name") or not state.isalpha():
            continue
        out[job] = state
    return out


def states(template: CommandTemplate, cwd: str | None = None) -> tuple[dict[str, str], str | None]:
    """(job id → state, why the command gave none)."""
    try:
        argv = expand(template, {}, where="the status command")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd, check=False)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return {}, f"the status command could not run: {exc}"
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        return {}, f"the status command exited with code {done.returncode}: {tail}"
    return parse(done.stdout), None


def apply(experiments: list[Experiment], table: dict[str, str]) -> None:
    for exp in experiments:
        for job, state in table.items():
            if job == exp.id or job.endswith(("/" + exp.id, "-" + exp.id)):
                apply_state(exp, SlurmJobState(job_id=job, state=state, raw=state, via="launcher"))
                break
