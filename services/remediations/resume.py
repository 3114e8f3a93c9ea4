"""Resume a finished job's errored trials (DESIGN 3, check 4), as a plan for the write path.

Harbor's own resume (`harbor jobs resume -p JOB -f TYPE…`, 0.26) first deletes every trial dir
whose result has one of the `-f` types (default CancelledError), then — while it reads the
job — every folder at the top of the job dir that has no result.json (evaldesk's own
quarantine and lock included), and runs again every trial of the job config that has no dir.
An unreadable result.json is left on disk and its task runs again under a new name. So
evaldesk never lets it delete anything: the plan moves the trials to re-run out of the job
dir first, and every other folder Harbor would delete with them, into a quarantine *beside*
the job dir (inside it, Harbor would delete that too):

    <jobs>/.evaldesk-quarantine/<job name>/<record id>/trials/<trial dir>   set aside to re-run
                                                      /kept/<folder>        kept from Harbor
                                                      /record.json, steps.log

then runs the site's command with `-f` for exactly the types set aside, so Harbor finds
nothing of them left to delete and re-runs what is missing.

Which trials, by default: those Harbor would retry (its error-policy table's `should_retry`,
services/core/policy.py) among the trials without a valid reward, plus what Harbor deletes
whatever evaldesk does (trial dirs without result.json) and unreadable results (which Harbor
would duplicate). A person narrows it by exception type or by naming trials. A trial with a
valid reward is never re-run.

`set_aside_plan` is the backend-neutral core (trials to set aside + a command); another
backend's retry (set aside by filter, then its own command) builds on it.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from services.core.config import Config
from services.core.failures import NO_REWARD_NOR_EXCEPTION, failure_class
from services.core.models import Experiment, State, Trial, TrialStatus, experiment_key
from services.core.policy import HARBOR_RESUME_DEFAULT_FILTER, Policy, should_retry
from services.core.source import Source, SourceUnavailable, source_host
from services.remediations.errors import WriteRefused
from services.remediations.job_commands import TemplateError, commands_for, expand, program_missing, runner_of
from services.remediations.job_step import HANDLER, env_problem
from services.remediations.lock import LOCK_DIR
from services.remediations.records import (
    QUARANTINE_DIR,
    Plan,
    Record,
    aside_root,
    new_record_id,
)
from services.remediations.steps import ExternalStep, MoveStep, Step, StepContext
from services.transport.fs import JobFS
from services.transport.process import display

ACTION = "resume"

# what a trial without an exception type is called, in previews and for --exception
NO_RESULT = "no-result"  # a trial dir without result.json (running, or orphaned by a dead job)
UNREADABLE = "unreadable"  # result.json that does not parse
NO_REWARD = "no-reward"  # parsed, with neither a reward nor an exception
_ALIASES = {
    "(running)": NO_RESULT, "running": NO_RESULT, "orphaned": NO_RESULT, "no result": NO_RESULT,
    "(unreadable result.json)": UNREADABLE, "unreadable result.json": UNREADABLE,
    "(no reward, no exception)": NO_REWARD, "no reward": NO_REWARD,
}
_LIVE = (State.running, State.pending, State.dispatched)
_SCHED_LIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "SUSPENDED", "RESIZING"}


def trial_label(t: Trial) -> str | None:
    """The exception type a resume sorts a trial under; None for a trial with a valid reward."""
    if t.status == TrialStatus.valid:
        return None
    if t.status == TrialStatus.running:
        return NO_RESULT
    if t.exception_type:
        return t.exception_type
    if t.parse_error and t.parse_error != NO_REWARD_NOR_EXCEPTION:
        return UNREADABLE
    return NO_REWARD


def normalise_type(name: str) -> str:
    """How a person may write a type (any case, the trials screen's group names) → its key."""
    low = name.strip().lower()
    return _ALIASES.get(low, low)


def default_pick(label: str, policy: Policy) -> tuple[bool, str]:
    """(re-run by default?, why) for one label."""
    if label == NO_RESULT:
        return True, "no result.json: Harbor's resume deletes it whatever the filter and runs it again"
    if label == UNREADABLE:
        return True, "unreadable result.json: Harbor would leave it and run its task again (a duplicate)"
    if label == NO_REWARD:
        return True, "neither a reward nor an exception: not in Harbor's table, so retried"
    if label in HARBOR_RESUME_DEFAULT_FILTER:
        return True, "Harbor's resume re-runs it by default"
    cls = failure_class(label) or "unclassified"
    if policy.is_benign(label):
        return False, f"{cls}, benign: Harbor does not retry it (a timeout or overflow is the agent's own result)"
    if should_retry(label):
        return True, f"{cls}: Harbor retries it"
    return False, f"{cls}: Harbor does not retry it (should_retry = false)"


@dataclass
class Pick:
    trial: Trial
    label: str


@dataclass
class Selection:
    """Which trials a resume re-runs, and what it leaves and why. Pure data."""

    picks: list[Pick] = field(default_factory=list)
    left: Counter[str] = field(default_factory=Counter)  # errored trials not picked, by label
    why: dict[str, str] = field(default_factory=dict)  # label → why it is (not) picked
    scored_named: int = 0  # named trials that have a valid reward: never re-run
    unmatched: list[str] = field(default_factory=list)  # requested types that match no errored trial
    requested: list[str] | None = None

    @property
    def by_label(self) -> Counter[str]:
        return Counter(p.label for p in self.picks)

    @property
    def types(self) -> list[str]:
        """The exception types set aside: what Harbor's `-f` gets."""
        return sorted({p.label for p in self.picks if p.label not in (NO_RESULT, UNREADABLE, NO_REWARD)})


def select_trials(exp: Experiment, policy: Policy | None = None, types: Iterable[str] | None = None,
                  paths: Iterable[str] | None = None) -> Selection:
    """The trials a resume of `exp` sets aside. `types` narrows by exception type (case-
    insensitive), `paths` names trials (relative to the job dir); neither: the default."""
    policy = policy or Policy()
    asked = {normalise_type(t): t for t in types} if types else {}
    want = set(asked) if types else None
    named = set(paths) if paths is not None else None
    sel = Selection(requested=sorted(want) if want is not None else None)
    present: set[str] = set()
    for t in exp.trials:
        if t.copy_of is not None or "/" in t.path:
            continue  # staged copies sit in folders the plan keeps away from Harbor
        label = trial_label(t)
        if label is None:
            if named is not None and t.path in named:
                sel.scored_named += 1
            continue
        present.add(label.lower())
        pick, why = default_pick(label, policy)
        if label == NO_RESULT:
            pick = True
        elif named is not None:
            pick, why = t.path in named, "named"
        elif want is not None:
            pick, why = label.lower() in want, "asked for" if label.lower() in want else why
        sel.why.setdefault(label, why)
        if pick:
            sel.picks.append(Pick(t, label))
        else:
            sel.left[label] += 1
    if want is not None:
        sel.unmatched = sorted(asked[w] for w in want if w not in present)
    if sel.picks and not sel.types:
        # with no -f at all Harbor falls back to -f CancelledError: set those aside as well, or
        # Harbor deletes them
        for t in exp.trials:
            if t.copy_of is None and "/" not in t.path and trial_label(t) in HARBOR_RESUME_DEFAULT_FILTER:
                label = str(trial_label(t))
                sel.picks.append(Pick(t, label))
                sel.left[label] -= 1
                sel.why[label] = "with no -f Harbor's resume deletes and re-runs it"
        sel.left = +sel.left
    return sel


@dataclass
class SetAside:
    """One thing a plan moves out of the job dir before its command runs."""

    rel: str  # relative to the job dir
    label: str  # what the preview says about it (an exception type, why it is kept …)


def _digest(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=True, sort_keys=True, default=str).encode()).hexdigest()


def set_aside_plan(*, action: str, title: str, job_dir: str, trials: Sequence[SetAside], argv: list[str],
                   host: str | None, now: datetime | None = None, cwd: str | None = None,
                   env_from: dict[str, str] | None = None, keep: Sequence[SetAside] = (),
                   remaining: Sequence[str] = (), experiment: str | None = None, blocked: str | None = None,
                   head: Sequence[str] = (), tail: Sequence[str] = (), meta: dict[str, Any] | None = None,
                   inputs: Any = None) -> Plan:
    """Set `trials` (and `keep`, folders kept from the command) aside beside the job, then run
    `argv` where the job lives. Backend-neutral: the caller chose what and which command.

    The plan's record lives with the set-aside trials; undo moves everything back while the
    job shows no new trial dir (services/remediations/job_step.py)."""
    digest = _digest([action, job_dir, host, argv, cwd, sorted(env_from or {}),
                      [(s.rel, s.label) for s in trials], [(s.rel, s.label) for s in keep],
                      sorted(remaining), inputs])
    record_id = new_record_id(action, now, digest)
    root = aside_root(job_dir)
    aside = posixpath.join(root, record_id)
    steps: list[Step] = []
    for s in sorted(trials, key=lambda s: s.rel):
        steps.append(MoveStep(src=posixpath.join(job_dir, s.rel), dst=posixpath.join(aside, "trials", s.rel),
                              label=s.rel))
    for s in sorted(keep, key=lambda s: s.rel):
        steps.append(MoveStep(src=posixpath.join(job_dir, s.rel), dst=posixpath.join(aside, "kept", s.rel),
                              label=s.rel))
    if trials:
        # undoable while the job shows no new trial (job_step.py checks before anything moves back)
        steps.append(ExternalStep(handler=HANDLER, label=f"{action}: {argv[0]}", inverse=True, args={
            "argv": list(argv), "cwd": cwd, "env_from": dict(env_from or {}), "ok_codes": [0], "kind": "resume",
            "job_dir": job_dir, "remaining": sorted(remaining), "aside": aside, "follow": job_dir,
            "record": record_id, "moved": sorted({s.rel.split("/")[0] for s in [*trials, *keep]}),
        }))
    where = host or "this machine"
    by_label = Counter(s.label for s in trials)
    preview = list(head)
    if trials:
        preview += [f"Set aside {len(trials)} trial(s), then run the command below on {where}:"]
        preview += [f"  {label} ×{n}" for label, n in sorted(by_label.items(), key=lambda kv: (-kv[1], kv[0]))]
        preview += [f"They move to {aside}/trials/ — nothing is deleted; undo puts them back until the job "
                    "has new trials."]
        if keep:
            preview += ["Also moved aside (the command would delete them):"]
            preview += [f"  {s.rel}  ({s.label})" for s in sorted(keep, key=lambda s: s.rel)]
        preview += ["", f"Command, on {where}:", f"  {display(argv, cwd, host)}"]
        if env_from:
            preview += [f"  environment: {', '.join(f'{k} from ${v}' for k, v in sorted(env_from.items()))}"]
    preview += list(tail)
    if trials:
        preview += [""] + [f"  move {s.rel}  ({s.label})" for s in sorted(trials, key=lambda s: s.rel)]
    if blocked and trials:
        preview += ["", f"Cannot apply now: {blocked}."]
    return Plan(id=record_id, action=action, title=title, target=job_dir, host=host, experiment=experiment,
                input_hash=digest, steps=steps, preview=preview, lock_dir=root, record_dir=aside,
                blocked=blocked,
                meta={**(meta or {}), "argv": list(argv), "cwd": cwd, "aside": aside,
                      "rerun": [s.rel for s in sorted(trials, key=lambda s: s.rel)],
                      "kept": [s.rel for s in sorted(keep, key=lambda s: s.rel)], "preview_paths": "absolute"})


def running_reason(exp: Experiment) -> str | None:
    sched = (exp.scheduler_state or "").split()[0].upper() if exp.scheduler_state else ""
    if sched in _SCHED_LIVE:
        return f"{exp.id} is still running (SLURM job {exp.scheduler_job_id} is {sched}): resume a finished job only"
    if exp.state in _LIVE:
        return f"{exp.id} is still {exp.state.value}: resume a finished job only"
    return None


async def _kept_folders(fs: JobFS, exp: Experiment, picked: set[str]) -> tuple[list[SetAside], list[str], str | None]:
    """(folders Harbor's resume would delete that are not set aside, what stays in the job,
    why the plan cannot run now)."""
    trial_top = {t.path.split("/", 1)[0]: t for t in exp.trials}
    try:
        names = sorted(await fs.list_dir(exp.path))
    except FileNotFoundError:
        raise WriteRefused(f"{exp.id}: the job dir {exp.path} is gone") from None
    keep: list[SetAside] = []
    remaining: list[str] = []
    blocked = None
    for name in names:
        if name in picked:
            continue
        t = trial_top.get(name)
        if t is not None and "/" not in t.path and t.status != TrialStatus.running:
            remaining.append(name)  # a trial dir with a result.json: Harbor keeps it
            continue
        path = posixpath.join(exp.path, name)
        st = await fs.stat(path)
        if st is None or not st.is_dir:
            remaining.append(name)  # files: Harbor leaves them
            continue
        if name == LOCK_DIR:
            blocked = f"another evaldesk write holds {path}; wait for it to finish"
            remaining.append(name)
            continue
        if await fs.stat(posixpath.join(path, "result.json")) is not None:
            remaining.append(name)
            continue
        if name == QUARANTINE_DIR:
            why = "evaldesk's records of earlier writes, with what they set aside"
        elif any(t.path.startswith(name + "/") for t in exp.trials):
            why = "a folder of staged trial copies"
        else:
            why = "a folder without a result.json"
        keep.append(SetAside(name, why))
    return keep, remaining, blocked


def _outcome_notes(exp: Experiment, sel: Selection, policy: Policy) -> list[str]:
    """What the audit can expect after the re-run trials succeed."""
    notes = []
    c = exp.counts
    picked = {p.trial.path for p in sel.picks}
    stay = [t for t in exp.trials if t.copy_of is None and t.path not in picked
            and t.status != TrialStatus.running]
    invalid_left = Counter(
        t.exception_type or "unreadable" for t in stay
        if (t.exception_type and not policy.is_benign(t.exception_type))
        or (t.status == TrialStatus.errored and not t.exception_type)
    )
    if stay and c.expected:
        frac = sum(invalid_left.values()) / max(c.expected, len(stay))
        if frac > policy.error_fraction_max:
            top = ", ".join(f"{k} ×{v}" for k, v in invalid_left.most_common(3))
            limit = 100 * policy.error_fraction_max
            notes.append(f"Even if every re-run succeeds, the error gate stays over {limit:.0f}% ({100 * frac:.1f}%): "
                         f"{top} stay — trials with a reward are never re-run.")
    return notes


async def plan_for(exp: Experiment, source: Source, config: Config, now: datetime | None = None,
                   types: Sequence[str] | None = None, paths: Sequence[str] | None = None) -> Plan:
    """The resume of one Harbor job: what is set aside, where to, and the exact command."""
    policy = config.policy
    fs = source.fs()
    host = source_host(source)
    sel = select_trials(exp, policy, types, paths)
    head: list[str] = []
    tail: list[str] = []
    if sel.unmatched:
        here = ", ".join(f"{k} ×{v}" for k, v in sorted(Counter(
            trial_label(t) for t in exp.trials if trial_label(t)).items())) or "none"
        head.append(f"No errored trial of {exp.id} has the type(s) {', '.join(sel.unmatched)} "
                    f"(errored here: {here}).")
    if sel.scored_named:
        head.append(f"{sel.scored_named} named trial(s) have a valid reward: never re-run.")
    if not sel.picks:
        left = "; ".join(f"{k} ×{v} — {sel.why.get(k, '')}" for k, v in sel.left.most_common())
        what = "none of the asked-for trials is errored" if (types or paths) else (
            "no errored trial Harbor would retry" if sel.left else "no errored trial")
        lines = [f"{exp.id}: nothing to resume — {what}" + (f" (left: {left})" if left else "") + "."]
        scored = Counter(t.exception_type for t in exp.trials if t.status == TrialStatus.valid
                         and t.exception_type and not policy.is_benign(t.exception_type))
        if scored:
            kinds = ", ".join(f"{k} ×{v}" for k, v in scored.most_common(3))
            lines.append(f"Trials with a reward are never re-run: {kinds} carry one, and count against the error "
                         "gate all the same.")
        if sel.left and not (types or paths):
            lines.append("Name the types to re-run anyway: --exception TYPE in batch, or f then x on the trials "
                         "screen.")
        return Plan(id=new_record_id(ACTION, now, "0" * 6), action=ACTION, title=f"Resume {exp.id}",
                    target=exp.path, host=host, experiment=experiment_key(exp), input_hash="",
                    preview=head + lines,
                    meta={"id": exp.id, "rerun": [], "argv": [], "types": {}, "unmatched": sel.unmatched,
                          "options": _options(types, paths), "preview_paths": "absolute"})
    blocked = running_reason(exp)
    if not blocked and await fs.stat(posixpath.join(exp.path, "config.json")) is None:
        blocked = (f"{exp.id} has no config.json: Harbor's resume re-runs the trials of the job config "
                   "(it would stop with 'Config file not found')")
    n_rep = exp.n_rep or policy.default_n_rep
    if not blocked and (exp.counts.max_attempts_per_task > n_rep or exp.counts.copies):
        blocked = f"{exp.id} has duplicates (more than {n_rep} attempts of a task, or staged copies): dedupe first"
    picked_names = {p.trial.path for p in sel.picks}
    keep, remaining, lock_blocked = await _kept_folders(fs, exp, picked_names)
    blocked = blocked or lock_blocked
    cmds = commands_for(source, config)
    values = {"job_dir": exp.path, "job_name": posixpath.basename(exp.path.rstrip("/")),
              "jobs_dir": posixpath.dirname(exp.path.rstrip("/")), "new_job_name": "", "new_job_dir": ""}
    try:
        argv = expand(cmds.resume, values, sel.types, where="the resume command")
    except TemplateError as exc:
        raise WriteRefused(str(exc)) from None
    # a value the command needs and this machine lacks stops it here, not after the moves
    blocked = blocked or env_problem(dict(cmds.env_from), "the resume command")
    if not blocked:
        try:
            blocked = await program_missing(runner_of(source), argv[0], cmds.cwd)
        except SourceUnavailable as exc:
            blocked = f"cannot reach {exc.where}: {exc.message}"
    head.insert(0, f"Resume {exp.id}: re-run its errored trials in the same job dir.")
    if sel.left:
        tail.append("Left in place: " + "; ".join(f"{k} ×{v} ({sel.why.get(k, '')})"
                                                  for k, v in sel.left.most_common()))
    tail += _outcome_notes(exp, sel, policy)
    trials = [SetAside(p.trial.path, p.label) for p in sel.picks]
    plan = set_aside_plan(
        action=ACTION, title=f"Resume {exp.id}", job_dir=exp.path, trials=trials, argv=argv, host=host, now=now,
        cwd=cmds.cwd, env_from=cmds.env_from, keep=keep, remaining=remaining, experiment=experiment_key(exp),
        blocked=blocked, head=head, tail=tail,
        meta={"id": exp.id, "types": dict(sel.by_label), "left": dict(sel.left), "unmatched": sel.unmatched,
              "options": _options(types, paths),
              "journal": {"set_aside": len(trials), "types": dict(sel.by_label)}},
        inputs=[[(p.trial.path, p.trial.status.value, p.trial.mtime) for p in sel.picks]],
    )
    return plan


def _options(types: Sequence[str] | None, paths: Sequence[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if types:
        out["types"] = list(types)
    if paths is not None:
        out["paths"] = list(paths)
    return out


def context(source: Source, config: Config) -> StepContext:
    return StepContext(source.fs(), runner=runner_of(source))


async def prepare(plan: Plan, ctx: StepContext) -> None:
    """The quarantine beside the job must exist before its lock can be taken."""
    if plan.lock_dir:
        await ctx.fs.makedirs(plan.lock_dir)


def batch_json(plan: Plan, record: Record | None) -> dict[str, Any]:
    """DESIGN 7's resume plan shape, with what the command did when it ran."""
    m = plan.meta
    result: dict[str, Any] = {}
    if record is not None:
        for r in record.results.values():
            if "exit_code" in r or "error" in r:
                result = r
    return {
        "id": m.get("id"), "rerun": m.get("rerun", []), "command": m.get("argv", []), "host": plan.host,
        "cwd": m.get("cwd"), "types": m.get("types", {}), "left": m.get("left", {}), "kept": m.get("kept", []),
        "unmatched": m.get("unmatched", []), "aside": m.get("aside"), "blocked": plan.blocked,
        "applied": record is not None, "record": record.id if record is not None else None,
        "exit_code": result.get("exit_code"), "slurm_job_id": result.get("slurm_job_id"),
        "error": result.get("error"),
    }
