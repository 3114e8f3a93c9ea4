"""Score-blind dedupe on real job dirs: plan, apply into a quarantine, idempotence, undo."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path

import pytest

from services.core.attempts import select_keep
from services.core.config import Config
from services.core.journal import Journal
from services.core.policy import Policy
from services.harbor.source import HarborSource
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.dedupe import plan_dedupe
from services.remediations.errors import WriteRefused
from services.remediations.records import Plan, Record, records_in
from services.remediations.steps import StepContext
from services.transport.fs import LocalFS
from tests.services.harbor.test_source import WEIRD
from tests.support.harbor_factory import T0, JobBuilder, scan_one, tasks, tree


def duplicated_job(root: Path, *, rewards: dict[str, list[float | None]] | None = None,
                   finished: bool = True, name: str = "dev_set_v2_org-M_2026-03-02__09-00-00") -> JobBuilder:
    """n_rep 2; task-000 and task-001 ran 4 times (a resume re-ran them), plus two staged copies."""
    job = JobBuilder(root, name, dataset="dev_set_v2", n_attempts=2, n_total_trials=8, finished=finished, seed=5)
    rewards = rewards or {
        "task-000": [0.0, None, 1.0, 1.0],
        "task-001": [None, None, 0.0, 1.0],
        "task-002": [1.0, 0.0],
        "task-003": [0.0, 0.0],
    }
    for task, rs in rewards.items():
        for i, r in enumerate(rs):
            job.add(task, r, None if r is not None else "DaytonaError", started=T0 + timedelta(hours=i))
    for t in list(job.trials[-3:-1]):
        job.add(t.task, t.reward, t.exception, name=t.name, started=t.started, subdir="restored")
    return job


def keep_set(job_dir: Path) -> list[str]:
    exp = scan_one(job_dir)
    return plan_dedupe(exp, Policy()).keep


# -- selection ------------------------------------------------------------------------------

def test_plan_keeps_earliest_scored_then_unscored(tmp_path: Path) -> None:
    job = duplicated_job(tmp_path)
    d = job.write()
    plan = plan_dedupe(scan_one(d))
    by_task: dict[str, list[str]] = {}
    for t in job.trials:
        if t.subdir is None:
            by_task.setdefault(t.task, []).append(t.name or "")
    # task-000: scored at hours 0, 2, 3 → keep the two earliest scored (0 and 2)
    assert {by_task["task-000"][0], by_task["task-000"][2]} <= set(plan.keep)
    assert set(plan.remove) >= {by_task["task-000"][1], by_task["task-000"][3]}
    # task-001: scored only at hours 2, 3 → both kept, the unscored earlier ones go
    assert {by_task["task-001"][2], by_task["task-001"][3]} <= set(plan.keep)
    assert {by_task["task-001"][0], by_task["task-001"][1]} <= set(plan.remove)
    assert plan.before == 12 and plan.after == 8
    assert sorted(plan.copies) == sorted(f"restored/{t.name}" for t in job.trials if t.subdir)
    assert not set(plan.keep) & set(plan.remove)


def test_unscored_attempts_fill_up_to_n_rep(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=3, n_total_trials=3)
    job.add("t", None, "DaytonaError", started=T0)
    job.add("t", None, "DaytonaError", started=T0 + timedelta(hours=1))
    job.add("t", None, "DaytonaError", started=T0 + timedelta(hours=2))
    job.add("t", 1.0, started=T0 + timedelta(hours=3))
    plan = plan_dedupe(scan_one(job.write()))
    names = [t.name for t in job.trials]
    assert sorted(plan.keep) == sorted([names[3], names[0], names[1]])
    assert plan.remove == [names[2]]


def test_selection_is_score_blind(tmp_path: Path) -> None:
    """Swapping rewards between scored attempts never changes which attempts are kept."""
    Rewards = dict[str, list[float | None]]
    a: Rewards = {"task-000": [0.0, 1.0, 0.0, 1.0], "task-001": [1.0, 0.0, 1.0], "task-002": [0.0, 0.0, 1.0]}
    b: Rewards = {"task-000": [1.0, 0.0, 1.0, 0.0], "task-001": [0.0, 1.0, 0.0], "task-002": [1.0, 1.0, 0.0]}
    keep_a = keep_set(duplicated_job(tmp_path / "a", rewards=a).write())
    keep_b = keep_set(duplicated_job(tmp_path / "b", rewards=b).write())
    assert keep_a == keep_b


def test_earliest_is_smallest_started_at_ties_by_trial_name(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=1, n_total_trials=1)
    job.add("t", 1.0, started=T0 + timedelta(minutes=5), name="t__AAAAAAA")
    job.add("t", 0.0, started=T0, name="t__ZZZZZZZ")
    job.add("t", 1.0, started=T0, name="t__MMMMMMM")
    plan = plan_dedupe(scan_one(job.write()))
    assert plan.keep == ["t__MMMMMMM"]
    assert sorted(plan.remove) == ["t__AAAAAAA", "t__ZZZZZZZ"]


def test_select_keep_never_reads_reward_values(tmp_path: Path) -> None:
    exp = scan_one(duplicated_job(tmp_path).write())
    kept, _, _ = select_keep(exp.trials, 2)
    flipped = [dataclasses.replace(t, reward=None if t.reward is None else 1.0 - t.reward) for t in exp.trials]
    kept2, _, _ = select_keep(flipped, 2)
    assert [t.path for t in kept] == [t.path for t in kept2]


# -- apply, idempotence, undo ---------------------------------------------------------------

async def dedupe_plan(d: Path) -> Plan:
    src = HarborSource(d)
    exp = (await src.scan()).experiments[0]
    return await registry.plan("dedupe", exp, src, Config())


async def apply(d: Path, journal: Journal, plan: Plan | None = None) -> tuple[Plan, Record]:
    src = HarborSource(d)
    exp = (await src.scan()).experiments[0]
    plan = plan or await registry.plan("dedupe", exp, src, Config())
    record = await registry.apply("dedupe", plan, exp.id, src, Config(), WritePath(journal))
    return plan, record


async def undo_last(d: Path, journal: Journal) -> Record | None:
    records = [r for r in await records_in(LocalFS(), str(d)) if r.status == "applied"]
    if not records:
        return None
    return await WritePath(journal).undo(records[0], StepContext(LocalFS()))


async def test_dry_run_moves_nothing(tmp_path: Path) -> None:
    d = duplicated_job(tmp_path).write()
    before = tree(d)
    plan = await dedupe_plan(d)
    assert plan.steps and plan.preview[0].startswith("Job ")
    assert tree(d) == before
    assert not (d / ".evaldesk-quarantine").exists()


async def test_apply_then_rerun_then_undo(tmp_path: Path) -> None:
    d = duplicated_job(tmp_path).write()
    original = tree(d)
    agg_before = (d / "result.json").read_bytes()
    journal = Journal(tmp_path / "journal.jsonl")

    plan, record = await apply(d, journal)
    assert record.status == "applied" and all(record.done)
    q = d / ".evaldesk-quarantine" / record.id
    moved = plan.meta["remove"] + plan.meta["copies"]
    for rel in moved:
        assert not (d / rel).exists(), rel
        assert (q / "trials" / rel / "result.json").exists(), rel
    for rel in plan.meta["keep"]:
        assert (d / rel / "result.json").exists()
    on_disk = json.loads((q / "record.json").read_text())
    assert on_disk["plan"]["meta"]["before"] == 12 and on_disk["plan"]["meta"]["after"] == 8
    assert sorted(s["label"] for s in on_disk["plan"]["steps"] if s["kind"] == "move") == sorted(moved)
    assert (q / "files" / "result.json.orig").read_bytes() == agg_before

    # the aggregate now describes the kept trials only
    agg = json.loads((d / "result.json").read_text())
    assert agg["stats"]["n_completed_trials"] == 8
    ev = next(iter(agg["stats"]["evals"].values()))
    assert ev["n_trials"] == 8  # every kept attempt here is scored
    kept_names = {Path(p).name for p in plan.meta["keep"]}
    listed = {n for names in ev["reward_stats"]["reward"].values() for n in names}
    assert listed == kept_names
    assert agg["n_total_trials"] == 8 and agg["id"] == json.loads(agg_before)["id"]

    entries = journal.entries()
    assert [e.action for e in entries] == ["dedupe:begin", "dedupe:apply"]
    assert all(e.detail["record"] == record.id and e.target == str(d) for e in entries)
    # before/after say what changed: attempts and where each moved trial dir went
    begin, done = entries
    assert begin.detail["status"] == "applying" and done.detail["status"] == "applied"
    assert done.before["attempts"] == 12 and done.after["attempts"] == 8
    assert done.before["trial_dirs"] == sorted(moved)
    assert done.after["trial_dirs"] == [f".evaldesk-quarantine/{record.id}/trials/{m}" for m in sorted(moved)]
    assert done.before["aggregates"]["result.json"] != done.after["aggregates"]["result.json"]

    # a second run reports before == after and moves nothing
    after_apply = tree(d)
    plan2 = await dedupe_plan(d)
    assert plan2.meta["before"] == plan2.meta["after"] == 8 and plan2.nothing_to_do
    assert tree(d) == after_apply
    assert len(journal.entries()) == 2

    # undo puts every dir and the aggregate back, byte for byte, and tidies the quarantine away
    undone = await undo_last(d, journal)
    assert undone is not None and undone.status == "undone"
    assert tree(d) == original
    assert (d / "result.json").read_bytes() == agg_before
    assert [e.action for e in journal.entries()] == ["dedupe:begin", "dedupe:apply", "dedupe:undo"]
    undo_entry = journal.entries()[-1]
    assert undo_entry.before["attempts"] == 8 and undo_entry.after["attempts"] == 12

    # a second undo finds nothing
    assert await undo_last(d, journal) is None
    assert tree(d) == original


async def test_apply_refuses_a_running_job(tmp_path: Path) -> None:
    job = duplicated_job(tmp_path, finished=False)
    job.add("task-009", running=True)
    d = job.write()
    before = tree(d)
    plan = await dedupe_plan(d)
    assert plan.blocked and "still running" in plan.preview[-1]
    with pytest.raises(WriteRefused, match="still running"):
        await apply(d, Journal(tmp_path / "j.jsonl"), plan)
    assert tree(d) == before


async def test_read_only_refuses_apply_and_undo(tmp_path: Path) -> None:
    d = duplicated_job(tmp_path).write()
    before = tree(d)
    journal = Journal(tmp_path / "j.jsonl")
    plan = await dedupe_plan(d)
    with pytest.raises(WriteRefused, match="read-only"):
        await WritePath(journal, read_only=True).apply(plan, StepContext(LocalFS()))
    assert tree(d) == before and journal.entries() == []


async def test_hostile_names_survive_moves_and_undo(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path, n_attempts=1, n_total_trials=len(WEIRD))
    for i, w in enumerate(WEIRD):
        job.add(w, 1.0, started=T0 + timedelta(minutes=i))
        job.add(w, 0.0, started=T0 + timedelta(hours=1, minutes=i))  # a later duplicate
    d = job.write()
    original = tree(d)
    journal = Journal(tmp_path / "j.jsonl")
    plan, record = await apply(d, journal)
    late = sorted(t.name for t in job.trials[1::2])
    assert sorted(plan.meta["remove"]) == late
    q = d / ".evaldesk-quarantine" / record.id
    for name in late:
        assert (q / "trials" / name / "result.json").is_file(), name
        assert not (d / name).exists()
    assert not (tmp_path / "pwned").exists() and not (d / "pwned").exists()
    exp2 = scan_one(d)
    assert sorted(t.task_name for t in exp2.trials) == sorted(WEIRD)
    await undo_last(d, journal)
    assert tree(d) == original


async def test_dedupe_leaves_a_job_the_audit_passes(tmp_path: Path) -> None:
    from services.audit.verdict import audit_experiment

    d = duplicated_job(tmp_path).write()
    assert audit_experiment(scan_one(d)).verdict == "dedupe"
    await apply(d, Journal(tmp_path / "j.jsonl"))
    r = audit_experiment(scan_one(d))
    assert r.check("duplicates").status == "pass"
    assert r.trials["total"] == 8 and r.trials["max_attempts_per_task"] == 2


@pytest.mark.parametrize("n_rep", [1, 2, 3])
def test_keep_count_per_task_never_exceeds_n_rep(tmp_path: Path, n_rep: int) -> None:
    job = JobBuilder(tmp_path, n_attempts=n_rep, n_total_trials=4 * n_rep, lean=True)
    for i, task in enumerate(tasks(4)):
        for a in range(i + 2):
            job.add(task, None if a % 3 == 0 else 1.0, None if a % 3 else "DaytonaError",
                    started=T0 + timedelta(minutes=a * 10 + i))
    exp = scan_one(job.write())
    kept, surplus, _ = select_keep(exp.trials, n_rep)
    per_task: dict[str, int] = {}
    for t in kept:
        per_task[t.task_name] = per_task.get(t.task_name, 0) + 1
    assert all(v <= n_rep for v in per_task.values())
    assert len(kept) + len(surplus) == len(exp.trials)


async def test_apply_refuses_a_plan_the_job_no_longer_matches(tmp_path: Path) -> None:
    d = duplicated_job(tmp_path).write()
    plan = await dedupe_plan(d)
    assert plan.steps
    # between the preview and the confirm, another attempt of task-002 lands
    job = JobBuilder(tmp_path, d.name, dataset="dev_set_v2", n_attempts=2, n_total_trials=8, seed=9)
    job.add("task-002", 1.0, started=T0 + timedelta(hours=9))
    job.write()
    before = tree(d)
    with pytest.raises(WriteRefused, match="changed since this dedupe was previewed"):
        await apply(d, Journal(tmp_path / "j.jsonl"), plan)
    assert tree(d) == before
