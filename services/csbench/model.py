"""What evaldesk knows about a csbench campaign beyond the common Experiment/Trial fields.

A campaign is an Experiment (a run-plan campaign file, a cloud campaign known by id, or a
fetched results dir); each task run is a Trial. The csbench-only facts (records with their
measurements and provenance, artifact checks, the controller's status and log, the teardown
marker) ride along on subclasses so the checklist and the diagnose panel can read them; they
are never serialised into batch output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from services.core.models import Experiment, Trial
from services.core.plain import EXCLUDE
from services.csbench.formats import CampaignTask, ProgressState, Record, StatusLine

ArtifactStatus = Literal["ok", "mismatch", "missing", "unreadable"]


class ArtifactCheck(BaseModel):
    """One artifact of a record's manifest, hashed on load."""

    name: str
    rel: str = Field(description="path relative to the results dir")
    expected: str
    actual: str | None = None
    status: ArtifactStatus
    rows: int | None = None
    detail: str | None = None


class RunFacts(BaseModel):
    """One task run: its record when csbench wrote one, else what the campaign file says."""

    key: str = Field(description="the run id, or a placeholder for a task with no run yet")
    task_status: str = Field(description="csbench's own word: the record's status, else the task slot's")
    record: Record | None = None
    record_rel: str | None = None
    record_problem: str | None = None
    progress: ProgressState | None = None
    progress_rel: str | None = Field(None, description=".progress/<run_id>, relative to the results dir")
    stale: str | None = Field(None, description="why a run that says running is not")
    task_error: str | None = None
    note: str | None = Field(None, description="what this row is when there is no record")
    plan_id: str | None = Field(None, description="the run plan it belongs to (its record's, or its task slot's)")
    artifacts: list[ArtifactCheck] = Field(default_factory=list)
    artifacts_local: bool = Field(False, description="the results dir holds an artifacts/ tree to check")
    instance_ids: list[str] = Field(default_factory=list, description="SWE-bench instances, from its results artifact")


class Inspection(BaseModel):
    """What the artifacts of one record say, read when the record is loaded."""

    checks: list[ArtifactCheck] = Field(default_factory=list)
    local: bool = False
    instance_ids: list[str] = Field(default_factory=list)


class TeardownMark(BaseModel):
    """An applied `csbench_teardown` write of evaldesk, read back from its record."""

    record_id: str
    at: datetime | None = None
    exit_code: int | None = None
    destroyed: bool | None = None
    residual_deleted: list[str] = Field(default_factory=list)
    output: str = ""


class FetchMark(BaseModel):
    """An applied `csbench_fetch` write of evaldesk: what `csbench status` said when it fetched."""

    record_id: str
    at: datetime | None = None
    status: StatusLine | None = None


Origin = Literal["run-plan", "fetched", "cloud"]


class CampaignFacts(BaseModel):
    origin: Origin
    campaign_id: str | None = None
    results_dir: str = Field(description="absolute dir of its records (may not exist yet for a cloud campaign)")
    platform: str = ""
    domain: str = ""
    plan_file: str = ""
    cloud: bool = Field(False, description="submitted to the cloud: a controller, NAT and EIP that bill")
    expect_real: bool | None = Field(None, description="the run was meant to be real (None: not said)")
    status: StatusLine | None = None
    status_error: str | None = None
    logs: list[str] | None = None
    logs_from: str | None = None
    teardown: TeardownMark | None = None
    teardown_problem: str | None = None
    tasks: list[CampaignTask] = Field(default_factory=list)
    expected_runs: list[int] = Field(default_factory=list, description="per task slot: the measured runs the "
                                     "plan asks for (its repeat)")
    warmups: list[RunFacts] = Field(default_factory=list, description="warm-up runs: not measurements, as in "
                                    "csbench's status_counts")
    fetch: FetchMark | None = None
    stale: str | None = Field(None, description="why the campaign is not progressing (killed, stale)")
    config_known: bool = Field(False, description="a [csbench] config can run commands for it")
    teardown_command: str | None = Field(None, description="the exact teardown command, when the config says it")

    @property
    def over(self) -> bool:
        """Nothing will run any more: DONE, FAILED, stale, or its results were fetched."""
        if self.status is not None:
            return self.status.done is not None or bool(self.status.stale)
        return self.origin == "fetched" or self.stale is not None


@dataclass(kw_only=True)
class CampaignExperiment(Experiment):
    facts: CampaignFacts = field(metadata=EXCLUDE)


@dataclass(slots=True, kw_only=True)
class RunTrial(Trial):
    run: RunFacts


PreflightStatus = Literal["pass", "warn", "fail", "skip"]


class PreflightItem(BaseModel):
    """One thing the smoke runbook says to check before `csbench submit` spends money."""

    id: str
    title: str
    status: PreflightStatus
    evidence: str
    fix: str | None = None
    word: str | None = Field(None, description="typing this word in the console's dialog accepts this failure")


class SubmitMark(BaseModel):
    """An applied `csbench_submit` write of evaldesk: the campaign it started."""

    record_id: str
    at: datetime | None = None
    plan: str = ""
    plan_sha256: str = ""
    config_sha256: str = ""
    campaign_id: str | None = None
    exit_code: int | None = None


class SubmitFacts(BaseModel):
    plan_path: str
    config_path: str
    results_dir: str
    preflight: list[PreflightItem] = Field(default_factory=list)
    submitted: list[SubmitMark] = Field(default_factory=list, description="earlier submits of this plan, newest first")
    torn_down: dict[str, bool] = Field(default_factory=dict, description="campaign id → its teardown destroyed all")


@dataclass(kw_only=True)
class PlanExperiment(Experiment):
    """A submit plan of the `[csbench]` config, before and after `csbench submit`: its audit is
    the runbook's pre-pay checklist, and its fix is the submit."""

    plan: SubmitFacts = field(metadata=EXCLUDE)
