"""A task's state and figures, from its dir (if any) and its row in the task table (if any).

States, exactly as the runbook defines them (the runbook's word is `state_raw`):

- **running** — launched, no exit code yet (and, outside a container, its process is alive);
- **finished** — exit code 0 *and* a results file for every dataset (perf: a perf file);
- **failed** — a non-zero exit code; or exit 0 without a results file (AISBench exits 0 when
  every request failed, so the exit code alone is never trusted); or the process is gone
  without an exit code;
- **needs_input** — asked for, but max-out-len or batch size was not given;
- **blocked** — asked for, but the preflight failed (the step that failed says what is missing);
- **removed** — launched, but the task dir is gone from the host.

A task asked for with every parameter, preflight passed or not yet run, not launched, is
`pending` (evaldesk's word; the runbook has none for it).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from services.aisbench.formats import HostEntry, TaskRow
from services.aisbench.models import VIEW_DIR, DatasetTrial, TaskExperiment, TaskInfo
from services.aisbench.reading import DatasetReading, TaskReading
from services.core.models import State, TrialCounts, TrialStatus

PERF_STATS = ("Median", "P75", "P90", "P99", "Average", "Min", "Max")


def _ts(t: float | None) -> datetime | None:
    return datetime.fromtimestamp(t, UTC) if t is not None else None


def _has_figures(d: DatasetReading, mode: str | None) -> bool:
    if mode == "perf":
        return d.perf is not None
    return d.measured


def dataset_trial(d: DatasetReading, status: TrialStatus, started: datetime | None,
                  mode: str | None = None) -> DatasetTrial:
    t = DatasetTrial(
        trial_name=d.key, task_name=d.dataset, path=f"{VIEW_DIR}/{d.abbr}/{d.dataset}", status=status,
        files=dict(d.files), predictions=d.predictions, started_at=started, finished_at=_ts(d.mtime),
        mtime=d.mtime, agent_name=d.abbr, model_name=d.abbr, source=d.dataset,
        kind="perf" if mode == "perf" else "swebench" if mode == "agent" else "accuracy",
    )
    if d.result is not None:
        t.metrics = d.result.metrics
        head = d.result.score
        if d.result.is_swebench:
            t.kind = "swebench"
            t.swebench = {k: v for k, v in {
                "resolved": d.result.resolved_instances, "total": d.result.total_instances,
                "submitted": d.result.submitted_instances, "completed": d.result.completed_instances,
                "unresolved": d.result.unresolved_instances, "empty_patch": d.result.empty_patch_instances,
                "error": d.result.error_instances, "harness_exit_code": d.result.harness_exit_code,
            }.items() if v is not None}
        else:
            t.kind = "accuracy"
        if head is not None:
            t.metric, value = head
            t.reward = value / 100.0
            t.rewards = {t.metric: value / 100.0}
    if d.perf is not None:
        t.kind = "perf"
        t.perf_common = {m: str(q.get("total") or next(iter(q.values()), "")) for m, q in d.perf.metrics.items()}
    if d.perf_table is not None:
        for row in d.perf_table.rows:
            t.perf_stats[row.metric] = {k: (row.stats[k].value if k in row.stats else None) for k in PERF_STATS}
            unit = next((q.unit for q in row.stats.values() if q.unit), "")
            t.perf_units[row.metric] = unit
    if status == TrialStatus.errored:
        if d.result is not None and d.result.no_report:
            t.exception_type = "HarnessReportMissing"
            t.exception_message = (f"the SWE-bench harness left no report (harness exit code "
                                   f"{d.result.harness_exit_code}): the results file holds only harness_exit_code, "
                                   "predictions_path and run_id")
            if d.error is not None:
                t.exception_message += f"; the log says: {d.error.message}"
            t.error_code = d.error.code if d.error else None
        elif d.error is not None:
            t.exception_type = d.error.code or d.error.message.split(":", 1)[0]
            t.exception_message = d.error.message
            t.error_code = d.error.code
        else:
            t.exception_type = "NoResultsFile"
            t.exception_message = "no results file for this dataset"
        t.parse_error = "; ".join(d.problems) or None
    elif d.problems:
        t.parse_error = "; ".join(d.problems)
    return t


def assemble(
    task_id: str,
    *,
    reading: TaskReading | None,
    row: TaskRow | None,
    host: HostEntry | None,
    where: str,
    task_root: str,
    source_kind: str,
    source_label: str,
) -> TaskExperiment:
    meta = reading.meta if reading else None
    mode = (meta.mode if meta else None) or (row.mode if row else None)
    if mode is None and reading is not None and reading.datasets:
        mode = "perf" if all(d.perf is not None or "perf" in d.files for d in reading.datasets) else "accuracy"
    info = TaskInfo(
        task_id=task_id, where=where, task_root=task_root,
        suite=(meta.suite if meta else None) or (row.suite if row else None), mode=mode,
        api_base=(meta.api_base if meta else None) or (row.api_base if row else None),
        api_key_env=(meta.api_key_env if meta else None) or (row.api_key_env if row else None),
        max_out_len=(row.max_out_len if row else None) or (meta.max_out_len if meta else None),
        batch_size=(row.batch_size if row else None) or (meta.batch_size if meta else None),
        num_prompts=(row.num_prompts if row else None) or (meta.num_prompts if meta else None),
        max_model_len=row.max_model_len if row else None,
        has_dir=reading is not None, has_run_sh=bool(reading and reading.has_run_sh), in_table=row is not None,
        launched_by_evaldesk=bool(meta and meta.launched_at) or bool(row and row.launched_at
                                                                     and row.origin == "evaldesk"),
        preflight=list(row.preflight) if row else [], preflight_at=row.preflight_at if row else None,
        uses_docker=bool(host and host.uses_docker) or bool(row and row.container),
        origin=row.origin if row else "evaldesk", container=row.container if row else None,
        output_ts=row.output_ts if row else None,
    )
    if row is not None:
        info.missing = row.missing
    exp = TaskExperiment(id=task_id, source=source_kind, source_label=source_label,
                         path=reading.task_dir if reading else f"{task_root.rstrip('/')}/{task_id}", task=info)
    exp.model = (meta.model if meta else None) or (row.model if row else None)
    exp.benchmark = info.suite
    if reading is None:
        _without_dir(exp, row)
        return exp
    _with_dir(exp, reading, mode)
    return exp


def _without_dir(exp: TaskExperiment, row: TaskRow | None) -> None:
    info = exp.task
    if row is None:  # cannot happen: a task is known from its dir or its row
        exp.state, exp.state_raw, info.reason = State.failed, "failed", "neither a task dir nor a table row"
        return
    exp.started_at = row.created_at
    exp.updated_at = row.preflight_at or row.created_at
    exp.counts = TrialCounts(expected=None)  # the datasets are known once the run dumps its config
    blocker = row.blocked_by
    if row.launched_at is not None:
        exp.state, exp.state_raw = State.removed, "removed"
        info.reason = (f"the task dir {exp.path} is gone from {info.where} (launched "
                       f"{row.launched_at:%Y-%m-%d %H:%M} UTC); results not fetched before are lost")
        info.launched_at = row.launched_at
    elif row.missing:
        exp.state, exp.state_raw = State.needs_input, "needs_input"
        info.reason = f"{' and '.join(m.replace('_', '-') for m in row.missing)} not given: say how much before launch"
    elif blocker is not None:
        exp.state, exp.state_raw = State.blocked, "blocked"
        info.reason = f"preflight failed at '{blocker.step}': {blocker.evidence}"
    else:
        exp.state, exp.state_raw = State.pending, "pending"
        info.reason = "every parameter given; not launched yet"


def _with_dir(exp: TaskExperiment, r: TaskReading, mode: str | None) -> None:
    info = exp.task
    info.exit_code = r.exit_code
    info.alive = r.alive
    info.pid = r.pid
    info.run_log = r.run_log
    info.run = r.latest
    info.runs = len(r.runs)
    info.summary_rel = r.summary_rel
    info.launched_at = r.launched_at
    info.summary = [f"{row.dataset} {row.metric} {' '.join(f'{k}={v}' for k, v in row.values.items())}"
                    for row in r.summary_rows]
    exp.problems = list(r.problems) + [p for d in r.datasets for p in d.problems]
    exp.started_at = r.launched_at
    exp.updated_at = _ts(r.newest_mtime) or r.launched_at
    # what the run was asked to measure: its own dumped config, in the tool's names
    planned = [(m, d) for m in r.planned_models for d in r.planned_datasets]
    found = {(d.abbr, d.dataset) for d in r.datasets}
    running = r.exit_code is None and r.has_run_sh and r.alive is not False
    trials: list[DatasetTrial] = []
    for d in r.datasets:
        if _has_figures(d, mode):
            status = TrialStatus.valid
        elif running:
            status = TrialStatus.running
        else:
            status = TrialStatus.errored
        trials.append(dataset_trial(d, status, r.launched_at, mode))
    for abbr, name in planned:
        if (abbr, name) not in found:
            placeholder = DatasetReading(abbr=abbr, dataset=name)
            trials.append(dataset_trial(placeholder, TrialStatus.running if running else TrialStatus.errored,
                                        r.launched_at, mode))
    exp.trials = list(trials)
    if exp.model is None and r.datasets:
        exp.model = r.datasets[0].abbr
    if exp.benchmark is None and trials:
        exp.benchmark = ",".join(sorted({t.task_name for t in trials}))
    valid = [t for t in trials if t.status == TrialStatus.valid]
    errored = [t for t in trials if t.status == TrialStatus.errored]
    exp.counts = TrialCounts(total=len(valid) + len(errored), valid=len(valid), errored=len(errored),
                             invalid_errors=len(errored), running=len(trials) - len(valid) - len(errored),
                             expected=len(trials) or None, n_rep=1, max_attempts_per_task=1 if trials else 0)
    exp.n_rep, exp.n_rep_source = 1, "config"
    scored = [t.reward for t in valid if t.reward is not None and math.isfinite(t.reward)]
    exp.score = sum(scored) / len(scored) if scored else None
    missing = [t for t in trials if t.status != TrialStatus.valid]
    if r.exit_code is None:
        if not r.has_run_sh:
            exp.state, exp.state_raw = State.failed, "failed"
            info.reason = "the task dir has no run.sh: the launch stopped part way"
        elif r.alive is False:
            exp.state, exp.state_raw = State.failed, "failed"
            info.reason = (f"{r.alive_evidence} and left no exit code: it was killed" if r.alive_evidence else
                           f"run.sh (pid {r.pid}) is gone and left no exit code: it was killed, or the host "
                           "rebooted")
        else:
            exp.state, exp.state_raw = State.running, "running"
            info.reason = (r.alive_evidence or "running") if r.alive else (
                f"no exit code yet ({r.alive_evidence})" if r.alive_evidence else "no exit code yet")
        return
    exp.finished_at = _ts(r.exit_mtime)
    if r.exit_code != 0:
        exp.state, exp.state_raw = State.failed, "failed"
        info.reason = f"ais_bench exited with code {r.exit_code}" + _first_error(trials)
        return
    if not trials:
        exp.state, exp.state_raw = State.failed, "failed"
        info.reason = "exited 0 without a results file: the run wrote no dataset output at all"
        return
    if missing:
        exp.state, exp.state_raw = State.failed, "failed"
        what = "perf file" if mode == "perf" else "results file"
        if any(t.exception_type == "HarnessReportMissing" for t in missing):
            what = "SWE-bench harness report"
        if len(missing) == len(trials):
            info.reason = f"exited 0 without a {what}" + _first_error(missing)
        else:
            names = ", ".join(t.task_name for t in missing[:4])
            info.reason = f"exited 0 but {len(missing)} of {len(trials)} datasets have no {what} ({names})" + \
                _first_error(missing)
        return
    exp.state, exp.state_raw = State.finished, "finished"
    info.reason = f"exit code 0 and a {'perf' if mode == 'perf' else 'results'} file for each of {len(trials)} " \
        f"dataset(s)"


def _first_error(trials: list[DatasetTrial]) -> str:
    for t in trials:
        if t.exception_message and t.exception_type != "NoResultsFile":
            return f" — {t.trial_name}: {t.exception_message[:240]}"
    return ""
