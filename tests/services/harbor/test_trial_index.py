"""The incremental index gives exactly what a fresh pass over the same trials gives."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta

import pytest

from services.core.census import take_census
from services.core.models import Trial, TrialStatus
from services.core.policy import Policy
from services.harbor.assemble import TrialIndex, collapse_copies, number_attempts

T0 = datetime(2026, 11, 1, tzinfo=UTC)
EXC = [None, None, None, "AgentTimeoutError", "DaytonaError", "VerifierOutputParseError", "NonZeroAgentExitCodeError"]


def _trial(rng: random.Random, n: int) -> Trial:
    task = f"task-{rng.randint(0, 6)}"
    # a few names repeat, at another depth: staged copies of an original
    name = f"{task}__{rng.randint(0, 30):07d}"
    path = name if rng.random() < 0.8 else f"restored/{name}"
    exc = rng.choice(EXC)
    status = rng.choice([TrialStatus.valid, TrialStatus.errored, TrialStatus.running])
    reward = float(rng.random() < 0.5) if status == TrialStatus.valid else None
    return Trial(
        trial_name=name, task_name=task, path=path, status=status, reward=reward,
        rewards={"reward": reward} if reward is not None else {}, exception_type=exc,
        failure_class="sandbox_failed" if exc == "DaytonaError" else None,
        started_at=T0 + timedelta(seconds=rng.randint(0, 50)), n_input_tokens=rng.randint(0, 9),
        cost_usd=rng.random(), model_name=rng.choice(["m1", "m2"]), source="bench",
        parse_error=None if status != TrialStatus.errored or exc else "unreadable",
    )


def _fresh(trials: list[Trial], policy: Policy) -> tuple:
    copies = [dataclasses.replace(t) for t in trials]
    collapse_copies(copies)
    number_attempts(copies)
    cen = take_census(copies, policy)
    marks = sorted((t.path, t.copy_of, t.attempt) for t in copies)
    return marks, cen


def _state(index: TrialIndex) -> tuple:
    return sorted((t.path, t.copy_of, t.attempt) for t in index.trials), index.census


@pytest.mark.parametrize("seed", range(12))
def test_deltas_match_a_fresh_pass(seed: int) -> None:
    rng = random.Random(seed)
    policy = Policy()
    by_path: dict[str, Trial] = {}
    for i in range(60):
        t = _trial(rng, i)
        by_path[t.path] = t
    index = TrialIndex(policy)
    index.rebuild(by_path.values())
    for step in range(40):
        removed, added = [], []
        touched: set[str] = set()  # a scan sees each path once: gone, changed or new
        for _ in range(rng.randint(0, 4)):
            candidates = sorted(set(by_path) - touched)
            if candidates and rng.random() < 0.5:
                path = rng.choice(candidates)
                touched.add(path)
                removed.append(by_path.pop(path))
            else:
                t = _trial(rng, 1000 + step)
                if t.path in touched:
                    continue
                touched.add(t.path)
                if t.path in by_path:  # a changed trial: its old object goes, the new one comes
                    removed.append(by_path[t.path])
                by_path[t.path] = t
                added.append(t)
        index.apply(removed, added)
        marks, cen = _fresh(list(by_path.values()), policy)
        got_marks, got = _state(index)
        assert got_marks == marks, f"seed {seed} step {step}"
        assert got.counts == cen.counts
        assert (got.per_task, got.invalid_kinds, got.infra, got.models, got.sources) == (
            cen.per_task, cen.invalid_kinds, cen.infra, cen.models, cen.sources)
        assert (got.no_verifier, got.timeout_scored, got.n_input_tokens) == (
            cen.no_verifier, cen.timeout_scored, cen.n_input_tokens)
        assert got.reward_sum == pytest.approx(cen.reward_sum)
        assert got.cost_usd == pytest.approx(cen.cost_usd)


@pytest.mark.parametrize("seed", range(6))
def test_a_fresh_census_is_the_add_loop_to_the_last_bit(seed: int) -> None:
    """take_census counts in bulk; Census.add is what deltas use: the same figures, float sums
    bit for bit, counter keys in the same order (most_common breaks ties by it)."""
    from services.core.census import Census

    rng = random.Random(seed)
    trials = [_trial(rng, i) for i in range(300)]
    for t in trials[::7]:
        object.__setattr__(t, "failure_class", rng.choice(["verifier_failed", "model_provider_failed", None]))
    collapse_copies(trials)
    policy = Policy()
    looped = Census(benign=frozenset(policy.benign_exceptions))
    for t in trials:
        looped.add(t)
    bulk = take_census(trials, policy)
    assert bulk == looped
    for name in ("per_task", "invalid_kinds", "infra", "models", "sources"):
        assert list(getattr(bulk, name).items()) == list(getattr(looped, name).items()), name
    assert (bulk.reward_sum, bulk.cost_usd) == (looped.reward_sum, looped.cost_usd)
    assert bulk.copies and bulk.infra and bulk.no_verifier and bulk.invalid_kinds


def test_an_incremental_rescan_equals_a_fresh_scan(tmp_path_factory: pytest.TempPathFactory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json
    import os
    import shutil

    from services.harbor.source import HarborSource
    from tests.support.ui_demo import DEV_SET, copy_job

    jobs = copy_job(tmp_path_factory, tmp_path)
    job = jobs / DEV_SET
    live = HarborSource(jobs, verify_window_s=0)  # every finished trial checked on every scan
    live.scan_sync()
    dirs = sorted(p for p in job.iterdir() if p.is_dir() and (p / "result.json").exists())
    shutil.rmtree(dirs[0])  # a trial dir goes
    shutil.copytree(dirs[1], job / "restored" / dirs[1].name)  # a staged copy appears
    result = dirs[2] / "result.json"  # a result is rewritten in place
    data = json.loads(result.read_text())
    data["verifier_result"] = None
    data["exception_info"] = {"exception_type": "DaytonaError", "exception_message": "503"}
    result.write_text(json.dumps(data))
    st = os.stat(result)
    os.utime(result, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    (dirs[3] / "result.json").unlink()  # and one looks running again

    def figures(src: HarborSource) -> tuple:
        exp = src.scan_sync().experiments[0]
        return (exp.counts, exp.score, exp._census.counts,
                sorted((t.path, t.status, t.reward, t.attempt, t.copy_of) for t in exp.trials))

    assert figures(live) == figures(HarborSource(jobs))
