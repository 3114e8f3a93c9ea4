"""The live monitor's figures and its four fake-execution rules, over played-back Harbor jobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.core.baselines import Baseline, BaselineError, load_baseline, pick_baseline
from services.core.policy import MonitorThresholds, Policy
from services.core.times import fmt_duration
from services.harbor.source import HarborSource
from services.monitor.activity import last_line, probe_snapshot
from services.monitor.figures import Sample, wilson_interval
from services.monitor.rules import MonitorWarning
from services.monitor.state import MonitorState
from tests.support.playback import JobPlayback

TASKS = [f"task-{i:02d}" for i in range(40)]


class Rig:
    """A played-back job, a real HarborSource over it, and a monitor on the playback's clock."""

    def __init__(self, tmp_path: Path, policy: Policy | None = None, baselines: list[Baseline] | None = None,
                 history: int = 720, **job: object) -> None:
        self.pb = JobPlayback(tmp_path / "jobs", **job)  # type: ignore[arg-type]
        self.policy = policy or Policy()
        self.source = HarborSource(tmp_path / "jobs", self.policy)
        self.mon = MonitorState(self.policy, baselines or [], clock=self.pb.clock, history=history)
        self.key = f"{self.source.label}::{self.pb.name}"

    async def poll(self) -> list[MonitorWarning]:
        snap = await self.source.scan()
        activity = await probe_snapshot(snap, self.source.fs())
        return self.mon.feed(snap, activity)

    def rules(self) -> set[str]:
        return {w.rule for w in self.mon.warnings_for(self.key)}


@pytest.fixture
async def rig(tmp_path: Path):  # type: ignore[no-untyped-def]
    r = Rig(tmp_path)
    yield r
    await r.source.close()


# -- figures -------------------------------------------------------------------------------
async def test_counts_by_state_throughput_eta_and_running_table(rig: Rig) -> None:
    pb = rig.pb
    names = pb.start_many(TASKS[:10])
    pb.advance(60)
    for n in names[:4]:
        pb.finish(n, reward=1.0)
    pb.finish(names[4], reward=0.0)
    pb.finish(names[5], exception="DaytonaError")
    pb.advance(30)
    pb.log(names[6], "episode 3: keystrokes='make -j4'")
    pb.advance(330)  # names[7..9] have been silent for 390 s: dispatched; names[6] for 330 s too
    pb.log(names[6], "episode 4: keystrokes='pytest -x'")
    await rig.poll()
    r = rig.mon.reading(rig.key)
    assert r is not None
    assert r.counts == {"pending": 30, "dispatched": 3, "running": 1, "valid": 5, "errored": 1}
    assert r.finished == 6 and r.expected == 40
    assert r.pass_rate == pytest.approx(4 / 6)
    assert r.pass_rate_ci is not None and r.pass_rate_ci[0] < 4 / 6 < r.pass_rate_ci[1]
    # 6 finished within the 7 min the job has run
    assert r.throughput_per_min == pytest.approx(6 / 7)
    assert r.eta_s == pytest.approx(34 / (6 / 7) * 60)
    assert r.tokens == 6 * 10_500 and r.cost_usd == pytest.approx(0.06)
    # sorted by running time, with idle and the log's last line as activity
    assert [t.trial_name for t in r.running][:1] == [names[6]]
    active = r.running[0]
    assert active.idle_s == 0 and not active.dispatched
    assert active.activity == "episode 4: keystrokes='pytest -x'"
    assert all(t.dispatched and t.idle_s == 420 for t in r.running[1:])
    js = r.as_json()
    assert js["type"] == "snapshot" and js["id"] == pb.name and js["at"] == "2026-11-20T16:07:00Z"


def test_wilson_interval_and_durations() -> None:
    lo, hi = wilson_interval(48, 100) or (0, 0)
    assert lo == pytest.approx(0.3846, abs=1e-3) and hi == pytest.approx(0.5768, abs=1e-3)
    assert wilson_interval(0, 0) is None
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-3))
    assert fmt_duration(45) == "45 s" and fmt_duration(38 * 60) == "38 min"
    assert fmt_duration(3 * 3600 + 5 * 60) == "3 h 05 min"
    assert last_line(b"2026-11-20 16:00:00,000 INFO    harbor.trial: hello\n\n") == "hello"


# -- rule a --------------------------------------------------------------------------------
async def test_rule_a_fires_when_dispatched_does_not_drop_and_nothing_finishes(rig: Rig) -> None:
    pb = rig.pb
    pb.start_many(TASKS[:3])
    pb.advance(400)
    assert await rig.poll() == []
    pb.advance(60)
    assert await rig.poll() == []
    pb.start("task-39")  # one more trial that stays silent does not make it better
    pb.advance(60)
    new = await rig.poll()
    assert [w.rule for w in new] == ["a"]
    assert new[0].evidence.startswith("dispatched 3 → 3 → 3 over 3 polls (2 min), no trial finished")
    assert rig.rules() == {"a"}
    # still holding: reported once, kept active
    pb.advance(60)
    assert await rig.poll() == []
    assert rig.rules() == {"a"}
    # a trial finishes: the condition clears, the history keeps the firing
    pb.finish(pb.running()[0], reward=1.0)
    pb.advance(60)
    await rig.poll()
    assert rig.rules() == set()
    series = rig.mon.series(rig.key)
    assert series is not None and [w.rule for w in series.fired] == ["a"]


async def test_rule_a_quiet_while_trials_show_activity_or_finish(rig: Rig) -> None:
    pb = rig.pb
    names = pb.start_many(TASKS[:6])
    for i in range(5):
        pb.advance(120)
        for n in pb.running()[1:]:
            pb.log(n, f"episode {i}")  # all but one trial work; the silent one goes idle
        if i >= 2:
            pb.finish(names[i + 1], reward=1.0)  # and something finishes every poll
        assert await rig.poll() == []
    assert rig.mon.reading(rig.key).counts["dispatched"] == 1  # type: ignore[union-attr]
    assert "a" not in rig.rules()


async def test_rule_a_quiet_when_dispatched_drops(rig: Rig) -> None:
    pb = rig.pb
    names = pb.start_many(TASKS[:4])
    pb.advance(400)
    await rig.poll()
    for n in names[:3]:
        pb.advance(60)
        pb.log(n, "woke up")  # back to work: dispatched 4 → 3 → 2 → 1
        assert await rig.poll() == []


# -- rule b --------------------------------------------------------------------------------
async def test_rule_b_fires_when_errors_pile_up(rig: Rig) -> None:
    pb = rig.pb
    names = pb.start_many(TASKS[:12])
    await rig.poll()
    fired = []
    for i in range(3):
        pb.advance(60)
        for n in names[i * 3 : i * 3 + 2]:
            pb.finish(n, exception="DaytonaError")
        pb.finish(names[i * 3 + 2], reward=1.0)
        fired += await rig.poll()
    assert [w.rule for w in fired] == ["b"]
    assert fired[0].evidence == (
        "invalid errors 0 → 2 → 4 → 6: new errors on 3 consecutive polls, "
        "6 of 9 finished attempts errored (67% > 10%)"
    )


async def test_rule_b_quiet_with_a_gap_or_a_small_share(tmp_path: Path) -> None:
    # errors on polls 1, 2, 4, 5: never three in a row
    rig = Rig(tmp_path / "gap", planned=200)
    names = rig.pb.start_many([f"t{i}" for i in range(20)])
    await rig.poll()
    for i, errs in enumerate([1, 1, 0, 1, 1]):
        rig.pb.advance(60)
        for n in names[i * 2 : i * 2 + errs]:
            rig.pb.finish(n, exception="ApiRateLimitError")
        assert await rig.poll() == []
    await rig.source.close()
    # errors on every poll, but few among many passes (3 of 63 ≤ 10%)
    rig = Rig(tmp_path / "share", planned=200)
    names = rig.pb.start_many([f"t{i}" for i in range(63)])
    await rig.poll()
    for i in range(3):
        rig.pb.advance(60)
        batch = names[i * 21 : (i + 1) * 21]
        rig.pb.finish(batch[0], exception="ApiRateLimitError")
        for n in batch[1:]:
            rig.pb.finish(n, reward=1.0)
        assert await rig.poll() == []
    # benign exceptions (a scored timeout) are not invalid errors at all
    for n in rig.pb.start_many([f"u{i}" for i in range(4)]):
        rig.pb.advance(60)
        rig.pb.finish(n, reward=0.0, exception="AgentTimeoutError")
        assert await rig.poll() == []
    await rig.source.close()


# -- rule c --------------------------------------------------------------------------------
async def test_rule_c_fires_below_half_the_baseline_after_enough_trials(tmp_path: Path) -> None:
    rig = Rig(tmp_path, baselines=[Baseline(name="tb2-ref", pass_rate=0.5)])
    pb = rig.pb
    names = pb.start_many(TASKS[:20])
    for n in names[:19]:
        pb.finish(n, reward=1.0 if n == names[0] else 0.0)
    pb.advance(60)
    assert await rig.poll() == []  # 19 finished: too few to judge
    pb.finish(names[19], reward=0.0)
    pb.advance(60)
    new = await rig.poll()
    assert [w.rule for w in new] == ["c"]
    assert new[0].evidence.startswith("pass rate 5% over 20 finished attempts, 95% CI 1%–24% vs expected 50% "
                                      "(baseline tb2-ref): below 0.5 × expected")
    r = rig.mon.reading(rig.key)
    assert r is not None and r.alignment is not None and r.alignment.expected == 0.5
    assert r.as_json()["expected_pass_rate"] == 0.5
    await rig.source.close()


async def test_rule_c_quiet_near_the_baseline_and_without_one(tmp_path: Path) -> None:
    for baselines in ([Baseline(name="ref", pass_rate=0.5)], []):
        sub = tmp_path / str(len(baselines))
        rig = Rig(sub, baselines=baselines)
        names = rig.pb.start_many(TASKS[:30])
        for i, n in enumerate(names):
            rig.pb.finish(n, reward=1.0 if i % 3 == 0 else 0.0)  # 33%: above 0.5 × 50%
        rig.pb.advance(60)
        assert await rig.poll() == []
        await rig.source.close()


async def test_rule_c_compares_per_task_expectations_on_the_tasks_that_finished(tmp_path: Path) -> None:
    easy = {t: 1.0 for t in TASKS[:20]}
    hard = {t: 0.0 for t in TASKS[20:]}
    base = Baseline(name="per-task", tasks={**easy, **hard})
    # only hard tasks finished, all failing: as expected, no warning although the overall rate is 50%
    rig = Rig(tmp_path / "hard", baselines=[base])
    for n in rig.pb.start_many(TASKS[20:]):
        rig.pb.finish(n, reward=0.0)
    rig.pb.advance(60)
    assert await rig.poll() == []
    r = rig.mon.reading(rig.key)
    assert r is not None and r.alignment is not None
    assert (r.alignment.expected, r.alignment.actual, r.alignment.expected_overall) == (0.0, 0.0, 0.5)
    await rig.source.close()
    # the easy tasks failing is far below expectation, and the gaps name them
    rig = Rig(tmp_path / "easy", baselines=[base])
    for n in rig.pb.start_many(TASKS[:20]):
        rig.pb.finish(n, reward=0.0)
    rig.pb.advance(60)
    assert [w.rule for w in await rig.poll()] == ["c"]
    r = rig.mon.reading(rig.key)
    assert r is not None and r.alignment is not None and r.alignment.gaps[0].task == "task-00"
    await rig.source.close()


# -- rule d --------------------------------------------------------------------------------
async def test_rule_d_fires_past_one_and_a_half_timeouts(rig: Rig) -> None:
    pb = rig.pb  # the job config's agent timeout is 600 s
    name = pb.start("slow-task")
    for _ in range(14):
        pb.advance(60)
        pb.log(name, "still working")
        assert await rig.poll() == []
    pb.advance(59)  # 899 s
    assert await rig.poll() == []
    pb.advance(2)  # 901 s
    new = await rig.poll()
    assert [(w.rule, w.trial) for w in new] == [("d", name)]
    assert new[0].evidence == (
        f"trial {name} running 15 min, 1.5 × the 10 min timeout is 15 min; idle 61 s"
    )
    pb.finish(name, exception="AgentTimeoutError", reward=0.0)
    pb.advance(10)
    await rig.poll()
    assert rig.rules() == set()


async def test_rule_d_quiet_for_orphans_of_a_finished_job_and_uses_thresholds(tmp_path: Path) -> None:
    rig = Rig(tmp_path / "orphan")
    rig.pb.start("orphan")
    rig.pb.advance(3600)
    rig.pb.end_job()
    assert await rig.poll() == []
    await rig.source.close()
    # a stricter factor from the configuration
    policy = Policy(monitor=MonitorThresholds(timeout_factor=1.1))
    rig = Rig(tmp_path / "strict", policy=policy)
    name = rig.pb.start("t")
    rig.pb.advance(661)
    rig.pb.log(name, "x")
    assert [w.rule for w in await rig.poll()] == ["d"]
    await rig.source.close()


# -- history, baselines --------------------------------------------------------------------
async def test_history_is_bounded(tmp_path: Path) -> None:
    rig = Rig(tmp_path, history=5)
    rig.pb.start("t")
    for _ in range(12):
        rig.pb.advance(10)
        await rig.poll()
    series = rig.mon.series(rig.key)
    assert series is not None and len(series.samples) == 5
    assert isinstance(series.samples[0], Sample)
    assert series.samples[0].at == rig.pb.now.timestamp() - 40
    assert rig.mon.series(rig.pb.name) is series  # a bare experiment id finds it too
    await rig.source.close()


def test_baseline_files(tmp_path: Path) -> None:
    agg = tmp_path / "tb2-sonnet.json"
    agg.write_text(json.dumps({"pass_rate": 0.48}))
    b = load_baseline(agg)
    assert (b.name, b.pass_rate, b.aggregate) == ("tb2-sonnet", 0.48, 0.48)
    per = tmp_path / "per.json"
    per.write_text(json.dumps({"benchmark": "terminal_bench_2", "tasks": {"a": 1, "b": 0}}))
    assert load_baseline(per).aggregate == 0.5
    for text, msg in [
        ("{", "not valid JSON"),
        ("[]", "not an object"),
        ("{}", 'needs "pass_rate"'),
        ('{"pass_rate": 48}', "pass_rate"),
        ('{"tasks": {"a": 2}}', "not in [0, 1]"),
    ]:
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(BaselineError, match=msg.replace("[", r"\[").replace("]", r"\]")):
            load_baseline(bad)
    with pytest.raises(BaselineError, match="cannot read"):
        load_baseline(tmp_path / "missing.json")


async def test_pick_baseline_prefers_the_benchmark_scoped_one(rig: Rig) -> None:
    snap = await rig.source.scan()
    exp = snap.experiments[0]
    general = Baseline(name="any", pass_rate=0.3)
    scoped = Baseline(name="tb2", benchmark="terminal_bench_2", pass_rate=0.4)
    other = Baseline(name="swe", benchmark="swebench", pass_rate=0.6)
    assert pick_baseline(exp, [general, other, scoped]) is scoped
    assert pick_baseline(exp, [other, general]) is general
    assert pick_baseline(exp, [other]) is None
