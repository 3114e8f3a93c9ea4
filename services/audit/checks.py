"""The checks of the read-only audit of a finished Harbor-style eval (DESIGN 3), one function
each: the evidence a person can verify and the one action it recommends."""

from __future__ import annotations

from collections import Counter

from services.core.census import Census
from services.core.models import AGGREGATE_UNREADABLE, Check, CheckStatus, Experiment, State, TrialStatus
from services.core.policy import HASH_BENCHMARK_RE, NUMERIC_MODEL_RE, Policy

PASS, WARN, FAIL, SKIP = CheckStatus.pass_, CheckStatus.warn, CheckStatus.fail, CheckStatus.skip

_SCHED_DONE = {"COMPLETED"}
_SCHED_WAIT = {"RUNNING", "PENDING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _bare_model(name: str | None) -> str:
    return (name or "").rsplit("/", 1)[-1]


def check_finished(exp: Experiment) -> Check:
    title = "Job finished"
    if exp.state == State.blocked and exp.state_raw == AGGREGATE_UNREADABLE:
        why = next((p for p in exp.problems if p.startswith("result.json")), "result.json cannot be read")
        return Check(id="finished", title=title, status=FAIL,
                     evidence=f"{why}; no trial is running, so it is not a write in progress",
                     action="rebuild the job's result.json from its trials (the original is kept)",
                     remediation="rebuild_aggregate")
    sched = (exp.scheduler_state or "").split()[0].upper() if exp.scheduler_state else None
    if sched:
        where = f"SLURM job {exp.scheduler_job_id or '?'} is {exp.scheduler_state}"
        if sched in _SCHED_DONE:
            return Check(id="finished", title=title, status=PASS, evidence=where)
        if sched in _SCHED_WAIT:
            return Check(id="finished", title=title, status=WARN, evidence=where,
                         action="wait for the scheduler job to end, then re-audit")
        return Check(id="finished", title=title, status=FAIL, evidence=where,
                     action="diagnose the failed job (trials, job.log), fix the cause and relaunch")
    if exp.finished_at is not None:
        ev = f"job result.json has finished_at {exp.finished_at:%Y-%m-%d %H:%M}"
        if exp.counts.running:
            ev += f"; {exp.counts.running} trial dir(s) never wrote result.json (orphaned)"
        return Check(id="finished", title=title, status=PASS, evidence=ev)
    c = exp.counts
    if exp.state == State.pending:
        return Check(id="finished", title=title, status=WARN, evidence="no trial has started yet",
                     action="wait for the job to start, then re-audit")
    return Check(
        id="finished", title=title, status=WARN,
        evidence=f"no finished_at yet: {c.total} finished, {c.running} running of {c.expected or '?'} expected",
        action="wait for the job to finish, then re-audit",
    )


def check_score(exp: Experiment, kept_valid: int) -> Check:
    title = "Score present and sane"
    score = exp.score
    where = f"stats.evals[{exp.eval_key!r}].metrics[0].mean" if exp.eval_key else "stats.evals"
    expected = exp.counts.expected or 0
    never_reached = kept_valid == 0 or (expected and kept_valid < 0.05 * expected and not score)
    if score is None:
        if never_reached:
            return Check(id="score", title=title, status=FAIL,
                         evidence=f"no score in {where} and {kept_valid} valid trials: the eval never reached "
                         "the model", action="fix the endpoint (served model name, base URL) and re-run",
                         remediation="rerun")
        return Check(id="score", title=title, status=FAIL, evidence=f"no numeric score at {where}",
                     action="rebuild the aggregate result.json or re-run the job's aggregation")
    if score == 0 and never_reached:
        return Check(id="score", title=title, status=FAIL,
                     evidence=f"score 0 with {kept_valid} valid of {expected or '?'} expected trials: "
                     "the eval never reached the model", action="fix the endpoint and re-run",
                     remediation="rerun")
    real_zero = " (0 with trials that ran is a real 0)" if score == 0 else ""
    return Check(id="score", title=title, status=PASS, evidence=f"score {score:.4f} at {where}{real_zero}")


def check_valid(exp: Experiment, policy: Policy, kept: Census, deduped: bool) -> Check:
    title = "Valid trial count"
    c = exp.counts
    n_rep = exp.n_rep or policy.default_n_rep
    valid_kept = kept.counts.valid
    if not c.expected:
        return Check(id="valid_count", title=title, status=WARN,
                     evidence=f"{c.valid} valid of ? expected: benchmark size of {exp.benchmark!r} unknown and no "
                     "n_total_trials in the job result",
                     action="add the benchmark to policy.benchmark_sizes in the config")
    frac = valid_kept / c.expected
    after = " after dedupe" if deduped else ""
    ev = f"{valid_kept} valid{after} of {c.expected} expected ({_pct(frac)}; n_rep {n_rep}"
    ev += " from the job config)" if exp.n_rep_source == "config" else ", the default: no job config)"
    if deduped:
        ev += f"; on disk: {c.valid} valid of {c.total + c.running} attempts"
    if frac >= policy.valid_fraction_min:
        return Check(id="valid_count", title=title, status=PASS, evidence=ev)
    missing = c.expected - valid_kept
    if exp.state != State.finished:
        return Check(id="valid_count", title=title, status=WARN, evidence=ev + "; still running",
                     action="wait for the job to finish, then re-audit")
    fix, action = resume_or_decide(exp, policy, f"resume the errored trials ({missing} short of {c.expected}); "
                                   "do not register a partial")
    return Check(id="valid_count", title=title, status=FAIL, evidence=ev, action=action, remediation=fix)


def check_duplicates(exp: Experiment, policy: Policy, on_disk: Census) -> Check:
    title = "No duplicates"
    c = exp.counts
    n_rep = exp.n_rep or policy.default_n_rep
    over = sum(1 for n in on_disk.per_task.values() if n > n_rep)
    size = exp.benchmark_size
    problems = []
    attempts = c.total + c.running
    if size and attempts > n_rep * size:
        problems.append(f"{attempts} attempts > n_rep × size = {n_rep} × {size}")
    if over:
        problems.append(f"{over} task(s) have more than {n_rep} attempts (max {c.max_attempts_per_task})")
    if c.copies:
        problems.append(f"{c.copies} staged cop{'y' if c.copies == 1 else 'ies'} of trial dirs")
    if not problems:
        return Check(id="duplicates", title=title, status=PASS,
                     evidence=f"at most {c.max_attempts_per_task} attempt(s) per task (n_rep {n_rep})")
    return Check(id="duplicates", title=title, status=FAIL, evidence="; ".join(problems),
                 action="dedupe (score-blind) before anything else, then re-audit", remediation="dedupe")


def check_error_gate(exp: Experiment, policy: Policy, kept: Census, deduped: bool) -> tuple[Check, float | None]:
    title = "Error gate"
    n_finished = kept.counts.total
    if not n_finished:
        return Check(id="error_gate", title=title, status=SKIP, evidence="no finished attempts yet"), None
    n_invalid = kept.counts.invalid_errors
    frac = n_invalid / n_finished
    top = ", ".join(f"{k} ×{v}" for k, v in kept.invalid_kinds.most_common(3))
    limit = policy.error_max_text
    ev = f"{n_invalid} invalid errors / {n_finished} attempts = {_pct(frac)} (limit {limit})"
    if top:
        ev += f": {top}"
    if deduped:
        ev += "; computed on the attempts dedupe would keep"
    if frac > policy.error_fraction_max:
        fix, action = resume_or_decide(exp, policy, "resume the errored trials; de-register the row if a partial "
                                       "was registered")
        return Check(id="error_gate", title=title, status=FAIL, evidence=ev, action=action, remediation=fix), frac
    return Check(id="error_gate", title=title, status=PASS, evidence=ev), frac


def resume_or_decide(exp: Experiment, policy: Policy, action: str) -> tuple[str | None, str]:
    """("resume", `action`) when a resume by default re-runs at least one trial; else no fix,
    and what a person must decide: which of the errored types to re-run anyway, with the
    command that does it (a resume never re-runs a trial that has a reward)."""
    from services.remediations.resume import select_trials
    from services.transport.process import display

    sel = select_trials(exp, policy)
    if sel.picks:
        return "resume", action
    scored = Counter(t.exception_type for t in exp.trials if t.status == TrialStatus.valid
                     and t.exception_type and not policy.is_benign(t.exception_type))
    rewarded = ", ".join(f"{k} ×{v}" for k, v in scored.most_common(3))
    if not sel.left:
        kinds = rewarded or "none"
        return None, (f"decide whether to re-run the whole job: no errored trial is left to resume, and the errors "
                      f"carry rewards ({kinds}), which a resume never re-runs — "
                      f"{display(['evaldesk', '--batch', 'audit', exp.path])} shows them")
    kinds = ", ".join(f"{k} ×{v}" for k, v in sel.left.most_common(4))
    argv = ["evaldesk", "--batch", "resume"]
    for k, _ in sel.left.most_common(4):
        argv += ["--exception", k]
    return None, (f"decide which errors to re-run: Harbor retries none of {kinds} by default (should_retry = "
                  f"false); to re-run them anyway: {display([*argv, '--apply', exp.path])} "
                  "(without --apply it previews)"
                  + (f"; {rewarded} carry a reward: never re-run, they count against the gate all the same"
                     if rewarded else ""))


def check_model(exp: Experiment) -> Check:
    title = "Model name"
    bare = _bare_model(exp.model)
    if not exp.model:
        return Check(id="model_name", title=title, status=WARN, evidence="no model name in the job config or trials",
                     action="set the model name when registering")
    if NUMERIC_MODEL_RE.fullmatch(bare):
        real = exp.model_hf_name
        return Check(id="model_name", title=title, status=FAIL,
                     evidence=f"{exp.model!r} is a vLLM served id, not a model name"
                     + (f"; the eval config says model_hf_name = {real!r}" if real else ""),
                     action=f"register under {real!r}" if real else "find model_hf_name in the run's eval config")
    return Check(id="model_name", title=title, status=PASS, evidence=repr(exp.model))


def check_benchmark(exp: Experiment) -> Check:
    title = "Benchmark name"
    if not exp.benchmark:
        return Check(id="benchmark_name", title=title, status=WARN, evidence="no benchmark name found",
                     action="name the benchmark explicitly when registering")
    if HASH_BENCHMARK_RE.fullmatch(exp.benchmark):
        real = exp.benchmark_from_dir
        return Check(id="benchmark_name", title=title, status=FAIL,
                     evidence=f"{exp.benchmark[:12]}… is a dataset version hash"
                     + (f"; the run dir says {real!r}" if real else ""),
                     action=f"register under {real!r}" if real else "pass the benchmark name explicitly")
    return Check(id="benchmark_name", title=title, status=PASS, evidence=repr(exp.benchmark))


