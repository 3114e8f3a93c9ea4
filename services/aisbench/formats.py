"""The files AISBench writes, as it writes them, and the files evaldesk keeps beside them.

`ais_bench CONFIG --work-dir W` puts every run under `W/<YYYYMMDD_HHMMSS>/`:

    results/<model abbr>/<dataset>.json        {"accuracy": 50.0} (a percentage); SWE-bench adds
                                               resolved/total/error instance counts
    predictions/<model abbr>/<dataset>.jsonl   one line per sample: success, prediction, gold
    performances/<model abbr>/<dataset>.json   (-m perf) {metric: {stage: "42.429 ms" | 4}}
    performances/<model abbr>/<dataset>.csv    (-m perf) per-request stats: Average, Min, Max,
                                               Median, P75, P90, P99, N of TTFT, TPOT, E2EL, ITL …
    summary/summary_<ts>.{txt,csv,md}          the table it prints (no summary in perf mode)
    logs/{infer,eval}/<model abbr>/<dataset>.out
    configs/<ts>_<pid>.py                      the whole config as run (it holds the API key:
                                               evaldesk never reads or shows it)

`ais_bench` exits 0 even when every request failed (model server down) and then writes no
results file: the exit code says nothing, the files say everything. Every model here is
lenient (unknown keys kept or ignored) because AISBench adds keys between releases.
"""

from __future__ import annotations

import csv
import io
import math
import re
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

TS_DIR = re.compile(r"^\d{8}_\d{6}$")
SUMMARY_FILE = re.compile(r"^summary_(\d{8}_\d{6})\.(txt|csv|md)$")
# `[TINFER-RUNTIME-001] warmup failed. Exit task …` — AISBench's coded errors in its logs
ERROR_CODE = re.compile(r"\[([A-Z]+(?:-[A-Z]+)*-\d{3})\]\s*(.*)")
VISIT = re.compile(r"\s*\|\s*Visit https?://\S+.*$")
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt): ")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")

Mode = Literal["accuracy", "perf", "agent"]


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def ts_of_dir(name: str, tz: tzinfo | None = None) -> datetime | None:
    """The start time AISBench encodes in a run dir name: the eval host's local time
    (`datetime.now()`, ais_bench/benchmark/cli/utils.py), so read in the host's zone `tz`;
    naive when none is given."""
    if not TS_DIR.match(name):
        return None
    try:
        ts = datetime.strptime(name, "%Y%m%d_%H%M%S")
    except ValueError:
        return None
    return ts.replace(tzinfo=tz) if tz is not None else ts


OFFSET = re.compile(r"^([+-])(\d{2}):?(\d{2})$")


def parse_tz(text: str) -> tzinfo:
    """An IANA zone (`Asia/Shanghai`) or a UTC offset as `date +%z` prints it (`+0800`).
    Raises ValueError for anything else."""
    text = text.strip()
    m = OFFSET.match(text)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        hours, minutes = int(m.group(2)), int(m.group(3))
        if hours > 23 or minutes > 59:
            raise ValueError(f"{text!r} is not a UTC offset")
        return timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{text!r} is not a time zone (an IANA name like Asia/Shanghai, or +0800)") from None


# ---- results/<abbr>/<dataset>.json ---------------------------------------------------------------

NOT_METRICS = frozenset({"schema_version", "run_id", "predictions_path"})

class DatasetResult(BaseModel):
    """One results file. `accuracy` is a percentage; SWE-bench's evaluator adds the instance
    counts (ais_bench/benchmark/tasks/swebench/swebench_eval.py); other evaluators name their
    metric differently (`pass@1`, `score` …), kept in `metrics`."""

    model_config = ConfigDict(extra="allow")

    accuracy: float | None = None
    submitted_accuracy: float | None = None
    total_instances: int | None = None
    submitted_instances: int | None = None
    completed_instances: int | None = None
    resolved_instances: int | None = None
    unresolved_instances: int | None = None
    empty_patch_instances: int | None = None
    error_instances: int | None = None
    harness_exit_code: int | None = None

    @field_validator("accuracy", "submitted_accuracy", mode="before")
    @classmethod
    def _number(cls, v: Any) -> Any:
        # a result written as "50.00" or null must not fail the whole file
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                return None
        return v

    @property
    def metrics(self) -> dict[str, float]:
        """Every numeric top-level value, the evaluator's own names."""
        out: dict[str, float] = {}
        if self.accuracy is not None:
            out["accuracy"] = self.accuracy
        if self.submitted_accuracy is not None:
            out["submitted_accuracy"] = self.submitted_accuracy
        for key, value in (self.model_extra or {}).items():
            if key in NOT_METRICS:
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[key] = float(value)
        return out

    @property
    def is_swebench(self) -> bool:
        return self.total_instances is not None or self.harness_exit_code is not None

    @property
    def no_report(self) -> bool:
        """SWE-bench's evaluator without a harness report (the harness crashed, or was killed)
        writes only {harness_exit_code, predictions_path, run_id} (swebench_eval.py): a failed
        evaluation, not a result."""
        return self.harness_exit_code is not None and self.total_instances is None and self.accuracy is None

    @property
    def score(self) -> tuple[str, float] | None:
        """The headline figure (name, percentage): accuracy, else the first numeric metric."""
        if self.accuracy is not None and math.isfinite(self.accuracy):
            return "accuracy", self.accuracy
        for key, value in self.metrics.items():
            if key != "accuracy" and math.isfinite(value) and not key.endswith(("_instances", "_code")):
                return key, value
        return None


# ---- performances/<abbr>/<dataset>.{json,csv} ------------------------------------------------------

QUANTITY = re.compile(r"^\s*(-?[0-9.]+(?:[eE][-+]?\d+)?)\s*([A-Za-z/%]*)\s*$")


class Quantity(BaseModel):
    """"42.429 ms" → 42.429, "ms"; a bare number has no unit."""

    value: float | None
    unit: str = ""
    raw: str = ""

    @classmethod
    def parse(cls, raw: Any) -> Quantity:
        if isinstance(raw, bool) or raw is None:
            return cls(value=None, raw=str(raw))
        if isinstance(raw, int | float):
            return cls(value=float(raw), raw=str(raw))
        text = str(raw)
        m = QUANTITY.match(text)
        if not m:
            return cls(value=None, raw=text)
        try:
            return cls(value=float(m.group(1)), unit=m.group(2), raw=text)
        except ValueError:
            return cls(value=None, raw=text)

    def __str__(self) -> str:
        return self.raw


class PerfCommon(BaseModel):
    """performances/<abbr>/<dataset>.json: {metric: {stage: value}}; strings carry units."""

    metrics: dict[str, dict[str, Quantity]] = Field(default_factory=dict)

    @classmethod
    def parse(cls, data: Any) -> PerfCommon:
        if not isinstance(data, dict):
            raise ValueError("not a JSON object of metrics")
        out: dict[str, dict[str, Quantity]] = {}
        for metric, stages in data.items():
            if isinstance(stages, dict):
                out[str(metric)] = {str(s): Quantity.parse(v) for s, v in stages.items()}
            else:
                out[str(metric)] = {"total": Quantity.parse(stages)}
        return cls(metrics=out)

    def get(self, metric: str, stage: str = "total") -> Quantity | None:
        return self.metrics.get(metric, {}).get(stage)


PERCENTILE_COLUMNS = ("Average", "Min", "Max", "Median", "P75", "P90", "P99")


class PerfRow(BaseModel):
    """One row of performances/<abbr>/<dataset>.csv."""

    metric: str
    stage: str
    stats: dict[str, Quantity]
    n: int | None = None


class PerfTable(BaseModel):
    rows: list[PerfRow] = Field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> PerfTable:
        reader = csv.reader(io.StringIO(text))
        header = next(reader, None)
        if not header or len(header) < 3:
            raise ValueError("no header row")
        cols = [h.strip() for h in header]
        rows = []
        for raw in reader:
            if not raw or not raw[0].strip():
                continue
            cells = dict(zip(cols, raw, strict=False))
            n_raw = cells.get("N", "").strip()
            stats = {c: Quantity.parse(cells[c]) for c in cols[2:] if c != "N" and c in cells}
            rows.append(PerfRow(metric=raw[0].strip(), stage=(raw[1].strip() if len(raw) > 1 else ""), stats=stats,
                                n=int(n_raw) if n_raw.isdigit() else None))
        return cls(rows=rows)

    def row(self, metric: str, stage: str = "total") -> PerfRow | None:
        for r in self.rows:
            if r.metric == metric and r.stage == stage:
                return r
        for r in self.rows:
            if r.metric == metric:
                return r
        return None


# ---- predictions/<abbr>/<dataset>.jsonl ----------------------------------------------------------

class PredictionCounts(BaseModel):
    """What the predictions file says about requests: how many answered, how many failed."""

    total: int = 0
    failed: int = 0
    empty: int = 0
    unreadable: int = 0


def count_predictions(data: bytes) -> PredictionCounts:
    import orjson

    c = PredictionCounts()
    for line in data.splitlines():
        if not line.strip():
            continue
        c.total += 1
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            c.unreadable += 1
            continue
        if not isinstance(row, dict):
            c.unreadable += 1
            continue
        if row.get("success") is False:
            c.failed += 1
        elif not str(row.get("prediction") or "").strip():
            c.empty += 1
    return c


# ---- summary/summary_<ts>.txt ------------------------------------------------------------------

def summary_table(text: str) -> str:
    """The table AISBench prints, from its summary file: the first block after a `^^^` rule
    (the tabulate format), without the rules; the whole text when the markers are absent."""
    lines = strip_ansi(text).splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("^^^")), None)
    if start is None:
        return "\n".join(lines).strip()
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("$$$")), len(lines))
    return "\n".join(lines[start + 1:end]).strip()


class SummaryRow(BaseModel):
    dataset: str
    version: str
    metric: str
    mode: str
    values: dict[str, str] = Field(default_factory=dict, description="model abbr → value as printed ('-' = none)")


def parse_summary_csv(text: str) -> list[SummaryRow]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header or header[:4] != ["dataset", "version", "metric", "mode"]:
        return []
    rows = []
    for raw in reader:
        if len(raw) < 4:
            continue
        rows.append(SummaryRow(dataset=raw[0], version=raw[1], metric=raw[2], mode=raw[3],
                               values=dict(zip(header[4:], raw[4:], strict=False))))
    return rows


# ---- logs/{infer,eval}/<abbr>/<dataset>.out ------------------------------------------------------

class LogError(BaseModel):
    """The coded error AISBench logged for a dataset, with the traceback that led to it."""

    code: str | None = None
    message: str
    traceback: str | None = None


def log_error(text: str) -> LogError | None:
    """The last error in an infer/eval log: its AISBench code and message (or the exception
    line when it has no code), and the traceback that led to it."""
    lines = strip_ansi(text).splitlines()
    found: LogError | None = None
    tb_start: int | None = None
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            tb_start = i
            continue
        coded = ERROR_CODE.search(line)
        if coded and ("ERROR" in line or "Error" in line):
            message = VISIT.sub("", coded.group(2)).strip()
            tb = "\n".join(lines[tb_start:i + 1]) if tb_start is not None else None
            found = LogError(code=coded.group(1), message=message[:500], traceback=tb)
            tb_start = None
        elif tb_start is not None and EXCEPTION_LINE.match(line):
            found = LogError(code=None, message=line.strip()[:500], traceback="\n".join(lines[tb_start:i + 1]))
            tb_start = None
    return found


# ---- what evaldesk keeps: task.json in the task dir, the hosts file, the task table -------------

class TaskMeta(BaseModel):
    """`<task dir>/task.json`: what evaldesk launched. Never holds the API key, only the name
    of the environment variable it was read from."""

    model_config = ConfigDict(extra="ignore")

    id: str
    suite: str | None = None
    mode: Mode = "accuracy"
    model: str | None = None
    model_abbr: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    max_out_len: int | None = None
    batch_size: int | None = None
    num_prompts: int | None = None
    created_at: datetime | None = None
    launched_at: datetime | None = None
    host: str | None = None
    command: list[str] = Field(default_factory=list)


class HostEntry(BaseModel):
    """One eval host, as the runbook's hosts file describes it (host/port/user/image/
    benchmark_src/task_root), plus what evaldesk may need to reach and use it."""

    model_config = ConfigDict(extra="ignore")

    name: str = ""
    host: str
    port: int | None = None
    user: str | None = None
    image: str | None = Field(None, description="the eval container's image (docker mode)")
    benchmark_src: str = Field(description="the AISBench source dir on the host; runs start there")
    task_root: str = Field("/tmp/ais-bench-eval", description="task dirs live under it")
    exec: Literal["docker", "host"] | None = Field(
        None, description="docker: run in a container of `image` (the default when an image is set); host: directly")
    container_prefix: str = "ais-bench-eval-"
    mounts: list[str] = Field(default_factory=lambda: ["/home", "/data", "/tmp", "/mnt"])
    ais_bench: str = Field("ais_bench", description="the command on the host (or in the container)")
    env: dict[str, str] = Field(default_factory=dict, description="exported by run.sh, e.g. AIS_BENCH_DATASETS_CACHE")
    tokenizer_path: str | None = Field(None, description="perf mode: the model's tokenizer dir on the host")
    agent_datasets: dict[str, str] = Field(
        default_factory=dict, description="agent suites: dataset name (verified, verified_mini, multilingual, "
                                          "terminal_bench_2, terminal_bench_2_mini) → its path on the host")
    tz: str | None = Field(None, description="the host's time zone (Asia/Shanghai, +0800): AISBench names run dirs "
                                             "in the host's local time; unset: asked of the host (`date +%z`)")
    identity_file: str | None = None
    known_hosts: str | None = None
    proxy_jump: str | None = None
    insecure_no_host_key_check: bool = False
    api_key_env: str | None = None

    @field_validator("tz")
    @classmethod
    def _tz(cls, v: str | None) -> str | None:
        if v is not None:
            parse_tz(v)
        return v

    @property
    def label(self) -> str:
        return self.name or self.host

    @property
    def uses_docker(self) -> bool:
        return self.exec == "docker" or (self.exec is None and bool(self.image))


class PreflightStep(BaseModel):
    step: str
    ok: bool
    evidence: str


class TaskRow(BaseModel):
    """One row of the task table: a task evaldesk was asked to run, launched or not."""

    model_config = ConfigDict(extra="ignore")

    id: str
    where: str = Field(description="host label, or 'local'")
    task_root: str
    suite: str
    model: str
    api_base: str
    api_key_env: str | None = None
    mode: Mode = "accuracy"
    max_out_len: int | None = None
    batch_size: int | None = None
    num_prompts: int | None = None
    created_at: datetime
    launched_at: datetime | None = None
    preflight: list[PreflightStep] = Field(default_factory=list)
    preflight_at: datetime | None = None
    max_model_len: int | None = Field(None, description="what the model server reported, for the guidance")
    removed_at: datetime | None = None
    origin: Literal["evaldesk", "runbook"] = Field(
        "evaldesk", description="runbook: a task of the runbook's own eval_run.py, from its task table (read only)")
    container: str | None = Field(None, description="runbook: the task's container")
    output_ts: str | None = Field(None, description="runbook: the run dir its eval_status.py last saw")

    @property
    def missing(self) -> list[str]:
        if self.origin == "runbook":
            return []  # its script ran with its own defaults
        out = []
        if self.max_out_len is None:
            out.append("max_out_len")
        if self.batch_size is None:
            out.append("batch_size")
        return out

    @property
    def blocked_by(self) -> PreflightStep | None:
        return next((s for s in self.preflight if not s.ok), None)


class TaskTableFile(BaseModel):
    tasks: list[TaskRow] = Field(default_factory=list)
