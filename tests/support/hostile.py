"""Job dirs with names and fields meant to attack a terminal, for the output tests.

A job dir whose name opens an OSC title and never closes it, trial dirs holding ESC sequences,
a newline, a shell substitution and bytes that are not UTF-8, and JSON fields (task, model,
exception) carrying CSI/OSC starts in both their 7-bit (ESC) and 8-bit (C1) forms. The task
with the escape-laden name has one attempt too many, the later one the dir that is not UTF-8,
so dedupe has a hostile name to move.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

from tests.support.harbor_factory import T0, JobBuilder

OSC_OPEN = "\x1b]0;owned-title"  # never closed: a terminal would swallow what follows
JOB_NAME = f"tb2_evil{OSC_OPEN}\x1b[31m\nsecond-line_2026-03-02__09-00-00"
MODEL = "hosted_vllm/\x9b31mModel\x1b[5m"
EXCEPTION = "Boom\x1b[2J\x9d0;t\x07Error"
BYTES_NAME = os.fsdecode(b"task-bytes__\xff\xferaw")  # not UTF-8: kept as lone surrogates
TRIAL_NAMES = [
    "task-esc__\x1b[2Jclear",
    "task-esc__\x1b]0;dup\x07",
    f"task-osc__{OSC_OPEN}",
    "task-nl__line1\nline2",
    "task-cmd__$(touch PWNED)`id`",
    BYTES_NAME,
    "task-bidi__\u202eexe.txt",
    "task-markup__[red]x[bold]",  # Rich/Textual markup: never read as markup
]
# raw control characters a terminal would act on: C0 but newline, DEL, C1; and lone surrogates
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def hostile_job(root: Path) -> Path:
    """Write the job under `root`; returns its dir (its name is JOB_NAME)."""
    job = JobBuilder(root, JOB_NAME, model=MODEL, n_attempts=1)
    job.add("task-esc\x1b[2J", 1.0, name=TRIAL_NAMES[0])
    job.add("task-osc-closed", 0.0, name=TRIAL_NAMES[1])
    job.add("task-osc", 0.0, name=TRIAL_NAMES[2])
    job.add("task-nl", None, exception=EXCEPTION, name=TRIAL_NAMES[3])
    job.add("task-cmd$(reboot)", 1.0, name=TRIAL_NAMES[4])
    # the task's second, later attempt: the surplus dedupe moves
    job.add("task-esc\x1b[2J", 1.0, name="task-bytes__placeholder", started=T0 + timedelta(hours=1))
    job.add("task-c1\x9b6n", 1.0, name=TRIAL_NAMES[6])
    job.add("task-markup[/bold][/]", 1.0, name=TRIAL_NAMES[7])  # closing tags that match nothing
    d = job.write()
    # the factory writes UTF-8; the non-UTF-8 name is given to the dir afterwards, as a rename would
    os.rename(d / "task-bytes__placeholder", d / BYTES_NAME)
    (d / TRIAL_NAMES[0] / "trial.log").write_bytes(
        b"\x1b]0;log-title\nafter\n\x1b[31mred\x1b[0m \xc2\x9b6n \xff\n"
    )
    return d


def raw_controls(text: str) -> list[str]:
    """The characters in `text` that would reach a terminal as controls (empty when safe)."""
    return RAW_CONTROL.findall(text)


RUNNING_JOB = "tb2_live\x1b]2;live-title\x07_2026-03-02__09-00-00"
RUNNING_TRIAL = "task-run__\x1b[6n\x9b6n"


def hostile_running_job(root: Path) -> Path:
    """A running job whose running trial's name and last log line carry terminal controls."""
    job = JobBuilder(root, RUNNING_JOB, model=MODEL, n_attempts=1, finished=False)
    job.add("task-run\x1b[2J", 1.0, name=RUNNING_TRIAL, running=True)
    job.add("task-done", 1.0, name="task-done__ok")
    d = job.write()
    (d / RUNNING_TRIAL / "trial.log").write_bytes(b"step 1\n\x1b]0;activity-title\x07\x1b[31mcalling tool\x9b\n")
    return d
