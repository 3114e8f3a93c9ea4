"""The local Harbor source on job dirs shaped exactly like Harbor's: validity, discovery, increments."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, timedelta
from pathlib import Path

import pytest

from services.core.models import State, TrialStatus
from services.core.source import SourceUnavailable
from tests.support.harbor_factory import T0, JobBuilder, bump, healthy_job, scan, scan_one, tasks

# -- what makes a trial valid ---------------------------------------------------------------

_GOOD = {"source": "terminal_bench_2", "verifier_result": {"rewards": {"reward": 1.0}}}
BAD_RESULTS: dict[str, str | bytes] = {
    "no-verifier": json.dumps({**_GOOD, "verifier_result": None}),
    "no-reward-key": json.dumps({**_GOOD, "verifier_result": {"rewards": {}}}),
    "reward-null": json.dumps({**_GOOD, "verifier_result": {"rewards": {"reward": None}}}),
    "reward-nan": '{"verifier_result": {"rewards": {"reward": NaN}}}',
    "reward-inf": '{"verifier_result": {"rewards": {"reward": Infinity}}}',
    "reward-overflow": '{"verifier_result": {"rewards": {"reward": 1e999}}}',
    "reward-string": json.dumps({**_GOOD, "verifier_result": {"rewards": {"reward": "1.0"}}}),
    "reward-string-other-key": json.dumps({"verifier_result": {"rewards": {"reward": "1", "pass": 1}}}),
    "reward-bool": json.dumps({**_GOOD, "verifier_result": {"rewards": {"reward": True}}}),
    "rewards-list": json.dumps({**_GOOD, "verifier_result": {"rewards": [1.0]}}),
    "half-written": json.dumps(_GOOD)[:40],
    "empty": "",
    "whitespace": "  \n",
    "array": "[1, 2, 3]",
    "number": "1.0",
    "string": '"reward"',
    "not-utf8": b"\xff\xfe{\x00",
}


def test_only_a_finite_reward_makes_a_trial_valid(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path)
    job.add("scored-one", 1.0)
    job.add("scored-zero", 0)
    job.add("exception-only", None, "DaytonaError")
    for case, raw in BAD_RESULTS.items():
        job.add(case, raw_result=raw, name=f"{case}__XXXXXXX")
    exp = scan_one(job.write())
    by_task = {t.path.split("__")[0]: t for t in exp.trials}
    assert by_task["scored-one"].status == TrialStatus.valid and by_task["scored-one"].reward == 1.0
    assert by_task["scored-zero"].status == TrialStatus.valid and by_task["scored-zero"].reward == 0.0
    exc_only = by_task["exception-only"]
    assert exc_only.status == TrialStatus.errored and exc_only.exception_type == "DaytonaError"
    for case in BAD_RESULTS:
        t = by_task[case]
        assert t.status == TrialStatus.errored, case
        assert t.reward is None, case
        assert t.parse_error, f"{case}: an errored trial must say why"
    assert exp.counts.valid == 2
    assert exp.counts.errored == 1 + len(BAD_RESULTS)


def test_half_written_and_empty_reasons_say_what_happened(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path)
    job.add("half", raw_result=json.dumps(_GOOD)[:30], name="half__AAAAAAA")
    job.add("empty", raw_result="", name="empty__AAAAAAA")
    job.add("list", raw_result="[]", name="list__AAAAAAA")
    exp = scan_one(job.write())
    reasons = {t.task_name: t.parse_error or "" for t in exp.trials}
    assert "half-written" in reasons["half"]
    assert "empty" in reasons["empty"]
    assert "not an object" in reasons["list"]


def test_files_are_never_counted(tmp_path: Path) -> None:
    """Every trial dir has a result.json; only the ones with a reward are valid."""
    job = JobBuilder(tmp_path, n_total_trials=6)
    for i in range(3):
        job.add(f"ok-{i}", 1.0)
    for i in range(3):
        job.add(f"err-{i}", None, "VerificationNotCompletedError")
    d = job.write()
    assert len(list(d.glob("*/result.json"))) == 6
    exp = scan_one(d)
    assert (exp.counts.total, exp.counts.valid, exp.counts.errored) == (6, 3, 3)


def test_a_malformed_side_field_does_not_hide_a_finite_reward(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path)
    bad_time = {**_GOOD, "started_at": "yesterday",
                "agent_result": {"n_input_tokens": "lots"}}
    job.add("a", raw_result=json.dumps(bad_time), name="a__AAAAAAA")
    exp = scan_one(job.write())
    t = exp.trials[0]
    assert t.status == TrialStatus.valid and t.reward == 1.0
    assert t.started_at is None


# -- Harbor 0.26 and 0.1.x shapes -----------------------------------------------------------

def test_harbor_026_trial_and_job_files(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=1)
    job.add("timeout-scored", 0.0, "AgentTimeoutError", schema="0.26")
    job.add("infra", None, "EnvironmentStartTimeoutError", schema="0.26")
    job.add("plain", 1.0, schema="0.26")
    d = job.write()
    raw = json.loads((d / job.trials[0].name / "result.json").read_text())
    assert raw["schema_version"] == 1 and raw["reward_valid"] is True
    assert raw["exception_info"]["policy"]["has_valid_reward"] is True
    assert raw["started_at"].endswith("Z")
    job_raw = json.loads((d / "result.json").read_text())
    assert "+" not in job_raw["started_at"] and not job_raw["started_at"].endswith("Z")

    exp = scan_one(d)
    t = {x.task_name: x for x in exp.trials}
    assert t["timeout-scored"].status == TrialStatus.valid
    assert t["timeout-scored"].failure_class == "agent_exhausted_budget"
    assert t["infra"].status == TrialStatus.errored and t["infra"].failure_class == "sandbox_failed"
    assert t["plain"].started_at is not None and t["plain"].started_at.tzinfo is not None
    # job times stay naive; comparisons go through as_utc
    assert exp.started_at is not None and exp.started_at.tzinfo is None
    assert exp.finished_at is not None
    assert exp.state == State.finished
    assert exp.score == pytest.approx(0.5)
    assert exp.eval_key == "terminus-2__org/Model-8B__terminal_bench_2"
    assert t["plain"].n_input_tokens == 120_000


def test_legacy_01x_job_result(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, n_tasks=4, n_rep=2, legacy_stats=True)
    d = job.write()
    stats = json.loads((d / "result.json").read_text())["stats"]
    assert "n_trials" in stats and "n_completed_trials" not in stats
    exp = scan_one(d)
    assert exp.score == pytest.approx(0.5)
    assert exp.counts.expected == 8 and exp.n_rep == 2 and exp.n_rep_source == "config"
    assert exp.state == State.finished


# -- discovery ------------------------------------------------------------------------------

def test_staged_copies_collapse_with_their_original(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, n_tasks=5, n_rep=1)
    originals = list(job.trials)
    for t in originals[:2]:
        job.add(t.task, t.reward, started=t.started, name=t.name, subdir="restored")
    d = job.write()
    exp = scan_one(d)
    copies = [t for t in exp.trials if t.copy_of]
    assert sorted(c.path for c in copies) == sorted(f"restored/{t.name}" for t in originals[:2])
    assert all(c.copy_of == c.trial_name for c in copies)  # the shallower path is the original
    assert exp.counts.copies == 2
    assert exp.counts.total == 5 and exp.counts.max_attempts_per_task == 1


def test_trials_deeper_than_one_staging_level_are_not_found(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, n_tasks=2, n_rep=1)
    job.add("deep", 1.0, subdir="a/b")
    exp = scan_one(job.write())
    assert {t.task_name for t in exp.trials} == {"task-000", "task-001"}


def test_symlinks_are_never_followed(tmp_path: Path) -> None:
    outside = JobBuilder(tmp_path / "elsewhere", "other-job")
    outside.add("secret", 1.0)
    outside.write()
    job = healthy_job(tmp_path / "jobs", n_tasks=3, n_rep=1)
    d = job.write()
    os.symlink(tmp_path / "elsewhere" / "other-job" / (outside.trials[0].name or ""), d / "secret__OUTSIDE")
    os.symlink(d / (job.trials[0].name or ""), d / "alias__INSIDE1")
    (d / "staged").mkdir()
    os.symlink(d / (job.trials[1].name or ""), d / "staged" / "alias__INSIDE2")
    exp = scan_one(d)
    assert sorted(t.path for t in exp.trials) == sorted(t.name for t in job.trials)
    assert exp.counts.total == 3 and exp.counts.copies == 0
    assert any("outside the job dir" in p for p in exp.problems)


def test_quarantine_is_ignored(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, n_tasks=3, n_rep=1)
    d = job.write()
    q = d / ".evaldesk-quarantine" / "20260101T000000000000Z" / "trials"
    q.mkdir(parents=True)
    shutil.copytree(d / (job.trials[0].name or ""), q / "moved__QQQQQQQ")
    exp = scan_one(d)
    assert exp.counts.total == 3 and not any(".evaldesk" in t.path for t in exp.trials)


def test_config_without_result_is_running(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, finished=False, n_total_trials=4)
    job.add("done", 1.0)
    job.add("live", running=True)
    exp = scan_one(job.write())
    live = next(t for t in exp.trials if t.task_name == "live")
    assert live.status == TrialStatus.running
    assert exp.counts.running == 1 and exp.counts.total == 1
    assert exp.state == State.running


def test_folder_of_jobs_and_single_job(tmp_path: Path) -> None:
    names = ["terminal_bench_2_a_2026-01-01__00-00-00", "dev_set_v2_b_2026-01-02__00-00-00"]
    for n in names:
        healthy_job(tmp_path, n, n_tasks=2, n_rep=1).write()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a job")
    snap = scan(tmp_path)
    assert sorted(e.id for e in snap.experiments) == sorted(names)
    single = scan(tmp_path / names[0])
    assert [e.id for e in single.experiments] == [names[0]]


def test_missing_path_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable):
        scan(tmp_path / "nope")


def test_job_without_result_or_config(tmp_path: Path) -> None:
    no_result = healthy_job(tmp_path, "terminal_bench_2_x_2026-01-01__00-00-00", n_tasks=3, n_rep=2,
                            write_result=False).write()
    exp = scan_one(no_result)
    assert exp.score is None and exp.planned_trials is None
    assert exp.counts.expected == 2 * 89  # n_rep × size of terminal_bench_2
    assert any("no job result.json" in p for p in exp.problems)

    no_config = healthy_job(tmp_path, "terminal_bench_2_y_2026-01-01__00-00-00", n_tasks=3, n_rep=2,
                            write_config=False, n_total_trials=None).write()
    exp = scan_one(no_config)
    assert exp.n_rep == 3 and exp.n_rep_source == "default"
    assert exp.counts.expected == 3 * 89

    bare = healthy_job(tmp_path, "terminal_bench_2_z_2026-01-01__00-00-00", n_tasks=2, n_rep=1,
                       write_config=False, write_result=False).write()
    exp = scan_one(bare)
    assert exp.counts.total == 2 and exp.n_rep == 3


def test_unreadable_result_json_is_errored_not_running(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path)
    job.add("fine", 1.0)
    d = job.write()
    as_dir = d / "dirresult__AAAAAAA"
    (as_dir / "result.json").mkdir(parents=True)
    (as_dir / "config.json").write_text("{}")
    dangling = d / "dangling__AAAAAAA"
    dangling.mkdir()
    (dangling / "config.json").write_text("{}")
    os.symlink(tmp_path / "gone.json", dangling / "result.json")
    exp = scan_one(d)
    t = {x.task_name: x for x in exp.trials}
    for name in ("dirresult", "dangling"):
        assert t[name].status == TrialStatus.errored, name
        assert "unreadable" in (t[name].parse_error or ""), t[name].parse_error
    assert exp.counts.running == 0


WEIRD = [
    "fix $(touch pwned) now",
    "run `id` please",
    "quote \"double\" 'single'",
    "with spaces and ; semicolons",
    "..dot-dot-task",
    "задача-юникод-ü-名前",
]


def test_hostile_and_unicode_trial_names_parse(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=1)
    for w in WEIRD:
        job.add(w, 1.0)
    d = job.write()
    exp = scan_one(d)
    assert sorted(t.trial_name for t in exp.trials) == sorted(t.name for t in job.trials)
    assert sorted(t.task_name for t in exp.trials) == sorted(WEIRD)
    assert all(t.status == TrialStatus.valid for t in exp.trials)
    assert not (Path.cwd() / "pwned").exists() and not (d / "pwned").exists()


def test_trial_dir_name_is_harbors(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path)
    t = job.add("a-very-long-task-name-that-is-cut-at-32-chars-exactly", 1.0)
    u = job.add("ends-with-dash-at-the-cut-point--x", 1.0)
    assert t.name is not None and t.name.startswith("a-very-long-task-name-that-is-cu__") and len(t.name) == 32 + 9
    assert u.name is not None and u.name.startswith("ends-with-dash-at-the-cut-point__")
    exp = scan_one(job.write())
    # the task comes from the trial config, not from the truncated dir name
    assert {x.task_name for x in exp.trials} == {t.task, u.task}


# -- incremental scans ----------------------------------------------------------------------

async def test_rescan_reads_only_what_changed(tmp_path: Path) -> None:
    from services.harbor.source import HarborSource

    job = JobBuilder(tmp_path, n_attempts=1, finished=False, n_total_trials=45)
    for i, task in enumerate(tasks(40)):
        job.add(task, 0.0, started=T0 + timedelta(minutes=i))
    d = job.write()
    # every scan checks every finished trial (the rotation is tested in test_reverify.py)
    src = HarborSource(d, verify_window_s=0)
    try:
        first = await src.scan()
        assert first.stats["files_read"] == 40

        again = await src.scan()
        assert again.stats["files_read"] == 0
        assert again.experiments[0].counts.valid == 40

        changed = job.trials[:10]
        for t in changed:
            res = job.trial_result(t)
            res["verifier_result"] = {"rewards": {"reward": 1.0}}
            bump(d / (t.name or "") / "result.json", json.dumps(res, indent=4))
        third = await src.scan()
        assert third.stats["files_read"] == 10
        rewards = {t.trial_name: t.reward for t in third.experiments[0].trials}
        assert sum(1 for r in rewards.values() if r == 1.0) == 10
        assert all(rewards[t.name or ""] == 1.0 for t in changed)

        new = job.add("task-new", 1.0, started=T0 + timedelta(hours=5))
        job.write_trial(new)
        fourth = await src.scan()
        assert fourth.stats["files_read"] == 1
        assert new.name in {t.trial_name for t in fourth.experiments[0].trials}

        gone = job.trials[0]
        shutil.rmtree(d / (gone.name or ""))
        fifth = await src.scan()
        assert fifth.stats["files_read"] == 0
        names = {t.trial_name for t in fifth.experiments[0].trials}
        assert gone.name not in names and len(names) == 40

        live = job.add("task-live", running=True)
        job.write_trial(live)
        sixth = await src.scan()
        assert next(t for t in sixth.experiments[0].trials if t.task_name == "task-live").status == "running"
        live.running = False
        job.write_trial(live)
        seventh = await src.scan()
        assert seventh.stats["files_read"] == 1
        assert next(t for t in seventh.experiments[0].trials if t.task_name == "task-live").status == "valid"
    finally:
        await src.close()


def test_trial_times_are_utc_aware(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path)
    job.add("a", 1.0, started=T0)
    exp = scan_one(job.write())
    assert exp.trials[0].started_at == T0.astimezone(UTC)
    assert exp.trials[0].duration_s == pytest.approx(300.0)


# -- local sources take turns -------------------------------------------------------------

async def test_local_sources_read_at_once_take_turns(tmp_path: Path) -> None:
    import asyncio
    import itertools
    import threading
    import time

    from services.core.policy import Policy
    from services.harbor.source import HarborSource

    spans: list[tuple[float, float]] = []
    lock = threading.Lock()

    class Timed(HarborSource):
        def scan_sync(self, progress=None):  # type: ignore[no-untyped-def]
            began = time.monotonic()
            try:
                return super().scan_sync()
            finally:
                with lock:
                    spans.append((began, time.monotonic()))

    sources = [Timed(healthy_job(tmp_path / f"src{i}").write(), Policy(), cache=False) for i in range(4)]
    snaps = await asyncio.gather(*(s.scan() for s in sources))
    assert all(s.experiments for s in snaps)
    spans.sort()
    assert all(end <= nxt for (_, end), (nxt, _) in itertools.pairwise(spans)), spans


async def test_a_stuck_local_scan_holds_the_others_back_only_so_long(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import threading

    from services.core.policy import Policy
    from services.harbor import source as harbor_source
    from services.harbor.source import HarborSource

    monkeypatch.setattr(harbor_source, "QUEUE_WAIT_S", 0.3)
    release = threading.Event()

    class Stuck(HarborSource):
        def scan_sync(self, progress=None):  # type: ignore[no-untyped-def]
            release.wait(10)  # as a hung NFS mount would
            return super().scan_sync()

    stuck = Stuck(healthy_job(tmp_path / "nfs").write(), Policy(), cache=False)
    fine = HarborSource(healthy_job(tmp_path / "local").write(), Policy(), cache=False)
    first = asyncio.ensure_future(stuck.scan())
    await asyncio.sleep(0.05)
    try:
        snap = await asyncio.wait_for(fine.scan(), 5)
        assert snap.experiments and not first.done()
    finally:
        release.set()
    assert (await first).experiments
