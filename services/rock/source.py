"""Rock runs as experiments: regression.py's work dir on local disk, and the rl-rock CLI's
run metadata (`rock job run-list` / `run-status --jobs`).

One task record is one trial attempt (regression.py runs each task once per experiment; a
retry is a new experiment). A task that has not started is not an attempt yet: it counts
toward the expected number only. Rock's own word for every task and run is kept beside
evaldesk's (`Trial.state_raw`, `Experiment.state_raw`); Rock's `dispatched` is a real state,
which the monitor's rule (a) counts directly.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from services.core.census import take_census
from services.core.config import RockConfig
from services.core.failures import failure_class
from services.core.models import Experiment, Snapshot, SourceError, State, Trial, TrialStatus
from services.core.paths import UnsafePath, inside
from services.core.policy import Policy
from services.core.source import ProgressFn, SourceUnavailable, TrialEvidence, TrialFile, no_progress
from services.rock.find import results_files
from services.rock.formats import (
    NoSuchExperiment,
    RegressionResults,
    RegressionTask,
    RockRun,
    RockRunJob,
    resolve_experiment,
    run_config,
    run_state,
    task_status,
)
from services.transport.fs import FileStat, JobFS, LocalFS
from services.transport.process import CommandNotFound, LocalRunner, Runner

# the trials screen and the monitor's activity probe open `<trial path>/trial.log`; a Rock
# task's log is `logs/<experiment>/<task>.log`, which RockFS serves under that name
TASK_LOG = "trial.log"
TRIAL_FILES: tuple[TrialFile, ...] = (TrialFile("log", "task log", TASK_LOG),)
MAX_RESULTS_BYTES = 64 * 1024 * 1024
LOG_TAIL_BYTES = 16 * 1024


class RockFS(LocalFS):
    """Local files, where `logs/<exp>/<task>/trial.log` reads `logs/<exp>/<task>.log`."""

    @staticmethod
    def _map(path: str) -> str:
        if path.endswith("/" + TASK_LOG):
            task_dir = path[: -len(TASK_LOG) - 1]
            if not os.path.isdir(task_dir):
                return task_dir + ".log"
        return path

    async def stat(self, path: str) -> FileStat | None:
        return await super().stat(self._map(path))

    async def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        return await super().read_bytes(self._map(path), offset, length)

    async def read_regular(self, path: str, max_bytes: int, timeout_s: float = 30.0) -> bytes:
        return await super().read_regular(self._map(path), max_bytes, timeout_s)


def _trial(task: RegressionTask | RockRunJob, exp_id: str, status: TrialStatus, attempt: int,
           mtime: float | None) -> Trial:
    if isinstance(task, RegressionTask):
        reward, exc, msg = task.reward, task.exception_type, task.exception_message
        name = task.job_name or task.task_id
        tokens = (task.n_input_tokens, task.n_output_tokens, task.cost_usd)
    else:
        reward, exc, msg = task.score, None, task.error
        name = task.job_name or task.task_id
        tokens = (None, None, None)
    suffix = "" if attempt == 1 else f"~{attempt}"
    return Trial(
        trial_name=name + suffix,
        task_name=task.task_id,
        path=posixpath.join("logs", exp_id, task.task_id + suffix),
        status=status,
        state_raw=task.status,
        reward=reward if status == TrialStatus.valid else None,
        rewards={"reward": reward} if reward is not None and status == TrialStatus.valid else {},
        exception_type=exc,
        exception_message=msg,
        failure_class=failure_class(exc),
        started_at=task.started_at,
        finished_at=task.finished_at if status != TrialStatus.running else None,
        n_input_tokens=tokens[0],
        n_output_tokens=tokens[1],
        cost_usd=tokens[2],
        # a live task's sign of life is its log (the activity probe), not the shared results file
        mtime=None if status == TrialStatus.running else mtime,
        attempt=attempt,
    )


_LIFECYCLE = ("pending", "dispatched", "running", "completed", "error", "failed", "timeout", "cancelled")


def _raw_word(raw: str | None, statuses: list[str]) -> str:
    """Rock's run status, else its task words counted, in lifecycle order."""
    if raw:
        return raw
    counts = Counter(statuses)
    order = sorted(counts, key=lambda w: (_LIFECYCLE.index(w) if w in _LIFECYCLE else len(_LIFECYCLE), w))
    return ", ".join(f"{counts[w]} {w}" for w in order)


def build_experiment(
    tasks: list[RegressionTask] | list[RockRunJob],
    *,
    exp_id: str,
    label: str,
    path: str,
    policy: Policy,
    raw_state: str | None,
    benchmark: str | None,
    model: str | None,
    config: dict[str, Any],
    mtime: float | None,
    expected: int | None = None,
    score: float | None = None,
    started_at: datetime | None = None,
    updated_at: datetime | None = None,
    finished_at: datetime | None = None,
    problems: list[str] | None = None,
) -> Experiment:
    """One Rock experiment from its task records (regression.py's or the CLI's)."""
    trials: list[Trial] = []
    seen: Counter[str] = Counter()
    statuses = [t.status for t in tasks]
    state = run_state(raw_state, statuses)
    terminal = state in (State.finished, State.failed, State.cancelled)
    for task in tasks:
        reward = task.reward if isinstance(task, RegressionTask) else task.score
        status = task_status(task.status, reward)
        if status is None and terminal and task.status == "unknown":
            status = TrialStatus.errored  # the run ended and this task left no record
        if status is None:
            continue
        seen[task.task_id] += 1
        trials.append(_trial(task, exp_id, status, seen[task.task_id], mtime))
    trials.sort(key=lambda t: (t.task_name, t.attempt))
    census = take_census(trials, policy)
    counts = census.counts
    n_tasks = len({t.task_id for t in tasks})
    counts.expected = expected if expected is not None else n_tasks
    counts.n_rep = 1
    valid = [t.reward for t in trials if t.status == TrialStatus.valid and t.reward is not None]
    if score is None and valid:
        score = sum(valid) / len(valid)
    starts = [t.started_at for t in trials if t.started_at]
    ends = [t.finished_at for t in trials if t.finished_at]
    if finished_at is None and terminal and ends:
        finished_at = max(ends)
    exp = Experiment(
        id=exp_id,
        source="rock",
        source_label=label,
        path=path,
        state=state,
        state_raw=_raw_word(raw_state, statuses),
        model=model or (str(config["model"]) if config.get("model") else None),
        benchmark=benchmark,
        benchmark_size=max(n_tasks, expected or 0) or None,
        n_rep=1,
        n_rep_source="config",
        planned_trials=counts.expected,
        score=score,
        started_at=started_at or (min(starts) if starts else None),
        updated_at=updated_at or (datetime.fromtimestamp(mtime, UTC) if mtime else None),
        finished_at=finished_at if terminal else None,
        inference_timeout_s=_timeout(config),
        run_config=config,
        counts=counts,
        n_input_tokens=census.n_input_tokens or None,
        n_output_tokens=census.n_output_tokens or None,
        cost_usd=census.cost_usd or None,
        problems=problems or [],
        trials=trials,
    )
    exp._census = census
    return exp


def _timeout(config: dict[str, Any]) -> float | None:
    v = config.get("agent_timeout_s")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else None


def _read_json(path: Path) -> tuple[Any, str | None]:
    from services.core.input_files import InputFileError, parse_json, read_bytes

    try:
        data = read_bytes(path, max_bytes=MAX_RESULTS_BYTES)
    except InputFileError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"{path}: cannot read ({exc.strerror or exc})"
    try:
        return parse_json(data, str(path)), None
    except InputFileError as exc:
        return None, str(exc)


class RockResultsSource:
    """regression.py's work dir: `results/`, `configs/`, `logs/` (all experiments, or the one
    `experiment` names: "newest", an id or prefix, or a results file)."""

    kind = "rock"
    trial_files = TRIAL_FILES

    def __init__(self, workdir: str | Path, policy: Policy | None = None, label: str | None = None,
                 experiment: str | None = None, settings: RockConfig | None = None) -> None:
        self.workdir = os.path.abspath(os.path.expanduser(str(workdir)))
        self.policy = policy or Policy()
        self.label = label or self.workdir
        self.experiment = experiment
        self.settings = settings or RockConfig(name=self.label, workdir=self.workdir)
        self._fs = RockFS()
        # results file -> ((mtime_ns, size) of it and of its config, the experiment built from them)
        self._cache: dict[str, tuple[tuple[Any, ...], Experiment]] = {}

    def fs(self) -> JobFS:
        return self._fs

    def _files(self) -> list[Path]:
        if not os.path.isdir(self.workdir):
            raise SourceUnavailable(self.workdir, "no such directory")
        if self.experiment is None:
            return results_files(self.workdir)
        try:
            return [resolve_experiment(self.workdir, self.experiment)]
        except NoSuchExperiment as exc:
            raise SourceUnavailable(self.label, str(exc)) from None

    def scan_sync(self, progress: ProgressFn = no_progress) -> Snapshot:
        taken = datetime.now(UTC)
        files = self._files()
        experiments: list[Experiment] = []
        errors: list[SourceError] = []
        if not files:
            errors.append(SourceError(source=self.label, where=self.workdir, message="no results/*.json yet"))
        for i, path in enumerate(files):
            progress(i, len(files), f"reading {path.name}")
            cfg_path = path.parent.parent / "configs" / path.name
            key = (_key(path), _key(cfg_path))
            hit = self._cache.get(str(path))
            if hit is not None and hit[0] == key:
                experiments.append(hit[1])
                continue
            exp, err = self._read(path, cfg_path)
            if err is not None:
                errors.append(SourceError(source=self.label, where=str(path), message=err))
            if exp is not None:
                self._cache[str(path)] = (key, exp)
                experiments.append(exp)
        for gone in set(self._cache) - {str(p) for p in files}:
            del self._cache[gone]
        return Snapshot(source=self.label, taken_at=taken, experiments=experiments, errors=errors,
                        stats={"results_files": len(files)})

    def _read(self, path: Path, cfg_path: Path) -> tuple[Experiment | None, str | None]:
        raw, err = _read_json(path)
        if err is not None:
            return None, err
        if not isinstance(raw, dict):
            return None, f"holds a JSON {type(raw).__name__}, not an object"
        try:
            res = RegressionResults.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ()))
            return None, f"{loc}: {first.get('msg')}"
        problems: list[str] = []
        saved: dict[str, Any] | None = None
        if cfg_path.exists():
            saved_raw, cerr = _read_json(cfg_path)
            if cerr:
                problems.append(cerr)
            elif isinstance(saved_raw, dict):
                saved = saved_raw
        exp_id = path.stem
        if res.experiment_id and res.experiment_id != exp_id:
            problems.append(f"{path.name} names experiment {res.experiment_id!r}; the file name is used")
        try:
            mtime = path.stat().st_mtime
        except OSError:
            mtime = None
        exp = build_experiment(
            res.tasks, exp_id=exp_id, label=self.label, path=self.workdir, policy=self.policy,
            raw_state=res.status, benchmark=res.bench or res.dataset, model=res.model,
            config=run_config(saved, res), mtime=mtime, started_at=res.created_at, updated_at=res.updated_at,
            finished_at=res.finished_at, problems=problems,
        )
        return exp, None

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        return await asyncio.to_thread(self.scan_sync, progress or no_progress)

    async def evidence(self, exp: Experiment, trial: Trial) -> TrialEvidence:
        ev = TrialEvidence(exception_type=trial.exception_type, exception_message=trial.exception_message,
                           verifier_label="task log (last lines)")
        try:
            log = inside(exp.path, trial.path, TASK_LOG)
        except UnsafePath as exc:
            ev.problems.append(str(exc))
            return ev
        fs = self.fs()
        try:
            st = await fs.stat(log)
            if st is None or st.is_dir:
                ev.problems.append(f"no task log at logs/{exp.id}/{trial.task_name}.log")
                return ev
            start = max(0, st.size - LOG_TAIL_BYTES)
            tail = (await fs.read_bytes(log, start, st.size - start)).decode("utf-8", errors="replace")
        except OSError as exc:
            ev.problems.append(f"task log: {exc.strerror or exc}")
            return ev
        at = tail.rfind("Traceback (most recent call last)")
        if at >= 0:
            ev.traceback = tail[at:]
        ev.verifier_excerpt = "\n".join(tail.splitlines()[-40:])
        return ev

    async def close(self) -> None:
        return None


def _key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class RockCLISource:
    """Runs and their jobs as the rl-rock CLI prints them: `rock job run-list --output json`,
    then `rock job run-status --run-id X --jobs --output json` for each run. The CLI reads
    Rock's artifact store (OSS); its locator and keys live in the job config YAML it is
    given, never in evaldesk's config."""

    kind = "rock"
    trial_files: tuple[TrialFile, ...] = ()

    def __init__(self, settings: RockConfig, policy: Policy | None = None, runner: Runner | None = None,
                 label: str | None = None, timeout_s: float = 120.0) -> None:
        self.settings = settings
        self.policy = policy or Policy()
        self.runner: Runner = runner or LocalRunner()
        self.label = label or settings.name
        self.timeout_s = timeout_s
        self._fs = LocalFS()

    def fs(self) -> JobFS:
        return self._fs

    def locator(self) -> list[str]:
        s = self.settings
        args: list[str] = []
        if s.job_config:
            args += ["--job-config", os.path.expanduser(s.job_config)]
        if s.namespace:
            args += ["--namespace", s.namespace]
        if s.experiment_id:
            args += ["--experiment-id", s.experiment_id]
        return args

    async def _json(self, *sub: str) -> Any:
        argv = [*self.settings.command, "job", *sub, "--output", "json", *self.locator()]
        try:
            res = await self.runner.run(argv, timeout_s=self.timeout_s)
        except CommandNotFound as exc:
            raise SourceUnavailable(self.label, f"{exc} (install rl-rock, or set command in [[rock]])") from None
        except TimeoutError:
            raise SourceUnavailable(self.label, f"{' '.join(argv[:4])} … took over {self.timeout_s:g} s") from None
        if res.exit_code != 0:
            last = (res.stderr_tail or res.stdout_tail).strip().splitlines()[-1:] or [f"exit code {res.exit_code}"]
            raise SourceUnavailable(self.label, f"rock job {sub[0]}: {last[0][:300]}")
        try:
            return orjson.loads(res.stdout_tail.strip() or b"null")
        except orjson.JSONDecodeError:
            first = res.stdout_tail.strip().splitlines()[:1] or [""]
            raise SourceUnavailable(self.label, f"rock job {sub[0]} printed no JSON: {first[0][:200]}") from None

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        progress = progress or no_progress
        taken = datetime.now(UTC)
        listed = await self._json("run-list")
        if not isinstance(listed, list):
            raise SourceUnavailable(self.label, "rock job run-list did not print a list of runs")
        experiments: list[Experiment] = []
        errors: list[SourceError] = []
        for i, item in enumerate(listed):
            run_id = item.get("run_id") if isinstance(item, dict) else None
            if not run_id:
                errors.append(SourceError(source=self.label, where="run-list", message=f"entry {i} has no run_id"))
                continue
            progress(i, len(listed), f"run {run_id}")
            try:
                detail = await self._json("run-status", "--run-id", str(run_id), "--jobs")
                run = RockRun.model_validate(detail)
            except SourceUnavailable as exc:
                errors.append(SourceError(source=self.label, where=str(run_id), message=exc.message))
                continue
            except ValidationError as exc:
                first = exc.errors()[0]
                errors.append(SourceError(source=self.label, where=str(run_id),
                                          message=f"{'.'.join(str(p) for p in first.get('loc', ()))}: "
                                                  f"{first.get('msg')}"))
                continue
            experiments.append(self.experiment_of(run))
        return Snapshot(source=self.label, taken_at=taken, experiments=experiments, errors=errors,
                        stats={"runs": len(listed)})

    def experiment_of(self, run: RockRun) -> Experiment:
        expected = run.total_tasks if run.total_tasks else None
        score = run.summary.avg_score if run.summary and run.summary.avg_score is not None else None
        return build_experiment(
            run.jobs, exp_id=run.run_id, label=self.label, path=f"rock://{self.settings.name}/{run.run_id}",
            policy=self.policy, raw_state=run.status, benchmark=run.dataset, model=None,
            config={k: v for k, v in (("split", run.split),) if v}, mtime=None, expected=expected, score=score,
            started_at=run.started_at or run.created_at, updated_at=run.updated_at, finished_at=run.finished_at,
            problems=[run.status_reason] if run.status_reason else [],
        )

    async def evidence(self, exp: Experiment, trial: Trial) -> TrialEvidence:
        return TrialEvidence(exception_type=trial.exception_type, exception_message=trial.exception_message,
                             problems=["the rock CLI reports the job's status and error only; its logs live in "
                                       "Rock's artifact store (rock job trial-show)"])

    async def close(self) -> None:
        return None
