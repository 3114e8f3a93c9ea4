"""Turn the raw pieces of one Harbor job dir into an Experiment: its trials (services/harbor/
parse.py) and its own files, read here through lenient mirrors of Harbor's job config and
aggregate result (0.1.x – 0.26: unknown fields ignored, nearly everything optional).

Shared by every source that reads Harbor job dirs (local disk, SSH, SFTP, object stores), so
every reading of the same folder gives the same figures by construction.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from services.core.attempts import earliest_key
from services.core.census import take_census
from services.core.models import AGGREGATE_UNREADABLE, Experiment, State, Trial
from services.core.policy import Policy
from services.harbor.parse import finite, load_json, when, whole_number
from services.harbor.runconfig import harbor_run_config

_T = TypeVar("_T")


class _JobDoc:
    """An object of one of the job's own files, read leniently: each getter gives the value or
    None, and remembers the first field whose value had the wrong shape (`file` names the file
    in that problem; the objects within are read the same way). A field is read as pydantic's
    lax mode, which read these files first, took it: a number may be written as text, a time as
    a number beyond 2e10 is in milliseconds; and a list or object field given as null is of the
    wrong shape."""

    __slots__ = ("file", "problem", "raw", "where")

    def __init__(self, raw: dict[str, Any], where: str, file: str) -> None:
        self.raw, self.where, self.file = raw, where, file
        self.problem: str | None = None

    def _bad(self, key: str, what: str) -> None:
        if self.problem is None:
            self.problem = f"{self.file} field {self.where + key!r}: {what}"

    def _judged(self, key: str, v: Any, got: _T | None, what: str) -> _T | None:
        if v is not None and got is None:
            self._bad(key, what)
        return got

    def text(self, key: str) -> str | None:
        v = self.raw.get(key)
        return self._judged(key, v, v if isinstance(v, str) else None, "not a string")

    def whole(self, key: str) -> int | None:
        v = self.raw.get(key)
        if isinstance(v, str):
            try:
                return int(v)
            except ValueError:
                f = _number_text(v)
                if f is not None and f.is_integer():
                    return int(f)
        return self._judged(key, v, whole_number(v), "not an integer")

    def number(self, key: str) -> float | None:
        v = self.raw.get(key)
        if isinstance(v, str) and (f := _number_text(v)) is not None:
            return f
        return self._judged(key, v, finite(v), "not a finite number")

    def when(self, key: str) -> datetime | None:
        v = self.raw.get(key)
        n = f if isinstance(v, str) and (f := _number_text(v)) is not None else v
        if isinstance(n, int | float) and not isinstance(n, bool) and abs(n) > 2e10:
            n /= 1000  # (a count of milliseconds, as pydantic read it)
        return self._judged(key, v, when(n), "not a date and time")

    def text_or_whole(self, key: str) -> str | int | None:
        v = self.raw.get(key)
        return v if v is None or isinstance(v, str) else self.whole(key)

    def fields(self, key: str) -> _JobDoc:
        """An object field (empty when absent, or not an object)."""
        v = self.raw.get(key, _EMPTY)
        if not isinstance(v, dict):
            self._bad(key, "not an object")
            v = _EMPTY
        return _JobDoc(v, f"{self.where}{key}.", self.file)

    def items(self, key: str) -> list[_JobDoc]:
        """The objects of a list field (none when absent, or not a list); an item that is not
        an object is left out."""
        v = self.raw.get(key, _NO_ITEMS)
        if not isinstance(v, list):
            self._bad(key, "not a list")
            return []
        out = []
        for i, x in enumerate(v):
            if isinstance(x, dict):
                out.append(_JobDoc(x, f"{self.where}{key}.{i}.", self.file))
            else:
                self._bad(f"{key}.{i}", "not an object")
        return out


_EMPTY: dict[str, Any] = {}
_NO_ITEMS: list[Any] = []


def _number_text(text: str) -> float | None:
    try:
        return finite(float(text))
    except ValueError:
        return None


@dataclass(slots=True)
class EvalStats:
    n_trials: int | None = None
    n_errors: int | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    exception_stats: dict[str, list[str]] = field(default_factory=dict)

    @property
    def mean(self) -> float | None:
        for m in self.metrics:
            v = m.get("mean") if isinstance(m, dict) else None
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                return float(v)
        return None


@dataclass(slots=True)
class JobStats:
    n_completed_trials: int | None = None
    n_errored_trials: int | None = None
    n_running_trials: int | None = None
    n_pending_trials: int | None = None
    n_cancelled_trials: int | None = None
    n_retries: int | None = None
    # 0.1.x wrote these at the top of stats
    n_trials: int | None = None
    n_errors: int | None = None
    evals: dict[str, EvalStats] = field(default_factory=dict)
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


@dataclass(slots=True)
class JobResultFile:
    id: str | None = None
    started_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    n_total_trials: int | None = None
    stats: JobStats = field(default_factory=JobStats)


@dataclass(slots=True)
class AgentConfig:
    name: str | None = None
    import_path: str | None = None
    model_name: str | None = None
    override_timeout_sec: float | None = None
    max_timeout_sec: float | None = None


@dataclass(slots=True)
class DatasetConfig:
    path: str | None = None
    name: str | None = None
    version: str | None = None


@dataclass(slots=True)
class JobConfigFile:
    job_name: str | None = None
    n_attempts: int | None = None
    timeout_multiplier: float | None = None
    agents: list[AgentConfig] = field(default_factory=list)
    datasets: list[DatasetConfig] = field(default_factory=list)
    # where a site records the scheduler job and the real model name
    slurm_job_id: str | int | None = None
    model_hf_name: str | None = None


# -- the readers: each object read goes into `docs`, whose first problem is the file's

def _eval_stats(d: _JobDoc, docs: list[_JobDoc]) -> EvalStats:
    n_trials, n_errors = d.whole("n_trials"), d.whole("n_errors")
    metrics = d.items("metrics")
    docs += metrics
    exception_stats: dict[str, list[str]] = {}
    for key, names in d.fields("exception_stats").raw.items():
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            exception_stats[key] = names
        else:
            d._bad(f"exception_stats.{key}", "not a list of strings")
    return EvalStats(n_trials, n_errors, [m.raw for m in metrics], exception_stats)


def _job_stats(d: _JobDoc, docs: list[_JobDoc]) -> JobStats:
    w = d.whole
    counts = (w("n_completed_trials"), w("n_errored_trials"), w("n_running_trials"), w("n_pending_trials"),
              w("n_cancelled_trials"), w("n_retries"), w("n_trials"), w("n_errors"))
    docs.append(evals := d.fields("evals"))
    by_key: dict[str, EvalStats] = {}
    for key, v in evals.raw.items():
        if isinstance(v, dict):
            docs.append(ev := _JobDoc(v, f"{evals.where}{key}.", d.file))
            by_key[key] = _eval_stats(ev, docs)
        else:
            evals._bad(key, "not an object")
    return JobStats(*counts, by_key, w("n_input_tokens"), w("n_cache_tokens"), w("n_output_tokens"),
                    d.number("cost_usd"))


def _job_result(d: _JobDoc, docs: list[_JobDoc]) -> JobResultFile:
    v = d.raw.get("id")  # any value, as text
    started, updated, finished = d.when("started_at"), d.when("updated_at"), d.when("finished_at")
    planned = d.whole("n_total_trials")
    docs.append(stats := d.fields("stats"))
    return JobResultFile(None if v is None else str(v), started, updated, finished, planned,
                         _job_stats(stats, docs))


def _job_config(d: _JobDoc, docs: list[_JobDoc]) -> JobConfigFile:
    name, n_attempts, multiplier = d.text("job_name"), d.whole("n_attempts"), d.number("timeout_multiplier")
    agents, datasets = d.items("agents"), d.items("datasets")
    docs += agents + datasets
    return JobConfigFile(
        name, n_attempts, multiplier,
        [AgentConfig(a.text("name"), a.text("import_path"), a.text("model_name"),
                     a.number("override_timeout_sec"), a.number("max_timeout_sec")) for a in agents],
        [DatasetConfig(s.text("path"), s.text("name"), s.text("version")) for s in datasets],
        d.text_or_whole("slurm_job_id"), d.text("model_hf_name"))


_M = TypeVar("_M", JobConfigFile, JobResultFile)

# how each file is read, and whether a field of the wrong shape drops the whole file: a job
# config read in part would give an n_rep from Harbor's default where the file said something
# else, so one that does not read falls back to the policy's default as a whole
_READERS: dict[type, tuple[Callable[[_JobDoc, list[_JobDoc]], Any], bool]] = {
    JobConfigFile: (_job_config, True),
    JobResultFile: (_job_result, False),
}


def _set(t: Trial, name: str, value: object) -> None:
    # Derived marks are rewritten on every scan of up to 100k trials; pydantic's
    # __setattr__ costs several times a plain dict write and validates nothing here.
    object.__setattr__(t, name, value)  # (t.__dict__ would give each Trial a dict of its own)


def parse_job_file(data: bytes | None, model: type[_M], name: str, problems: list[str]) -> _M | None:
    """One of the job's own files read into its mirror, or None (with the reason put in
    `problems`) when it is not a JSON object. Fields of the wrong shape are one problem line,
    naming the first found, and read as absent (in a job config: the whole file is dropped)."""
    if data is None:
        return None
    try:
        raw = load_json(data)
    except ValueError as exc:
        problems.append(f"{name} is not valid JSON: {exc}")
        return None
    if not isinstance(raw, dict):
        problems.append(f"{name} holds a JSON {type(raw).__name__}, not an object")
        return None
    read, whole_file = _READERS[model]
    doc = _JobDoc(raw, "", name)
    docs = [doc]
    out: _M = read(doc, docs)
    problem = next((d.problem for d in docs if d.problem), None)
    if problem is None:
        return out
    problems.append(problem)
    return None if whole_file else out


def parse_env_file(data: bytes | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if not data:
        return out
    for line in data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        out[key.strip()] = value.strip().strip("'\"")
    return out


def benchmark_from_dir_name(name: str, policy: Policy) -> str | None:
    """The run dir is named <benchmark>_<model>_<ts>; the leading segment is the benchmark."""
    for known in sorted(policy.benchmark_sizes, key=len, reverse=True):
        if name.startswith(known) and (len(name) == len(known) or name[len(known)] in "_-.@"):
            return known
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}__\d{2}-\d{2}-\d{2}", name):
        return None  # Harbor's default job name carries no benchmark
    head = re.split(r"__|_", name, maxsplit=1)[0]
    return head or None


def _dataset_name(cfg: JobConfigFile | None) -> str | None:
    if cfg is None:
        return None
    for ds in cfg.datasets:
        if ds.name:
            return ds.name.rsplit("/", 1)[-1]
        if ds.path:
            return ds.path.rstrip("/").rsplit("/", 1)[-1] or None
    return None


def collapse_copies(trials: list[Trial]) -> None:
    """Mark staged/restored copies: same trial_name, deeper path than the original."""
    first: dict[str, Trial] = {}
    clashes: dict[str, list[Trial]] = {}
    for t in trials:
        if t.copy_of is not None:
            _set(t, "copy_of", None)
        seen = first.setdefault(t.trial_name, t)
        if seen is not t:
            clashes.setdefault(t.trial_name, [seen]).append(t)
    for group in clashes.values():
        group.sort(key=lambda t: (t.path.count("/"), t.path))
        original = group[0]
        for dup in group[1:]:
            _set(dup, "copy_of", original.path)


def number_attempts(trials: Iterable[Trial]) -> dict[str, list[Trial]]:
    by_task: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        if t.copy_of is None:
            by_task[t.task_name].append(t)
    for attempts in by_task.values():
        if len(attempts) > 1:
            attempts.sort(key=earliest_key)
        for i, t in enumerate(attempts, 1):
            if t.attempt != i:
                _set(t, "attempt", i)
    return by_task


class TrialIndex:
    """A job's trials grouped by name and by task, with their census, kept current by deltas.

    A poll of a live job changes a handful of trials out of up to 100k; re-marking copies,
    re-numbering attempts and re-counting only the names and tasks those touch keeps the
    refresh proportional to the change. `rebuild` and `apply` give exactly what a fresh
    pass would (tests check it against one).
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.by_path: dict[str, Trial] = {}
        # Trials found by name: a trial whose name is its own path (nearly all) is found through
        # by_path; by_name holds the others (staged copies, renamed dirs), bare or as a list
        self.by_name: dict[str, Trial | list[Trial]] = {}
        self.by_task: dict[str, list[Trial]] = {}  # copies included
        self.census = take_census((), policy)
        self.touched: list[Trial] = []

    def rebuild(self, trials: Iterable[Trial]) -> None:
        self.by_path = {t.path: t for t in trials}
        self.by_name, self.by_task = {}, {}
        for t in self.by_path.values():
            if t.trial_name != t.path:
                _put(self.by_name, t.trial_name, t)
            self.by_task.setdefault(t.task_name, []).append(t)
        trials_list = list(self.by_path.values())
        collapse_copies(trials_list)
        number_attempts(trials_list)
        self.census = take_census(trials_list, self.policy)

    def apply(self, removed: Iterable[Trial], added: Iterable[Trial]) -> None:
        removed, added = list(removed), list(added)
        self.touched = []
        if not removed and not added:
            return
        names = {t.trial_name for t in removed} | {t.trial_name for t in added}
        tasks = {t.task_name for t in removed} | {t.task_name for t in added}
        for n in names:  # a copy mark can move a trial of another task in or out of the counts
            tasks.update(t.task_name for t in self._named(n))
        add = self.census.add
        for task in tasks:
            for t in self.by_task.get(task, ()):
                add(t, -1)
        for t in removed:
            if self.by_path.get(t.path) is t:
                del self.by_path[t.path]
            if t.trial_name != t.path:
                _drop_named(self.by_name, t.trial_name, t)
            _drop(self.by_task, t.task_name, t)
        for t in added:
            self.by_path[t.path] = t
            if t.trial_name != t.path:
                _put(self.by_name, t.trial_name, t)
            self.by_task.setdefault(t.task_name, []).append(t)
        for n in names:
            group = self._named(n)
            if group:
                collapse_copies(group)
        # every trial whose copy mark may have moved: what a delta consumer must look at again
        self.touched = [t for n in names for t in self._named(n)]
        for task in tasks:
            members = self.by_task.get(task, [])
            number_attempts(members)
            for t in members:
                add(t, +1)

    def _named(self, name: str) -> list[Trial]:
        """Every trial called `name`, in the order they were added."""
        group = list(_members(self.by_name, name))  # (a copy: the stored list stays as it is)
        own = self.by_path.get(name)
        if own is not None and own.trial_name == name:
            group.insert(0, own)
        return group

    @property
    def trials(self) -> list[Trial]:
        return list(self.by_path.values())


def _members(index: dict[str, Trial | list[Trial]], key: str) -> list[Trial]:
    v = index.get(key)
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def _put(index: dict[str, Trial | list[Trial]], key: str, t: Trial) -> None:
    v = index.get(key)
    if v is None:
        index[key] = t
    elif isinstance(v, list):
        v.append(t)
    else:
        index[key] = [v, t]


def _drop_named(index: dict[str, Trial | list[Trial]], key: str, t: Trial) -> None:
    v = index.get(key)
    if v is t:
        del index[key]
    elif isinstance(v, list):
        rest = [x for x in v if x is not t]
        if not rest:
            del index[key]
        else:
            index[key] = rest if len(rest) > 1 else rest[0]


def _drop(index: dict[str, list[Trial]], key: str, t: Trial) -> None:
    group = index.get(key)
    if group is None:
        return
    group[:] = [x for x in group if x is not t]
    if not group:
        del index[key]


def assemble_experiment(
    *,
    job_id: str,
    path: str,
    source: str,
    source_label: str,
    trials: list[Trial],
    policy: Policy,
    config_bytes: bytes | None,
    result_bytes: bytes | None,
    eval_config_bytes: bytes | None = None,
    env_bytes: bytes | None = None,
    problems: list[str] | None = None,
    index: TrialIndex | None = None,
) -> Experiment:
    """`index`, when given, already holds `trials` with copies marked, attempts numbered and
    the census taken (the local scanner keeps one up to date between scans)."""
    problems = list(problems or [])
    cfg: JobConfigFile | None = parse_job_file(config_bytes, JobConfigFile, "config.json", problems)
    res: JobResultFile | None = parse_job_file(result_bytes, JobResultFile, "result.json", problems)
    if config_bytes is None:
        problems.append("no job config.json: n_rep falls back to the default")
    if result_bytes is None:
        problems.append("no job result.json: no score, no planned trial count")

    if index is not None:
        census = index.census
    else:
        collapse_copies(trials)
        number_attempts(trials)
        census = take_census(trials, policy)
    counts = census.counts

    # n_rep: the job config's n_attempts; absent from a Harbor config means Harbor's default 1.
    if cfg is not None:
        n_rep = cfg.n_attempts if cfg.n_attempts is not None else 1
        if n_rep < 1:
            problems.append(f"config.json n_attempts = {n_rep} is not a positive count; using Harbor's default 1")
            n_rep = 1
        n_rep_source = "config"
    else:
        n_rep = policy.default_n_rep
        n_rep_source = "default"

    model_counter = census.models
    cfg_model = next((a.model_name for a in cfg.agents if a.model_name), None) if cfg else None
    model = cfg_model or (model_counter.most_common(1)[0][0] if model_counter else None)

    eval_cfg = parse_job_file(eval_config_bytes, JobConfigFile, "eval config", problems)
    model_hf_name = (cfg.model_hf_name if cfg else None) or (eval_cfg.model_hf_name if eval_cfg else None)

    bench_dir = benchmark_from_dir_name(job_id, policy)
    src_counter = census.sources
    benchmark = (
        _dataset_name(cfg)
        or (src_counter.most_common(1)[0][0] if src_counter else None)
        or bench_dir
    )
    size = policy.benchmark_size(benchmark) or policy.benchmark_size(bench_dir)

    planned = res.n_total_trials if res else None
    if planned is not None and planned < 1:
        problems.append(f"result.json n_total_trials = {planned} is not a positive count; ignored")
        planned = None
    expected = planned if planned else (n_rep * size if size else None)
    counts.expected = expected
    counts.n_rep = n_rep

    score: float | None = None
    eval_key: str | None = None
    if res and res.stats.evals:
        eval_key, ev = max(res.stats.evals.items(), key=lambda kv: kv[1].n_trials or 0)
        score = ev.mean

    timeout = None
    if cfg:
        for a in cfg.agents:
            t_s = a.override_timeout_sec or a.max_timeout_sec
            if t_s:
                timeout = t_s * (cfg.timeout_multiplier or 1.0)
                break

    env = parse_env_file(env_bytes)
    sched_id = (str(cfg.slurm_job_id) if cfg and cfg.slurm_job_id else None) or env.get("SLURM_JOB_ID")

    if res is not None and res.finished_at is not None:
        state, raw = State.finished, "finished"
    elif result_bytes is not None and res is None and not counts.running:
        # Harbor rewrites result.json on every trial start and end; with nothing running, an
        # aggregate that does not parse is not a write in progress: nothing can say whether the
        # job is over, what it scored or what it planned until it is rebuilt
        state, raw = State.blocked, AGGREGATE_UNREADABLE
    elif counts.running:
        state, raw = State.running, "running"
    elif res is not None or counts.total:
        state, raw = State.running, "unfinished"
    else:
        state, raw = State.pending, "no trials yet"
    if state == State.finished and counts.running:
        problems.append(f"{counts.running} trial dir(s) have no result.json although the job is over (orphaned)")

    n_in = census.n_input_tokens or None
    n_out = census.n_output_tokens or None
    cost = census.cost_usd

    exp = Experiment(
        id=job_id,
        source=source,
        source_label=source_label,
        path=path,
        state=state,
        state_raw=raw,
        model=model,
        model_hf_name=model_hf_name,
        benchmark=benchmark,
        benchmark_from_dir=bench_dir,
        benchmark_size=size,
        n_rep=n_rep,
        n_rep_source=n_rep_source,  # type: ignore[arg-type]
        planned_trials=planned,
        score=score,
        eval_key=eval_key,
        started_at=res.started_at if res else None,
        updated_at=res.updated_at if res else None,
        finished_at=res.finished_at if res else None,
        scheduler_job_id=sched_id,
        inference_timeout_s=timeout,
        run_config=harbor_run_config(config_bytes, timeout),
        counts=counts,
        n_input_tokens=n_in,
        n_output_tokens=n_out,
        cost_usd=cost if cost and math.isfinite(cost) else None,
        problems=problems,
        trials=trials,
    )
    exp._census = census
    return exp

