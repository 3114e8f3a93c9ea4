"""Lenient mirrors of what clousight-bench (`csbench`, 0.7) writes and prints.

- a result record (schema 0.4): `<results>/<domain>/<adapter>/<task>-run-<id>.json` from
  `run-plan`, or `<dest>/<task_id>--<run_id>.json` from `fetch --dest`;
- a run-plan campaign file: `<results>/campaigns/<campaign_id>.json` (kind campaign_manifest);
- a run's live progress: `<results>/.progress/<run_id>/state.json` (schema progress/1) beside
  `stream.jsonl`;
- `csbench status CID` (one JSON line: counts, current_task, heartbeat_age_s, stale, done) and
  `csbench teardown CID` (a Python dict: destroyed, residual_deleted).

Unknown fields are ignored and nearly everything is optional: a record from another csbench
version still yields what can be read from it. Parsers never raise on bad content; they say
what was wrong.
"""

from __future__ import annotations

import ast
import json
import math
from datetime import datetime
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.core.input_files import loads_json

_LENIENT = ConfigDict(extra="ignore", populate_by_name=True)

# csbench's own words and figures, each named after where clousight-bench 0.7 defines it;
# tests/services/csbench/test_contract.py checks every one against the installed package.
RECORD_STATUSES = ("completed", "failed", "invalid", "unsupported", "interrupted")  # core/record.py
TASK_STATUSES = ("pending", "running", "completed", "failed")  # core/campaign/manifest.py TaskProgress
TERMINAL_TASK_STATES = ("completed", "failed")  # core/campaign/manifest.py TERMINAL_STATES
# the statuses whose runs carry numbers (ops/runplan.py SCORED_STATUSES); the rest are counted only
OK_RECORD_STATUSES = ("completed", "unsupported")
# the two roles of a run plan's runs (ops/runplan.py execute_plan): warm-ups run first and are
# left out of the plan's statistics and its status_counts
MEASURED, WARMUP = "measured", "warmup"
# subtrees of a results dir that hold no records (csbench's core/store.py RESERVED_SUBTREES)
RESERVED_SUBTREES = frozenset({"aggregates", "campaigns", "artifacts", "traces", "debug"})
# progress statuses after which a run's .progress/ dir changes no more (core/progress.py)
PROGRESS_TERMINAL = frozenset({"completed", "failed", "invalid", "interrupted", "unsupported", "abandoned"})
# a finished (or dead) run's .progress/ dir is swept this long after its last write, by the next
# run that starts in the same results dir (core/progress.py TERMINAL_GRACE_S, reap_stale)
PROGRESS_GRACE_S = 120.0
# the controller heartbeats this often; `csbench status` says stale past twice that
# (core/campaign/prod_submit.py HEARTBEAT_INTERVAL_S)
HEARTBEAT_INTERVAL_S = 15.0
# `csbench submit --watchdog-timeout` default: the controller destroys itself after this long
# (core/campaign/spec.py DEFAULT_WATCHDOG_TIMEOUT_S; cli/app.py)
DEFAULT_WATCHDOG_TIMEOUT_S = 5400.0
# the plan's `driver:` keys the Aliyun controller accepts; submit rejects any other
# (domains/agent_runtime/aliyun/provider.py _DRIVER_TF_VARS)
DRIVER_KEYS = ("install_docker", "system_disk_size", "docker_registry_mirror", "hf_endpoint", "instance_type")
# where `csbench submit` and `teardown` run terraform, relative to their working dir (cli/prod.py)
PROD_TF_DIR = "infra/terraform/aliyun-iam"


class _Lenient(BaseModel):
    model_config = _LENIENT


class Measurement(_Lenient):
    value: float | None = None
    unit: str = ""
    official: bool = False
    reproducibility_class: str = ""
    notes: str | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _finite(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return None
        return v


class Provenance(_Lenient):
    suite_id: str = ""
    suite_version: str = ""
    scaffold: str = ""
    dataset_digest: str = ""
    evaluator_id: str = ""
    evaluator_official: bool = False
    unmodified: bool | None = None
    division: str = ""


class Environment(_Lenient):
    execution: str = "unknown"  # simulated | live | unknown
    mode: str = "unknown"  # local | cloud | unknown
    region: str = ""
    os_name: str = ""
    python_version: str = ""


class StageError(_Lenient):
    stage: str = "?"
    code: str = ""
    type: str = ""
    message: str = ""
    retryable: bool = False

    def line(self) -> str:
        retry = " (retryable)" if self.retryable else ""
        return f"{self.stage} {self.code or 'error'} {self.type}{retry}: {self.message}".replace("  ", " ")


class RunInfo(_Lenient):
    run_id: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    stages: dict[str, str] = Field(default_factory=dict)
    stage_timings: dict[str, float] = Field(default_factory=dict, description="ms per stage")


class Artifact(_Lenient):
    kind: str = ""
    media: str = ""
    path: str = ""
    sha256: str = ""


class ManifestEntry(_Lenient):
    """One file of a suite's artifact manifest (`observations.manifest.<name>`)."""

    path: str = ""
    sha256: str = ""
    rows: int | None = None


class Observations(_Lenient):
    artifacts_subdir: str | None = None
    manifest: dict[str, ManifestEntry] = Field(default_factory=dict)


class Identity(_Lenient):
    domain: str = ""
    task_id: str = ""
    adapter: str = ""
    adapter_status: str = ""
    core_version: str = ""
    workload: str = ""
    workload_version: str = ""


class RunPlanRef(_Lenient):
    plan_id: str | None = None
    role: str | None = None  # measured | warmup
    index: int | None = None
    repeat: int | None = None
    warmup: int | None = None


class Record(_Lenient):
    """A csbench result record (schema 0.4)."""

    schema_version: str = ""
    status: str = "unknown"
    identity: Identity = Field(default_factory=Identity)
    environment: Environment = Field(default_factory=Environment)
    measurements: dict[str, Measurement] = Field(default_factory=dict)
    provenance: Provenance = Field(default_factory=Provenance)
    artifacts: list[Artifact] = Field(default_factory=list)
    observations: Observations = Field(default_factory=Observations)
    run: RunInfo = Field(default_factory=RunInfo)
    errors: list[StageError] = Field(default_factory=list)
    findings: list[dict[str, Any]] = Field(default_factory=list)
    extensions: dict[str, Any] = Field(default_factory=dict)
    fingerprints: dict[str, Any] = Field(default_factory=dict)

    @field_validator("observations", mode="before")
    @classmethod
    def _observations(cls, v: Any) -> Any:
        # a failed run's observations are {}; a manifest entry that is not a mapping is dropped
        if not isinstance(v, dict):
            return {}
        manifest = v.get("manifest")
        if isinstance(manifest, dict):
            v = {**v, "manifest": {k: e for k, e in manifest.items() if isinstance(e, dict)}}
        return v

    @cached_property
    def run_plan(self) -> RunPlanRef:
        core = self.extensions.get("core") if isinstance(self.extensions, dict) else None
        ref = core.get("run_plan") if isinstance(core, dict) else None
        try:
            return RunPlanRef.model_validate(ref or {})
        except ValidationError:
            return RunPlanRef()

    @property
    def warmup(self) -> bool:
        """A warm-up run: csbench leaves it out of the plan's statistics (ops/runplan.py)."""
        return self.run_plan.role == WARMUP

    @property
    def suite_id(self) -> str:
        return self.provenance.suite_id or self.identity.workload or self.identity.task_id.removeprefix("suite:")

    @property
    def ok(self) -> bool:
        return self.status in OK_RECORD_STATUSES

    def primary(self) -> tuple[str, Measurement] | None:
        """The headline measurement: `<suite>.resolved`, else the first official ratio."""
        suite = self.suite_id
        for name in (f"{suite}.resolved", f"{suite}.accuracy", f"{suite}.pass_at_1"):
            m = self.measurements.get(name)
            if m is not None and m.value is not None:
                return name, m
        for name, m in sorted(self.measurements.items()):
            if m.official and m.unit == "ratio" and m.value is not None:
                return name, m
        return None


def looks_like_record(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("schema_version"), str)
            and isinstance(data.get("identity"), dict) and "status" in data)


def parse_record(raw: bytes) -> tuple[Record | None, str | None]:
    """(record, None), or (None, why it is not one)."""
    try:
        data = loads_json(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"not JSON: {str(exc)[:120]}"
    if not looks_like_record(data):
        return None, "not a csbench record (no schema_version/identity/status)"
    try:
        return Record.model_validate(data), None
    except ValidationError as exc:
        return None, f"unexpected record shape: {str(exc).splitlines()[0][:160]}"


class PlanAggregate(_Lenient):
    """`aggregates/<domain>/<adapter>/<task>-<plan_id>.json`: written by csbench when a plan's
    last run ends (ops/runplan.py RunPlanAggregate) — its own reading of the plan's runs."""

    kind: str = ""
    plan_id: str
    identity: dict[str, Any] = Field(default_factory=dict)
    plan: dict[str, int] = Field(default_factory=dict, description="{repeat, warmup}")
    runs: dict[str, list[str]] = Field(default_factory=dict, description="{measured: [run ids], warmup: [...]}")
    status_counts: dict[str, int] = Field(default_factory=dict, description="measured runs only")

    @property
    def repeat(self) -> int | None:
        n = self.plan.get("repeat")
        return n if isinstance(n, int) and n >= 1 else None


def parse_aggregate(raw: bytes) -> PlanAggregate | None:
    try:
        data = loads_json(raw)
        if not isinstance(data, dict) or data.get("kind") != "run_plan_aggregate":
            return None
        return PlanAggregate.model_validate(data)
    except (ValueError, UnicodeDecodeError, ValidationError):
        return None


class CampaignTask(_Lenient):
    """One task slot of a run-plan campaign file."""

    task_id: str = "?"
    status: str = "pending"
    plan_id: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    elapsed_s: float | None = None
    status_counts: dict[str, int] = Field(default_factory=dict)
    error: str | None = None
    job_progress: dict[str, Any] = Field(default_factory=dict)


class CampaignFile(_Lenient):
    """`campaigns/<campaign_id>.json`, written by `csbench run-plan` on every transition."""

    kind: str = ""
    campaign_id: str
    plan_file: str = ""
    domain: str = ""
    platform: str = ""
    started_at: datetime | None = None
    updated_at: datetime | None = None
    total_tasks: int | None = None
    tasks: list[CampaignTask] = Field(default_factory=list)


def parse_campaign(raw: bytes) -> tuple[CampaignFile | None, str | None]:
    try:
        data = loads_json(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"not JSON: {str(exc)[:120]}"
    if not isinstance(data, dict) or data.get("kind") != "campaign_manifest":
        return None, "not a csbench campaign file (kind is not campaign_manifest)"
    try:
        return CampaignFile.model_validate(data), None
    except ValidationError as exc:
        return None, f"unexpected campaign shape: {str(exc).splitlines()[0][:160]}"


class ProgressState(_Lenient):
    """`.progress/<run_id>/state.json`: what a run is doing now (rewritten as it goes)."""

    schema_: str = Field("", alias="schema")
    run_id: str = ""
    pid: int | None = None
    task_id: str = ""
    suite_id: str = ""
    adapter: str = ""
    mode: str = ""
    started_at: datetime | None = None
    updated_at: datetime | None = None
    lifecycle_phase: str = ""
    stage: str = ""
    stages: dict[str, str] = Field(default_factory=dict)
    status: str = ""
    record_path: str | None = None


def parse_progress(raw: bytes) -> ProgressState | None:
    try:
        data = loads_json(raw)
        if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("progress/"):
            return None
        return ProgressState.model_validate(data)
    except (ValueError, UnicodeDecodeError, ValidationError):
        return None


class StatusLine(_Lenient):
    """What `csbench status CID --config C` prints: one JSON line read from OSS."""

    counts: dict[str, int] = Field(default_factory=dict)
    current_task: str | None = None
    heartbeat_age_s: float | None = None
    stale: bool = False
    done: Literal["DONE", "FAILED"] | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class OutputError(ValueError):
    """A csbench command printed something evaldesk cannot read."""


def parse_status(stdout: str) -> StatusLine:
    """The last JSON object line of `csbench status` output."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return StatusLine.model_validate(json.loads(line))
            except (ValueError, ValidationError) as exc:
                raise OutputError(f"csbench status printed an unreadable line: {str(exc).splitlines()[0][:160]}") \
                    from None
    raise OutputError("csbench status printed no JSON line" + (f": {stdout.strip()[:160]!r}" if stdout.strip() else ""))


class TeardownResult(_Lenient):
    destroyed: bool | None = None
    residual_deleted: list[str] = Field(default_factory=list)


def parse_teardown(stdout: str) -> TeardownResult | None:
    """`csbench teardown` prints `print(dict)` — a Python literal, not JSON."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = ast.literal_eval(line)
            except (ValueError, SyntaxError):
                try:  # a later csbench may print JSON
                    value = json.loads(line)
                except ValueError:
                    continue
            if isinstance(value, dict):
                try:
                    return TeardownResult.model_validate(value)
                except ValidationError:
                    return None
    return None
