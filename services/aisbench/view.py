"""How the console sees an AISBench task: a dataset's files under stable names, and the
results laid out as tables, a latency plot and AISBench's own summary.

The trials view opens "file 1 … 5" of a trial as `<task dir>/<trial path>/<name>`. A dataset's
files are spread over its run dir (`logs/infer/<abbr>/<ds>.out`, `results/<abbr>/<ds>.json` …),
so the source hands the view a `ViewFS` that reads `<task dir>/by-dataset/<abbr>/<ds>/infer.log`
from where the file really is. It only maps reads; nothing is ever written through it.
"""

from __future__ import annotations

import math
import posixpath

from services.aisbench.models import VIEW_DIR, DatasetTrial, TaskExperiment
from services.core.models import Experiment
from services.core.results import ResultLine, ResultPlot, ResultTable, ResultText, ResultView
from services.transport.fs import READ_TIMEOUT_S, FileStat, JobFS

# the names the trials view opens → the file role in DatasetTrial.files
NAMES: dict[str, tuple[str, ...]] = {
    "infer.log": ("infer_log",),
    "trial.log": ("infer_log",),  # what the live monitor tails for a running trial
    "eval.log": ("eval_log",),
    "result.json": ("result", "perf"),
    "perf.csv": ("perf_csv",),
    "predictions.jsonl": ("predictions",),
}


class ViewFS:
    """A JobFS whose reads of `<task>/by-dataset/<abbr>/<ds>/<name>` go to the real file."""

    def __init__(self, real: JobFS) -> None:
        self.real = real
        self._map: dict[str, str] = {}

    def update(self, exps: list[Experiment]) -> None:
        mapping: dict[str, str] = {}
        for exp in exps:
            if not isinstance(exp, TaskExperiment):
                continue
            summary = posixpath.join(exp.path, exp.task.summary_rel) if exp.task.summary_rel else None
            for t in exp.trials:
                if not isinstance(t, DatasetTrial):
                    continue
                base = posixpath.join(exp.path, t.path)
                for name, roles in NAMES.items():
                    rel = next((t.files[r] for r in roles if r in t.files), None)
                    if rel is not None:
                        mapping[f"{base}/{name}"] = posixpath.join(exp.path, rel)
                mapping[f"{base}/run.log"] = posixpath.join(exp.path, exp.task.run_log or "run.log")
                # perf runs write no summary: their CSV is the table to read
                sheet = summary if t.kind != "perf" else (posixpath.join(exp.path, t.files["perf_csv"])
                                                          if "perf_csv" in t.files else None)
                if sheet is not None:
                    mapping[f"{base}/summary.txt"] = sheet
        self._map = mapping

    def _real(self, path: str) -> str:
        return self._map.get(path, path) if f"/{VIEW_DIR}/" in path else path

    async def stat(self, path: str) -> FileStat | None:
        return await self.real.stat(self._real(path))

    async def lstat(self, path: str) -> FileStat | None:
        return await self.real.lstat(self._real(path))

    async def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        return await self.real.read_bytes(self._real(path), offset, length)

    async def read_regular(self, path: str, max_bytes: int, timeout_s: float = READ_TIMEOUT_S) -> bytes:
        return await self.real.read_regular(self._real(path), max_bytes, timeout_s)

    async def sha256(self, path: str, max_bytes: int) -> str | None:
        return await self.real.sha256(self._real(path), max_bytes)

    async def list_dir(self, path: str) -> list[str]:
        return await self.real.list_dir(self._real(path))

    # writes are never mapped: the write path acts on real paths only
    async def rename(self, src: str, dst: str) -> None:
        await self.real.rename(src, dst)

    async def makedirs(self, path: str) -> None:
        await self.real.makedirs(path)

    async def mkdir_exclusive(self, path: str) -> None:
        await self.real.mkdir_exclusive(path)

    async def rmdir(self, path: str) -> None:
        await self.real.rmdir(path)

    async def write_bytes_atomic(self, path: str, data: bytes) -> None:
        await self.real.write_bytes_atomic(path, data)

    async def append_durable(self, path: str, data: bytes) -> None:
        await self.real.append_durable(path, data)

    async def remove_file(self, path: str) -> None:
        await self.real.remove_file(path)


# ---- the results view ---------------------------------------------------------------------------

PERCENTILES = (("Median", 50.0), ("P75", 75.0), ("P90", 90.0), ("P99", 99.0))
PLOT_METRICS = (("TTFT", "cyan"), ("TPOT", "magenta"), ("ITL", "yellow"))


def _num(v: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if v is None or not math.isfinite(v) else fmt.format(v)


def results_view(exp: TaskExperiment, summary: str | None) -> ResultView:
    info = exp.task
    view = ResultView(title=f"{exp.id}  ·  {exp.benchmark or '?'}  ·  {exp.model or '?'}")
    reason = info.reason or ""
    if len(reason) > 200:  # the whole of it is in the audit's evidence
        reason = reason[:199] + "…"
    view.lines.append(f"{exp.state_raw or exp.state.value}: {reason}".rstrip(": "))
    where = f"on {info.where}" if info.where != "local" else "on this machine"
    params = ", ".join(f"{k} {v}" for k, v in (("max-out-len", info.max_out_len), ("batch size", info.batch_size),
                                                ("prompts", info.num_prompts)) if v is not None)
    view.lines.append(f"{where}" + (f"  ·  run {info.run}" + (f" (of {info.runs})" if info.runs > 1 else "")
                                    if info.run else "") + (f"  ·  {params}" if params else ""))
    trials = [t for t in exp.trials if isinstance(t, DatasetTrial)]
    acc = [t for t in trials if t.kind in ("accuracy", "unknown")]
    if acc:
        rows = []
        for t in acc:
            value = _num(t.metrics.get(t.metric)) if t.metric is not None else "-"
            status = t.status.value + (f": {t.exception_type}" if t.exception_type else "")
            p = t.predictions
            rows.append([t.trial_name, t.metric or "-", value, str(p.total) if p else "-",
                         str(p.failed) if p else "-", status])
        view.tables.append(ResultTable(title="Accuracy (%)", columns=["dataset", "metric", "value", "preds",
                                                                      "failed", "status"], rows=rows))
    swe = [t for t in trials if t.kind == "swebench"]
    if swe:
        view.tables.append(ResultTable(
            title="SWE-bench (instances)", columns=["dataset", "resolved", "total", "submitted", "errors",
                                                    "empty", "acc %"],
            rows=[[t.task_name, *(str(t.swebench.get(k, "-")) for k in ("resolved", "total", "submitted", "error",
                                                                          "empty_patch")),
                   _num(t.metrics.get("accuracy"))] for t in swe]))
    perf = [t for t in trials if t.kind == "perf"]
    for t in perf:
        keys = ("Total Requests", "Failed Requests", "Request Throughput", "Output Token Throughput",
                "Concurrency", "Benchmark Duration")
        view.tables.append(ResultTable(title=f"Performance · {t.trial_name}", columns=["figure", "value"],
                                       rows=[[k, t.perf_common[k]] for k in keys if k in t.perf_common]))
        stat_rows = []
        for metric, stats in t.perf_stats.items():
            unit = t.perf_units.get(metric, "")
            stat_rows.append([f"{metric}" + (f" ({unit})" if unit else ""),
                              *(_num(stats.get(k), "{:g}") for k, _ in (("Average", 0), *PERCENTILES))])
        if stat_rows:
            view.tables.append(ResultTable(title=f"Per request · {t.trial_name}",
                                           columns=["metric", "avg", "p50", "p75", "p90", "p99"], rows=stat_rows))
        lines = []
        for metric, color in PLOT_METRICS:
            pcts = t.perf_stats.get(metric)
            if pcts:
                lines.append(ResultLine(label=f"{metric} {t.perf_units.get(metric, '')}".strip(),
                                        values=[pcts.get(k) for k, _ in PERCENTILES], color=color))
        if lines:
            view.plots.append(ResultPlot(title=f"Latency percentiles · {t.trial_name}",
                                         xs=[x for _, x in PERCENTILES], lines=lines, xlabel="percentile"))
    if summary:
        view.texts.append(ResultText(title=f"AISBench summary ({info.summary_rel})", text=summary))
    if info.preflight:
        view.texts.append(ResultText(title="Last preflight", text="\n".join(
            f"{'ok  ' if s.ok else 'FAIL'} {s.step}: {s.evidence}" for s in info.preflight)))
    view.problems = list(exp.problems)
    return view
