"""Read one task dir — local or over SFTP, through the same `JobFS` — into a `TaskReading`.

Only small files are read whole (results, perf JSON/CSV, task.json, exit code, pid); logs
and predictions are read bounded. The run's dumped config (`configs/<ts>_<pid>.py`, API key
included) is parsed for its model and dataset abbrs only (services.aisbench.runconfig): what
the run was asked to measure, in the tool's own names.
"""

from __future__ import annotations

import asyncio
import posixpath
from datetime import UTC, datetime, tzinfo

import orjson
from pydantic import BaseModel, Field, ValidationError

from services.aisbench.formats import (
    SUMMARY_FILE,
    TS_DIR,
    DatasetResult,
    LogError,
    PerfCommon,
    PerfTable,
    PredictionCounts,
    SummaryRow,
    TaskMeta,
    count_predictions,
    log_error,
    parse_summary_csv,
    ts_of_dir,
)
from services.aisbench.runconfig import parse_run_config
from services.transport.fs import JobFS, NotRegularFile, TooLarge

SMALL = 4 * 1024 * 1024  # results, perf files, task.json
PREDICTIONS_MAX = 64 * 1024 * 1024
LOG_TAIL = 64 * 1024
CONFIG_MAX = 16 * 1024 * 1024  # a dumped config of many datasets (mmlu's 57) with their prompts


class DatasetReading(BaseModel):
    """One (model abbr, dataset) pair of the latest run: its files, as found."""

    abbr: str
    dataset: str
    result: DatasetResult | None = None
    perf: PerfCommon | None = None
    perf_table: PerfTable | None = None
    predictions: PredictionCounts | None = None
    error: LogError | None = None
    files: dict[str, str] = Field(default_factory=dict, description="role → path relative to the task dir")
    problems: list[str] = Field(default_factory=list)
    mtime: float | None = None

    @property
    def key(self) -> str:
        return f"{self.abbr}/{self.dataset}"

    @property
    def measured(self) -> bool:
        """A results file that is a result, or a perf file."""
        return (self.result is not None and not self.result.no_report) or self.perf is not None


class TaskReading(BaseModel):
    task_id: str
    task_dir: str
    meta: TaskMeta | None = None
    has_run_sh: bool = False
    exit_code: int | None = None
    exit_code_raw: str | None = None
    exit_mtime: float | None = None
    pid: int | None = None
    alive: bool | None = Field(None, description="None: cannot tell")
    alive_evidence: str | None = Field(None, description="how alive was told (docker mode: the host's docker)")
    run_log_mtime: float | None = None
    run_log: str | None = Field(None, description="the task's own log: run.log (evaldesk), aisbench.log (the runbook)")
    bootstrap: bool = Field(False, description="a task dir of the runbook's eval_run.py (bootstrap.sh)")
    runs: list[str] = Field(default_factory=list, description="run dirs under outputs/, oldest first")
    datasets: list[DatasetReading] = Field(default_factory=list)
    config_rel: str | None = Field(None, description="the latest dumped config of the latest run")
    planned_models: list[str] = Field(default_factory=list, description="model abbrs of the dumped config")
    planned_datasets: list[str] = Field(default_factory=list, description="dataset abbrs of the dumped config")
    summary_rel: str | None = None
    summary_rows: list[SummaryRow] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    newest_mtime: float | None = None

    @property
    def latest(self) -> str | None:
        return self.runs[-1] if self.runs else None

    run_started_at: datetime | None = Field(None, description="the latest run dir's name, in the host's zone")

    @property
    def launched_at(self) -> datetime | None:
        if self.meta and self.meta.launched_at:
            return self.meta.launched_at
        return self.run_started_at


async def _small(fs: JobFS, path: str, problems: list[str], rel: str, limit: int = SMALL) -> bytes | None:
    try:
        return await fs.read_regular(path, limit)
    except FileNotFoundError:
        return None
    except (NotRegularFile, TooLarge) as exc:
        problems.append(f"{rel}: {exc}")
    except OSError as exc:
        problems.append(f"{rel}: cannot read: {exc.strerror or exc}")
    except asyncio.TimeoutError:  # noqa: UP041 - asyncssh raises the old name
        problems.append(f"{rel}: no answer while reading")
    return None


async def _tail(fs: JobFS, path: str, size: int, n: int = LOG_TAIL) -> bytes:
    try:
        return await fs.read_bytes(path, max(0, size - n), n)
    except (OSError, asyncio.TimeoutError):  # noqa: UP041
        return b""


async def _names(fs: JobFS, path: str) -> list[str]:
    try:
        return sorted(await fs.list_dir(path))
    except (OSError, asyncio.TimeoutError):  # noqa: UP041
        return []


async def looks_like_task_dir(fs: JobFS, path: str) -> bool:
    names = set(await _names(fs, path))
    return "task.json" in names or "run.sh" in names or ("outputs" in names and "cfg" in names)


async def read_task(fs: JobFS, task_dir: str, *, check_pid: bool = True, tz: tzinfo = UTC) -> TaskReading:
    """`tz`: the eval host's zone, which AISBench's run dir names are in."""
    task_id = posixpath.basename(task_dir.rstrip("/"))
    r = TaskReading(task_id=task_id, task_dir=task_dir)
    names = set(await _names(fs, task_dir))
    mtimes: list[float] = []
    if "task.json" in names:
        raw = await _small(fs, f"{task_dir}/task.json", r.problems, "task.json")
        if raw is not None:
            try:
                r.meta = TaskMeta.model_validate_json(raw)
            except ValidationError as exc:
                r.problems.append(f"task.json: not a task description: {exc.errors()[0]['msg']}")
    r.has_run_sh = "run.sh" in names
    if "exit_code" in names:
        st = await fs.stat(f"{task_dir}/exit_code")
        raw = await _small(fs, f"{task_dir}/exit_code", r.problems, "exit_code", 4096)
        if raw is not None:
            r.exit_code_raw = raw.decode("utf-8", "replace").strip()
            try:
                r.exit_code = int(r.exit_code_raw.split()[0]) if r.exit_code_raw else None
            except ValueError:
                r.problems.append(f"exit_code: not a number: {r.exit_code_raw[:40]!r}")
            if r.exit_code is None and not r.exit_code_raw:
                r.problems.append("exit_code is empty")
        if st is not None:
            r.exit_mtime = st.mtime
            mtimes.append(st.mtime)
    r.bootstrap = "bootstrap.sh" in names
    # the runbook's bootstrap.sh keeps `setsid bash run.sh &`'s $! — run.sh's own pid
    pid_name = "pid" if "pid" in names else "bootstrap.pid" if "bootstrap.pid" in names else None
    if pid_name is not None:
        raw = await _small(fs, f"{task_dir}/{pid_name}", r.problems, pid_name, 4096)
        if raw is not None and raw.strip().isdigit():
            r.pid = int(raw.strip())
            if check_pid and r.exit_code is None:
                # /proc is readable over SFTP as well as here: a run killed without a trace has no
                # exit code and no process
                r.alive = await fs.stat(f"/proc/{r.pid}") is not None
    r.run_log = "run.log" if "run.log" in names else "aisbench.log" if "aisbench.log" in names else None
    if r.run_log is not None:
        st = await fs.stat(f"{task_dir}/{r.run_log}")
        if st is not None:
            r.run_log_mtime = st.mtime
            mtimes.append(st.mtime)
    if "outputs" in names:
        r.runs = [n for n in await _names(fs, f"{task_dir}/outputs") if TS_DIR.match(n)]
    if r.latest:
        started = ts_of_dir(r.latest, tz)
        r.run_started_at = started.astimezone(UTC) if started else None
        await _read_run(fs, task_dir, f"outputs/{r.latest}", r, mtimes)
    r.newest_mtime = max(mtimes) if mtimes else None
    return r


async def _read_run(fs: JobFS, task_dir: str, run_rel: str, r: TaskReading, mtimes: list[float]) -> None:
    run = f"{task_dir}/{run_rel}"
    pairs: dict[tuple[str, str], DatasetReading] = {}

    def pair(abbr: str, dataset: str) -> DatasetReading:
        key = (abbr, dataset)
        if key not in pairs:
            pairs[key] = DatasetReading(abbr=abbr, dataset=dataset)
        return pairs[key]

    async def walk(kind: str, suffix: str, role: str) -> None:
        for abbr in await _names(fs, f"{run}/{kind}"):
            for name in await _names(fs, f"{run}/{kind}/{abbr}"):
                if not name.endswith(suffix) or name.startswith(("tmp_", ".")):
                    continue
                stem = name[: -len(suffix)]
                if kind == "performances" and stem.endswith(("_details", "_plot")):
                    continue
                pair(abbr, stem).files[role] = f"{run_rel}/{kind}/{abbr}/{name}"

    await walk("results", ".json", "result")
    await walk("performances", ".json", "perf")
    await walk("performances", ".csv", "perf_csv")
    await walk("predictions", ".jsonl", "predictions")
    for stage in ("infer", "eval"):
        for abbr in await _names(fs, f"{run}/logs/{stage}"):
            for name in await _names(fs, f"{run}/logs/{stage}/{abbr}"):
                if name.endswith(".out"):
                    pair(abbr, name[: -len(".out")]).files[f"{stage}_log"] = f"{run_rel}/logs/{stage}/{abbr}/{name}"
    configs = [n for n in await _names(fs, f"{run}/configs") if n.endswith(".py")]
    if configs:
        # a --reuse dumps a new config beside the first; names start with the time: the last is the latest
        rel = f"{run_rel}/configs/{configs[-1]}"
        raw = await _small(fs, f"{task_dir}/{rel}", r.problems, rel, CONFIG_MAX)
        if raw is not None:
            try:
                cfg = parse_run_config(raw.decode("utf-8", "replace"))
            except ValueError as exc:
                r.problems.append(f"{rel}: {exc}")
            else:
                r.config_rel, r.planned_models, r.planned_datasets = rel, cfg.models, cfg.datasets
    summaries = sorted(n for n in await _names(fs, f"{run}/summary") if SUMMARY_FILE.match(n))
    txts = [n for n in summaries if n.endswith(".txt")]
    if txts:
        r.summary_rel = f"{run_rel}/summary/{txts[-1]}"
        csv_name = txts[-1][: -len(".txt")] + ".csv"
        if csv_name in summaries:
            raw = await _small(fs, f"{run}/summary/{csv_name}", r.problems, f"{run_rel}/summary/{csv_name}")
            if raw is not None:
                r.summary_rows = parse_summary_csv(raw.decode("utf-8", "replace"))
    await asyncio.gather(*(_read_dataset(fs, task_dir, d) for d in pairs.values()))
    r.datasets = sorted(pairs.values(), key=lambda d: (d.abbr, d.dataset))
    mtimes += [d.mtime for d in r.datasets if d.mtime is not None]


async def _read_dataset(fs: JobFS, task_dir: str, d: DatasetReading) -> None:
    mt: list[float] = []

    async def load(role: str, limit: int = SMALL) -> bytes | None:
        rel = d.files.get(role)
        if rel is None:
            return None
        st = await fs.stat(f"{task_dir}/{rel}")
        if st is not None:
            mt.append(st.mtime)
        return await _small(fs, f"{task_dir}/{rel}", d.problems, rel, limit)

    raw = await load("result")
    if raw is not None:
        try:
            d.result = DatasetResult.model_validate(orjson.loads(raw))
        except (orjson.JSONDecodeError, ValidationError, TypeError) as exc:
            d.problems.append(f"{d.files['result']}: unreadable results file: {str(exc)[:200]}")
    raw = await load("perf")
    if raw is not None:
        try:
            d.perf = PerfCommon.parse(orjson.loads(raw))
        except (orjson.JSONDecodeError, ValueError) as exc:
            d.problems.append(f"{d.files['perf']}: unreadable perf file: {str(exc)[:200]}")
    raw = await load("perf_csv")
    if raw is not None:
        try:
            d.perf_table = PerfTable.parse(raw.decode("utf-8", "replace"))
        except ValueError as exc:
            d.problems.append(f"{d.files['perf_csv']}: unreadable perf table: {exc}")
    raw = await load("predictions", PREDICTIONS_MAX)
    if raw is not None:
        d.predictions = count_predictions(raw)
    if not d.measured:
        # no figures: the logs say why (infer first: a failed inference is where it starts)
        for role in ("infer_log", "eval_log"):
            rel = d.files.get(role)
            if rel is None:
                continue
            st = await fs.stat(f"{task_dir}/{rel}")
            if st is None:
                continue
            mt.append(st.mtime)
            err = log_error((await _tail(fs, f"{task_dir}/{rel}", st.size)).decode("utf-8", "replace"))
            if err is not None:
                d.error = err
                break
    d.mtime = max(mt) if mt else None

