"""`aisbench+ssh://host/task_root` and local task roots: AISBench tasks as experiments.

A scan lists the task root, reads every task dir (`reading.read_task`; a finished task whose
exit code and run.log have not changed is not read again) and the task table's rows for this
root, and assembles one `TaskExperiment` per task (`assemble`). Files are read through a
`JobFS`: local disk, or SFTP on the host's pooled SSH connection. Commands (preflight, launch)
run through a `Runner` on the same host.

When the host cannot be reached, the last good Snapshot comes back with every experiment
marked stale and the error listed; with none yet, `SourceUnavailable` is raised.
"""

from __future__ import annotations

import asyncio
import posixpath
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from services.aisbench import runbook
from services.aisbench.assemble import assemble
from services.aisbench.formats import HostEntry, TaskRow, log_error, parse_tz, summary_table
from services.aisbench.liveness import in_container
from services.aisbench.models import VIEW_DIR, DatasetTrial, TaskExperiment
from services.aisbench.reading import TaskReading, looks_like_task_dir, read_task
from services.aisbench.table import LOCAL, TableError, TaskTable
from services.aisbench.taskdir import container_name
from services.aisbench.view import ViewFS, results_view
from services.core.models import Experiment, Snapshot, SourceError, Trial
from services.core.plain import copy_with
from services.core.results import ResultView
from services.core.source import ProgressFn, SourceUnavailable, TrialEvidence, TrialFile
from services.transport.fs import FileStat, JobFS
from services.transport.process import Runner

LOG_TAIL = 64 * 1024

TRIAL_FILES: tuple[TrialFile, ...] = (
    TrialFile("log", "infer log", "infer.log"),
    TrialFile("eval", "eval log", "eval.log"),
    TrialFile("result", "results / perf file", "result.json"),
    TrialFile("summary", "summary (perf: the CSV)", "summary.txt"),
    TrialFile("run", "run.log of the task", "run.log"),
)


class AISBenchSource:
    trial_files = TRIAL_FILES

    def __init__(self, *, where: str, task_root: str, fs: JobFS, runner: Runner, table: TaskTable,
                 host_entry: HostEntry | None, label: str, kind: str, host: str | None = None,
                 concurrency: int = 8, runbook_tasks: Path | None = None) -> None:
        self.where = where
        self.task_root = task_root.rstrip("/") or "/"
        self.root = self.task_root
        self._fs = fs
        self.runner = runner
        self.table = table
        self.host_entry = host_entry
        self.label = label
        self.kind = kind
        self.host = host  # the SSH host previews and records name; None: this machine
        self.concurrency = concurrency
        self.runbook_tasks = runbook_tasks  # the runbook's eval_run.py task table (read only)
        self.view = ViewFS(fs)
        self._cache: dict[str, tuple[tuple[FileStat | None, FileStat | None], TaskReading]] = {}
        self.last_good: Snapshot | None = None
        self.failing_since: datetime | None = None
        self._tz: tzinfo | None = None

    # ---- Source ----------------------------------------------------------------------------
    def fs(self) -> JobFS:
        """Files as the trials view opens them: a dataset's logs and results under stable names
        (`<task dir>/by-dataset/<abbr>/<dataset>/infer.log` …), everything else as it is."""
        return self.view

    def task_fs(self) -> JobFS:
        """The task root's real files (what the write path acts on)."""
        return self._fs

    async def close(self) -> None:
        close = getattr(self._fs, "close", None)
        if close is not None:
            await close()

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        try:
            snap = await self._scan(progress)
        except SourceUnavailable as exc:
            return self._stale(exc)
        self.last_good = snap
        self.failing_since = None
        return snap

    def _stale(self, exc: SourceUnavailable) -> Snapshot:
        if self.last_good is None:
            raise exc
        now = datetime.now(UTC)
        self.failing_since = self.failing_since or now
        err = SourceError(source=self.label, where=exc.where, message=exc.message)
        stale = [copy_with(e, stale_since=self.failing_since) for e in self.last_good.experiments]
        return copy_with(self.last_good, experiments=stale, taken_at=now, errors=[*self.last_good.errors, err])

    async def _scan(self, progress: ProgressFn | None) -> Snapshot:
        fs = self._fs
        errors: list[SourceError] = []
        root_st = await fs.stat(self.task_root)
        names: list[str] = []
        if root_st is None:
            errors.append(SourceError(source=self.label, where=self.task_root,
                                      message="the task root does not exist (yet)"))
        elif not root_st.is_dir:
            raise SourceUnavailable(self.label, f"{self.task_root} is not a directory")
        else:
            try:
                names = sorted(n for n in await fs.list_dir(self.task_root) if not n.startswith("."))
            except PermissionError:
                raise SourceUnavailable(self.label, f"permission denied: {self.task_root}") from None
        try:
            rows = {r.id: r for r in await asyncio.to_thread(self.table.rows)}
        except TableError as exc:
            errors.append(SourceError(source=self.label, where=str(self.table.path), message=str(exc)))
            rows = {}
        tz = await self.host_tz(errors) if names else UTC
        sem = asyncio.Semaphore(self.concurrency)
        done = [0]
        total = len(names)

        async def one(name: str) -> TaskReading | None:
            path = posixpath.join(self.task_root, name)
            async with sem:
                st = await fs.stat(path)
                if st is None or not st.is_dir or not await looks_like_task_dir(fs, path):
                    return None
                reading = await self._read(path, tz)
            done[0] += 1
            if progress:
                progress(done[0], total, f"{self.label}: {name}")
            return reading

        readings = [r for r in await asyncio.gather(*(one(n) for n in names)) if r is not None]
        rows = {**self._runbook_rows(errors), **rows}  # evaldesk's own row wins
        entry = self.host_entry
        containers: dict[str, str] = {}
        for r in readings:
            row = rows.get(r.task_id)
            if r.exit_code is not None:
                continue
            if row is not None and row.container:
                containers[r.task_id] = row.container
            elif entry is not None and (entry.uses_docker or r.bootstrap):
                containers[r.task_id] = container_name(entry, r.task_id)
        await asyncio.gather(*(self._probe_container(r, containers[r.task_id]) for r in readings
                               if r.task_id in containers))
        by_id = {r.task_id: r for r in readings}
        exps: list[Experiment] = []
        for task_id in sorted(set(by_id) | set(rows)):
            exp = assemble(task_id, reading=by_id.get(task_id), row=rows.get(task_id), host=self.host_entry,
                           where=self.where, task_root=self.task_root, source_kind=self.kind,
                           source_label=self.label)
            exps.append(exp)
            for problem in exp.problems:
                errors.append(SourceError(source=self.label, where=exp.path, message=problem))
        self.view.update(exps)
        return Snapshot(source=self.label, taken_at=datetime.now(UTC), experiments=exps, errors=errors,
                        stats={"tasks": len(exps), "task_dirs": len(readings)})

    async def _probe_container(self, r: TaskReading, container: str) -> None:
        r.alive, r.alive_evidence = await in_container(self.runner, container, r.pid)

    def _runbook_rows(self, errors: list[SourceError]) -> dict[str, TaskRow]:
        """The runbook's own tasks on this host and task root (its eval_run.py's task table)."""
        if self.runbook_tasks is None or self.host_entry is None:
            return {}
        tasks, problem = runbook.load(self.runbook_tasks)
        if problem:
            errors.append(SourceError(source=self.label, where=str(self.runbook_tasks), message=problem))
        return {r.id: r for r in runbook.rows_for(tasks, self.host_entry, self.where, self.task_root)}

    async def host_tz(self, errors: list[SourceError] | None = None) -> tzinfo:
        """The eval host's time zone, which AISBench names run dirs in: the host entry's `tz`;
        else this machine's for a local root; else what the host says (`date +%z`), asked once.
        Unknown: UTC, and the scan says so."""
        if self._tz is not None:
            return self._tz
        entry = self.host_entry
        if entry is not None and entry.tz:
            self._tz = parse_tz(entry.tz)
        elif self.runner.host is None:
            self._tz = datetime.now().astimezone().tzinfo or UTC
        else:
            why = ""
            try:
                res = await self.runner.run(["date", "+%z"], timeout_s=15)
                if res.exit_code == 0:
                    self._tz = parse_tz(res.stdout_tail.strip().splitlines()[-1])
                else:
                    why = (res.stderr_tail or res.error or f"exit {res.exit_code}").strip()[:200]
            except (OSError, TimeoutError, ValueError, IndexError, SourceUnavailable) as exc:
                why = str(exc)[:200]
            if self._tz is None:
                if errors is not None:
                    errors.append(SourceError(source=self.label, where=self.where, message=(
                        f"cannot tell the host's time zone ({why}): run dir times are read as UTC; "
                        "set `tz` in its hosts entry")))
                return UTC  # asked again on the next scan
        return self._tz

    async def _read(self, task_dir: str, tz: tzinfo = UTC) -> TaskReading:
        """A finished task is read again only when its exit code or run.log changed."""
        fs = self._fs
        log = "run.log" if await fs.stat(f"{task_dir}/run.log") is not None else runbook.RUN_LOG
        key = (await fs.stat(f"{task_dir}/exit_code"), await fs.stat(f"{task_dir}/{log}"))
        cached = self._cache.get(task_dir)
        if cached is not None and cached[0] == key and key[0] is not None:
            return cached[1]
        reading = await read_task(fs, task_dir, check_pid=not (self.host_entry and self.host_entry.uses_docker),
                                  tz=tz)
        self._cache[task_dir] = (key, reading)
        return reading

    async def evidence(self, exp: Experiment, trial: Trial) -> TrialEvidence:
        ev = TrialEvidence(verifier_label="results")
        if not isinstance(trial, DatasetTrial):
            return ev
        ev.exception_type = trial.exception_type
        ev.exception_message = trial.exception_message
        ev.verifier_excerpt = "\n".join(figures(trial)) or None
        for role in ("infer_log", "eval_log"):
            rel = trial.files.get(role)
            if rel is None or trial.status.value != "errored":
                continue
            path = posixpath.join(exp.path, rel)
            try:
                st = await self._fs.stat(path)
                if st is None:
                    continue
                data = await self._fs.read_bytes(path, max(0, st.size - LOG_TAIL), LOG_TAIL)
            except (OSError, asyncio.TimeoutError) as exc:  # noqa: UP041
                ev.problems.append(f"{rel}: {exc}")
                continue
            err = log_error(data.decode("utf-8", "replace"))
            if err is not None:
                ev.exception_type = ev.exception_type or err.code
                ev.exception_message = err.message
                ev.traceback = err.traceback
                break
        if trial.parse_error:
            ev.problems.append(trial.parse_error)
        return ev

    async def results(self, exp: Experiment) -> ResultView | None:
        if not isinstance(exp, TaskExperiment):
            return None
        summary = None
        if exp.task.summary_rel:
            try:
                raw = await self._fs.read_regular(posixpath.join(exp.path, exp.task.summary_rel), 1024 * 1024)
                summary = summary_table(raw.decode("utf-8", "replace"))
            except (OSError, asyncio.TimeoutError) as exc:  # noqa: UP041
                summary = f"cannot read {exp.task.summary_rel}: {exc}"
        return results_view(exp, summary)

    # ---- the task table -------------------------------------------------------------------------
    async def row(self, task_id: str) -> TaskRow | None:
        return await asyncio.to_thread(self.table.get, task_id)

    async def put_row(self, row: TaskRow) -> None:
        await asyncio.to_thread(self.table.put, row)

    @property
    def is_local(self) -> bool:
        return self.where == LOCAL


def figures(t: DatasetTrial) -> list[str]:
    """A dataset's figures as a few lines of text (the diagnose panel, batch tables)."""
    out: list[str] = []
    if t.kind == "swebench" and t.swebench:
        s = t.swebench
        out.append(f"resolved {s.get('resolved', '?')} / {s.get('total', '?')} instances"
                   f" ({t.metrics.get('accuracy', float('nan')):.2f}%), errors {s.get('error', 0)},"
                   f" empty patches {s.get('empty_patch', 0)}")
        if s.get("harness_exit_code"):
            out.append(f"harness exit code {s['harness_exit_code']}")
    elif t.metric is not None:
        out.append(f"{t.metric} {t.metrics.get(t.metric, float('nan')):.2f}")
        rest = [f"{k} {v:g}" for k, v in t.metrics.items() if k != t.metric]
        if rest:
            out.append(", ".join(rest))
    if t.perf_common:
        keys = ("Request Throughput", "Output Token Throughput", "Total Requests", "Failed Requests",
                "Benchmark Duration")
        out.append("; ".join(f"{k} {t.perf_common[k]}" for k in keys if k in t.perf_common))
    for metric in ("TTFT", "TPOT"):
        stats = t.perf_stats.get(metric)
        if stats:
            unit = t.perf_units.get(metric, "")
            cells = ", ".join(f"{k} {v:g}" for k, v in stats.items() if v is not None and k in (
                "Median", "P90", "P99"))
            out.append(f"{metric} ({unit}): {cells}")
    if t.predictions is not None and t.predictions.total:
        p = t.predictions
        out.append(f"{p.total} predictions, {p.failed} failed requests, {p.empty} empty")
    return out


def view_path(task_dir: str, trial: DatasetTrial, name: str) -> str:
    return posixpath.join(task_dir, VIEW_DIR, trial.agent_name or "", trial.task_name, name)
