"""An AISBench task as an evaldesk Experiment, and its datasets as Trials.

A "trial" of an AISBench task is one (model abbr, dataset) pair of its latest run: that is
the unit AISBench itself schedules (one infer task and one eval task per pair, each with its
own log), scores (one results file, or one perf file) and reports (one summary row). A
prediction would be finer, but AISBench writes no per-sample verdict unless asked
(`--dump-eval-details`), while every dataset has a score, a log and a reason it failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from services.aisbench.formats import Mode, PredictionCounts, PreflightStep
from services.core.models import Experiment, Trial

# the remediations an AISBench check can name (services.remediations.registry)
LAUNCH = "aisbench_launch"
RESUME = "aisbench_resume"

# the trials view opens a dataset's files under stable names (see source.ViewFS)
VIEW_DIR = "by-dataset"


@dataclass(slots=True, kw_only=True)
class DatasetTrial(Trial):
    kind: Literal["accuracy", "perf", "swebench", "unknown"] = "unknown"
    metric: str | None = None  # the headline metric's name (accuracy, pass@1 …)
    metrics: dict[str, float] = field(default_factory=dict)  # every numeric result, percentages
    perf_common: dict[str, str] = field(default_factory=dict)  # perf summary figures with units
    # TTFT/TPOT/E2EL/ITL … → Median/P75/P90/P99 … in the CSV's unit
    perf_stats: dict[str, dict[str, float | None]] = field(default_factory=dict)
    perf_units: dict[str, str] = field(default_factory=dict)
    swebench: dict[str, int] = field(default_factory=dict)  # resolved/total/error … instances
    predictions: PredictionCounts | None = None
    error_code: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # role → file relative to the task dir


class TaskInfo(BaseModel):
    """What an AISBench task is beyond the common Experiment fields."""

    task_id: str
    where: str = Field(description="the host's label, or 'local'")
    task_root: str
    suite: str | None = None
    mode: Mode | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    max_out_len: int | None = None
    batch_size: int | None = None
    num_prompts: int | None = None
    max_model_len: int | None = Field(None, description="what the model server reported at preflight")
    missing: list[str] = Field(default_factory=list, description="parameters a launch still needs")
    reason: str | None = Field(None, description="why the state is what it is, in a sentence")
    exit_code: int | None = None
    has_dir: bool = True
    has_run_sh: bool = False
    in_table: bool = False
    launched_by_evaldesk: bool = False
    run: str | None = Field(None, description="the latest run dir under outputs/")
    runs: int = 0
    summary_rel: str | None = None
    summary: list[str] = Field(default_factory=list, description="summary rows as printed: dataset metric value")
    preflight: list[PreflightStep] = Field(default_factory=list)
    preflight_at: datetime | None = None
    uses_docker: bool = False
    pid: int | None = Field(None, description="run.sh's pid, as it wrote it")
    run_log: str | None = Field(None, description="the task's own log, relative to its dir")
    origin: str = Field("evaldesk", description="who made the task: evaldesk, or the runbook's eval_run.py")
    container: str | None = None
    output_ts: str | None = Field(None, description="runbook: the run its eval_status.py anchored (resume target)")
    alive: bool | None = None
    launched_at: datetime | None = None


@dataclass(kw_only=True)
class TaskExperiment(Experiment):
    task: TaskInfo
