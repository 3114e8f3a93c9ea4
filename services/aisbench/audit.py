"""The checklist of an AISBench task (the runbook's own, not Harbor's):

- **finished** — the task's state as the runbook defines it (services.aisbench.assemble);
- **results_file** — a results file (perf: a perf file) for every dataset; the exit code is
  never trusted, since AISBench exits 0 when every request failed;
- **score** — the figures are sane: an accuracy in [0, 100] from predictions that reached the
  model; perf requests that succeeded; SWE-bench instance counts and errors under the gate;
- **preflight** — the last preflight from the eval host, step by step;
- **params** — max-out-len and batch size given, and max-out-len within max-model-len − 8K.

Each check carries its evidence; a failing one names the action, and the remediation
(`aisbench_launch`, `aisbench_resume`) when evaldesk can run it. Pure: reads the experiment only.
"""

from __future__ import annotations

import math
from datetime import datetime

from services.aisbench.models import LAUNCH, RESUME, DatasetTrial, TaskExperiment
from services.aisbench.taskdir import HEADROOM_TOKENS
from services.core.models import AuditReport, Check, CheckStatus, State, TrialStatus, report_trials
from services.core.policy import Policy
from services.core.times import as_utc, fmt_duration

PASS, WARN, FAIL, SKIP = CheckStatus.pass_, CheckStatus.warn, CheckStatus.fail, CheckStatus.skip
SHORT_OUTPUT = 2048


def _resumable(exp: TaskExperiment) -> bool:
    return (exp.task.launched_by_evaldesk or exp.task.origin == "runbook") and exp.task.has_run_sh


def check_finished(exp: TaskExperiment, now: datetime) -> Check:
    t = exp.task
    title = "Finished (exit code and results files)"
    raw = exp.state_raw or exp.state.value
    ev = f"{raw}: {t.reason}" if t.reason else raw
    if exp.state == State.finished:
        return Check(id="finished", title=title, status=PASS, evidence=ev)
    if exp.state == State.running:
        last = as_utc(exp.updated_at)
        if last is not None:
            ev += f"; last output {fmt_duration((now - last).total_seconds())} ago"
        return Check(id="finished", title=title, status=WARN, evidence=ev, action="wait, then audit again")
    if exp.state == State.failed:
        if _resumable(exp):
            return Check(id="finished", title=title, status=FAIL, evidence=ev, remediation=RESUME,
                         action="resume: run.sh again with --reuse, after the preflight (x)")
        return Check(id="finished", title=title, status=FAIL, evidence=ev,
                     action="re-run it with the tool that launched it (no run.sh of evaldesk's here)")
    if exp.state == State.needs_input:
        return Check(id="finished", title=title, status=FAIL, evidence=ev, remediation=LAUNCH,
                     action="give max-out-len and batch size, then launch (x asks)")
    if exp.state == State.blocked:
        return Check(id="finished", title=title, status=FAIL, evidence=ev, remediation=LAUNCH,
                     action="fix what the preflight says is missing, then launch again (x)")
    if exp.state == State.removed:
        return Check(id="finished", title=title, status=FAIL, evidence=ev, remediation=LAUNCH,
                     action="launch it again; keep task_root on a persistent disk for long runs")
    return Check(id="finished", title=title, status=WARN, evidence=ev, remediation=LAUNCH,
                 action="launch it (x): preflight first")


def check_results(exp: TaskExperiment) -> Check:
    title = "Results file for every dataset (exit code not trusted)"
    trials = [t for t in exp.trials if isinstance(t, DatasetTrial)]
    if not exp.task.has_dir:
        return Check(id="results_file", title=title, status=SKIP, evidence="no task dir")
    what = "perf file" if exp.task.mode == "perf" else "results file"
    have = [t for t in trials if t.status == TrialStatus.valid]
    lacking = [t for t in trials if t.status == TrialStatus.errored]
    running = [t for t in trials if t.status == TrialStatus.running]
    if exp.state == State.running:
        return Check(id="results_file", title=title, status=SKIP,
                     evidence=f"still running: {len(have)} of {len(trials)} dataset(s) have a {what} so far")
    if not trials:
        code = exp.task.exit_code
        return Check(id="results_file", title=title, status=FAIL,
                     evidence=f"exit code {code if code is not None else 'none'} but no dataset output at all "
                              f"under outputs/{exp.task.run or ''}",
                     action="read run.log; resume once the cause is fixed",
                     remediation=RESUME if _resumable(exp) else None)
    if lacking or running:
        parts = []
        for t in [*lacking, *running][:4]:
            why = f"{t.exception_type}: {t.exception_message}" if t.exception_message else "no file"
            parts.append(f"{t.trial_name}: {why[:200]}")
        code = exp.task.exit_code
        lead = f"exit code {code}, but " if code == 0 else ""
        return Check(id="results_file", title=title, status=FAIL,
                     evidence=f"{lead}{len(lacking) + len(running)} of {len(trials)} dataset(s) without a {what} — "
                              + "; ".join(parts),
                     action="fix the cause (model server reachable from the eval host?), then resume",
                     remediation=RESUME if _resumable(exp) else None)
    files = ", ".join(sorted(f"{t.files.get('result') or t.files.get('perf')}" for t in have)[:4])
    return Check(id="results_file", title=title, status=PASS, evidence=f"{len(have)} {what}(s): {files}")


def check_score(exp: TaskExperiment, policy: Policy) -> Check:
    title = "Score present and sane"
    trials = [t for t in exp.trials if isinstance(t, DatasetTrial) and t.status == TrialStatus.valid]
    if not trials:
        return Check(id="score", title=title, status=SKIP, evidence="no results to judge")
    fails: list[str] = []
    warns: list[str] = []
    good: list[str] = []
    for t in trials:
        if t.kind == "perf":
            total = _int(t.perf_common.get("Total Requests"))
            failed = _int(t.perf_common.get("Failed Requests"))
            ok = _int(t.perf_common.get("Success Requests"))
            thr = t.perf_common.get("Request Throughput", "?")
            if ok == 0 or (total and failed == total):
                fails.append(f"{t.trial_name}: no request succeeded ({failed} of {total} failed)")
            elif failed:
                warns.append(f"{t.trial_name}: {failed} of {total} requests failed; {thr} measured on the rest")
            else:
                good.append(f"{t.trial_name}: {total} requests, 0 failed, {thr}")
            continue
        if t.kind == "swebench":
            s = t.swebench
            total, errors = s.get("total"), s.get("error", 0)
            if t.metric is None or not total:
                fails.append(f"{t.trial_name}: no SWE-bench report (harness exit code "
                             f"{s.get('harness_exit_code', '?')}): no resolved rate")
                continue
            frac = errors / total
            line = f"{t.trial_name}: resolved {s.get('resolved', 0)}/{total}, {errors} error instance(s)"
            if frac > policy.error_fraction_max:
                fails.append(f"{line} = {frac:.0%} errors (limit {policy.error_fraction_max:.0%}): resume them")
            elif s.get("harness_exit_code"):
                warns.append(f"{line}; the harness exited {s['harness_exit_code']}")
            else:
                good.append(line)
            continue
        value = t.metrics.get(t.metric or "", float("nan"))
        p = t.predictions
        if not math.isfinite(value) or not 0.0 <= value <= 100.0:
            fails.append(f"{t.trial_name}: {t.metric} {value} is not a percentage")
        elif p is not None and p.total and p.failed == p.total:
            fails.append(f"{t.trial_name}: {t.metric} {value:.2f} from {p.total} predictions that all failed: "
                         "the run never reached the model")
        elif p is not None and p.total and p.failed:
            warns.append(f"{t.trial_name}: {t.metric} {value:.2f}, but {p.failed} of {p.total} requests failed "
                         "(scored as wrong)")
        else:
            extra = f" ({p.total} predictions, 0 failed)" if p is not None and p.total else ""
            good.append(f"{t.trial_name}: {t.metric} {value:.2f}{extra}")
    if fails:
        return Check(id="score", title=title, status=FAIL, evidence="; ".join(fails + warns + good),
                     action="fix the model server or the run, then resume",
                     remediation=RESUME if _resumable(exp) else None)
    if warns:
        return Check(id="score", title=title, status=WARN, evidence="; ".join(warns + good))
    return Check(id="score", title=title, status=PASS, evidence="; ".join(good))


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(float(str(text).split()[0]))
    except (ValueError, IndexError):
        return None


def check_preflight(exp: TaskExperiment) -> Check:
    title = "Preflight from the eval host"
    t = exp.task
    if not t.preflight:
        why = "not launched by evaldesk: no preflight on record" if not t.in_table else "no preflight run yet"
        return Check(id="preflight", title=title, status=SKIP, evidence=why)
    when = f" ({t.preflight_at:%Y-%m-%d %H:%M} UTC)" if t.preflight_at else ""
    failed = next((s for s in t.preflight if not s.ok), None)
    steps = "; ".join(f"{'ok' if s.ok else 'FAIL'} {s.step}: {s.evidence}" for s in t.preflight)
    if failed is not None:
        return Check(id="preflight", title=title, status=FAIL, evidence=f"{failed.step} failed{when} — {steps}",
                     action=f"make '{failed.step}' pass on {t.where}, then launch again",
                     remediation=LAUNCH if exp.state in (State.blocked, State.pending) else None)
    if len(t.preflight) < 4:
        return Check(id="preflight", title=title, status=FAIL, evidence=f"incomplete{when}: {steps}")
    return Check(id="preflight", title=title, status=PASS, evidence=f"all 4 steps passed{when}: {steps}")


def check_params(exp: TaskExperiment) -> Check:
    title = "max-out-len and batch size"
    t = exp.task
    if t.missing:
        what = " and ".join(m.replace("_", "-") for m in t.missing)
        return Check(id="params", title=title, status=FAIL, evidence=f"{what} not given (the runbook never guesses "
                     "them)", action="give them (x asks, with the guidance)", remediation=LAUNCH)
    if t.max_out_len is None and t.batch_size is None:
        return Check(id="params", title=title, status=SKIP, evidence="not launched by evaldesk: unknown")
    ev = f"max-out-len {t.max_out_len}, batch size {t.batch_size}"
    if t.max_model_len and t.max_out_len:
        limit = t.max_model_len - HEADROOM_TOKENS
        if t.max_out_len > t.max_model_len:
            return Check(id="params", title=title, status=FAIL,
                         evidence=f"{ev}: over the server's max-model-len {t.max_model_len}: every request is refused")
        if t.max_out_len > limit:
            return Check(id="params", title=title, status=WARN,
                         evidence=f"{ev}: over max-model-len − 8K = {limit}; long inputs will be refused (400)")
        ev += f" (≤ {limit} = max-model-len {t.max_model_len} − 8K)"
    if t.max_out_len is not None and t.max_out_len < SHORT_OUTPUT and t.mode != "perf":
        return Check(id="params", title=title, status=WARN,
                     evidence=f"{ev}: short outputs truncate thinking models (gsm8k on one server: 512 → 25%, "
                              "2048 → 65%, max-model-len − 8K → 90%)")
    return Check(id="params", title=title, status=PASS, evidence=ev)


def audit_task(exp: TaskExperiment, policy: Policy, now: datetime) -> AuditReport:
    checks = [check_finished(exp, now), check_results(exp), check_score(exp, policy), check_preflight(exp),
              check_params(exp)]
    notes = []
    if exp.task.exit_code == 0 and exp.state == State.failed:
        notes.append("AISBench exits 0 even when every request failed: the results files decide, not the exit code.")
    notes += [f"read problem: {p}" for p in exp.problems]
    c = exp.counts
    return AuditReport(
        id=exp.id, source=exp.source, path=exp.path, state=exp.state, state_raw=exp.state_raw, model=exp.model,
        benchmark=exp.benchmark, score=exp.score,
        trials=report_trials(c, n_rep=c.n_rep),
        valid_fraction=(c.valid / c.expected) if c.expected else None,
        error_fraction=(c.errored / c.total) if c.total else None,
        # the verdict is services.audit.verdict.decide's, over these checks and any enrichment's
        checks=checks, verdict="investigate", notes=notes,
    )
