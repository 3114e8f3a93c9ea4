"""Leaderboard remediations end to end on the demo jobs, against a real leaderboard (PostgreSQL
behind scripts/leaderboard_dev.py) and the Hub test server: previewed, applied through the
write path, journaled, undone — and no row of another user ever changes (read from
PostgreSQL directly)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.journal import Journal
from services.core.models import Check, Experiment
from services.harbor.source import HarborSource
from services.leaderboard.view import audit_context, load_view
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.errors import StepFailed, WriteRefused
from services.remediations.records import Plan, Record
from services.remediations.steps import ExternalStep, Step, StepContext
from tests.support.hub_server import HubServer
from tests.support.leaderboard import ME, OTHER, SECRET_KEY, SECRET_TOKEN, Leaderboard, config_for
from tests.support.leaderboard_fixtures import Jobs

HEALTHY = "terminal_bench_2_laion-OpenThinker-Agent-8B_2026-11-19__12-00-00"
SHORT = "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00"
GATE = "terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00"
NUMERIC = "terminal_bench_2_1774950145766573_2026-11-19__11-20-00"
RUNNING = "swebench-verified-random-100_claude-sonnet-4-5_2026-11-20__16-00-00"

pytestmark = pytest.mark.usefixtures("secrets")


class World:
    def __init__(self, lb: Leaderboard, hub: HubServer, demo: Jobs, tmp: Path) -> None:
        self.lb = lb
        self.hub = hub
        self.demo = demo
        self.config: Config = config_for(lb, hub.url, tmp)
        self.source = HarborSource(demo.root, self.config.policy, label="demo")
        self.write_path = WritePath(Journal(self.config.journal_path))
        self.others_before = lb.others_rows()

    async def exp(self, job: str) -> Experiment:
        self.demo.need(job)
        snap = await self.source.scan()
        return next(e for e in snap.experiments if e.id == job)

    async def audit(self, job: str) -> dict[str, Check]:
        """The run's checks with the leaderboard read now, as `--batch fix` sees them."""
        exp = await self.exp(job)
        view = await load_view(self.config, [exp])
        report = audit_experiment(exp, self.config.policy, datetime.now(UTC), audit_context(view, self.config))
        return {c.id: c for c in report.checks}

    async def plan(self, action: str, job: str) -> Plan:
        return await registry.plan(action, await self.exp(job), self.source, self.config)

    async def apply(self, action: str, job: str) -> tuple[Plan, Record]:
        plan = await self.plan(action, job)
        assert plan.steps and not plan.blocked, plan.preview
        return plan, await registry.apply(action, plan, job, self.source, self.config, self.write_path)

    async def undo(self, record: Record) -> Record:
        loaded = await self.write_path.load(record.id, StepContext())
        return await self.write_path.undo(loaded, registry.context(record.action, self.source, self.config))

    def assert_others_untouched(self) -> None:
        assert self.lb.others_rows() == self.others_before


@pytest.fixture
def world(lb: Leaderboard, hub: HubServer, demo: Jobs, tmp_path: Path) -> Iterator[World]:
    w = World(lb, hub, demo, tmp_path)
    yield w
    w.assert_others_untouched()


def add_row(lb: Leaderboard, user: str, model_id: str, bench_id: str, created: datetime | None, *,
            job: str | None = None, status: str = "Finished", score: float | None = 0.45) -> str:
    rid = str(uuid.uuid4())
    lb.execute("INSERT INTO sandbox_jobs (id, username, model_id, benchmark_id, status, score, job_name, created_at, "
               "updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
               (rid, user, model_id, bench_id, status, score, job, created, created))
    return rid


def args(step: Step) -> dict[str, Any]:
    assert isinstance(step, ExternalStep)
    return step.args


def utc(dt: datetime | None) -> datetime:
    assert dt is not None
    return dt.astimezone(UTC)


def jobs_table(lb: Leaderboard) -> list[dict[str, Any]]:
    return lb.sql("SELECT * FROM sandbox_jobs ORDER BY id")


def secrets_absent(*texts: str) -> None:
    for t in texts:
        assert SECRET_KEY not in t and SECRET_TOKEN not in t


async def test_register_beside_another_users_row_then_nothing_to_do(world: World) -> None:
    lb = world.lb
    plan = await world.plan("register", HEALTHY)
    preview = "\n".join(plan.preview)
    assert "1 row(s) of other users for this pair stay as they are" in preview
    assert "not yours" in preview and "colleague" in preview  # all rows of the pair are shown
    _, record = await world.apply("register", HEALTHY)
    rows = lb.sql("SELECT j.*, m.name AS model FROM sandbox_jobs j JOIN models m ON m.id = j.model_id "
                  "WHERE job_name = %s", (HEALTHY,))
    assert len(rows) == 1 and rows[0]["username"] == ME and rows[0]["status"] == "Finished"
    assert rows[0]["model"] == "laion/OpenThinker-Agent-8B" and rows[0]["score"] == pytest.approx(0.4205, abs=1e-3)
    again = await world.plan("register", HEALTHY)
    assert again.nothing_to_do and "registered already" in again.preview[0]
    # the journal holds the inserted row; undo removes it again
    entry = json.loads(Path(world.config.journal_path or "").read_text().splitlines()[-1])
    assert entry["action"] == "register:apply" and entry["after"]["0"]["after"][0]["id"] == str(rows[0]["id"])
    await world.undo(record)
    assert lb.sql("SELECT id FROM sandbox_jobs WHERE job_name = %s", (HEALTHY,)) == []


async def test_register_refuses_a_partial(world: World) -> None:
    world.lb.execute("DELETE FROM sandbox_jobs WHERE job_name = %s", (SHORT,))
    plan = await world.plan("register", SHORT)
    assert plan.blocked and "never register a partial" in plan.blocked
    with pytest.raises(WriteRefused, match="partial"):
        await registry.apply("register", plan, SHORT, world.source, world.config, world.write_path)


async def test_deregister_with_usage_children_and_undo(world: World) -> None:
    lb = world.lb
    before = lb.job("job_partial")
    usage_before = lb.sql("SELECT * FROM sandbox_trial_model_usage WHERE job_id = %s", (lb.ids["job_partial"],))
    assert before and len(usage_before) == 1
    plan, record = await world.apply("deregister", SHORT)
    assert [args(s)["table"] for s in plan.steps] == ["usage", "jobs"]  # children first
    assert lb.job("job_partial") is None
    assert lb.sql("SELECT * FROM sandbox_trial_model_usage WHERE job_id = %s", (lb.ids["job_partial"],)) == []
    assert (await world.plan("deregister", SHORT)).nothing_to_do  # a second run changes nothing
    undone = await world.undo(record)
    assert undone.status == "undone"
    assert lb.job("job_partial") == before
    assert lb.sql("SELECT * FROM sandbox_trial_model_usage WHERE job_id = %s", (lb.ids["job_partial"],)) == usage_before


async def test_a_row_that_is_not_ours_is_refused_with_the_rows(world: World) -> None:
    """harvest-bot's row carries the run's job name: it is shown, never chosen, never planned."""
    plan = await world.plan("deregister", GATE)
    assert plan.blocked and "belongs to harvest-bot" in plan.blocked
    assert plan.steps == []
    assert any("not yours" in line and "harvest-bot" in line for line in plan.preview)
    assert f"Cannot apply: {plan.blocked}" in plan.preview
    with pytest.raises(WriteRefused):
        await registry.apply("deregister", plan, GATE, world.source, world.config, world.write_path)
    assert world.lb.job("job_gate_other") is not None


async def test_guard_refuses_even_a_plan_that_turned_out_to_be_someone_elses(world: World) -> None:
    """Ownership is re-read at write time: a row handed to another user after the preview is
    not touched, and the plan stops before its first write."""
    plan = await world.plan("deregister", SHORT)
    world.lb.execute("UPDATE sandbox_jobs SET username = %s WHERE id = %s", ("bob", world.lb.ids["job_partial"]))
    world.others_before = world.lb.others_rows()
    with pytest.raises(WriteRefused):
        await registry.apply("deregister", plan, SHORT, world.source, world.config, world.write_path)
    assert world.lb.job("job_partial")["username"] == "bob"  # type: ignore[index]
    assert len(world.lb.sql("SELECT * FROM sandbox_trial_model_usage WHERE job_id = %s",
                            (world.lb.ids["job_partial"],))) == 1


async def test_repoint_model_deletes_the_bogus_model_only_when_unreferenced(world: World) -> None:
    lb = world.lb
    plan, record = await world.apply("repoint_model", NUMERIC)
    preview = "\n".join(plan.preview)
    assert "delete model '1774950145766573'" in preview
    row = lb.sql("SELECT m.name FROM sandbox_jobs j JOIN models m ON m.id = j.model_id WHERE j.id = %s",
                 (lb.ids["job_numeric"],))
    assert row == [{"name": "laion/OpenThinker-Agent-32B"}]
    assert lb.sql("SELECT * FROM models WHERE name = '1774950145766573'") == []
    usage = lb.sql("SELECT model_id FROM sandbox_trial_model_usage WHERE job_id = %s", (lb.ids["job_numeric"],))
    assert usage == [{"model_id": lb.sql("SELECT id FROM models WHERE name = 'laion/OpenThinker-Agent-32B'")[0]["id"]}]
    assert (await world.plan("repoint_model", NUMERIC)).nothing_to_do
    await world.undo(record)
    back = lb.sql("SELECT m.name FROM sandbox_jobs j JOIN models m ON m.id = j.model_id WHERE j.id = %s",
                  (lb.ids["job_numeric"],))
    assert back == [{"name": "1774950145766573"}]


async def test_repoint_model_keeps_a_model_another_user_references(world: World) -> None:
    lb = world.lb
    lb.execute("UPDATE sandbox_jobs SET model_id = %s WHERE id = %s",
               (lb.ids["model_numeric"], lb.ids["job_other_hash"]))
    world.others_before = lb.others_rows()
    plan, _ = await world.apply("repoint_model", NUMERIC)
    assert "keep model '1774950145766573': still referenced by 1 job row(s) (colleague)" in "\n".join(plan.preview)
    assert lb.sql("SELECT id FROM models WHERE name = '1774950145766573'") != []


async def test_a_foreign_key_of_another_user_blocks_the_hash_benchmark_delete(world: World) -> None:
    lb = world.lb
    plan, _ = await world.apply("repoint_benchmark", NUMERIC)
    assert "keep benchmark 34ab93c4e1d2…: still referenced by 1 row(s) of colleague" in "\n".join(plan.preview)
    assert [args(s)["op"] for s in plan.steps] == ["update"]
    assert lb.sql("SELECT count(*) AS n FROM sandbox_benchmark_tasks WHERE benchmark_id = %s",
                  (lb.ids["bench_hash"],))[0]["n"] == 3
    row = lb.sql("SELECT b.name FROM sandbox_jobs j JOIN benchmarks b ON b.id = j.benchmark_id WHERE j.id = %s",
                 (lb.ids["job_numeric"],))
    assert row == [{"name": "terminal_bench_2"}]


async def test_an_unreferenced_hash_benchmark_goes_task_rows_first_and_comes_back_on_undo(world: World) -> None:
    lb = world.lb
    lb.execute("DELETE FROM sandbox_jobs WHERE id = %s", (lb.ids["job_other_hash"],))
    world.others_before = lb.others_rows()
    tasks = lb.sql("SELECT * FROM sandbox_benchmark_tasks ORDER BY task_name")
    plan, record = await world.apply("repoint_benchmark", NUMERIC)
    assert [(args(s)["op"], args(s)["table"]) for s in plan.steps] == [
        ("update", "jobs"), ("delete", "benchmark_tasks"), ("delete", "benchmarks")]
    assert lb.sql("SELECT * FROM benchmarks WHERE id = %s", (lb.ids["bench_hash"],)) == []
    assert lb.sql("SELECT * FROM sandbox_benchmark_tasks") == []
    await world.undo(record)
    assert lb.sql("SELECT * FROM sandbox_benchmark_tasks ORDER BY task_name") == tasks
    assert str(lb.job("job_numeric")["benchmark_id"]) == lb.ids["bench_hash"]  # type: ignore[index]


async def test_delete_stale_own_rows_only_never_a_live_runs_own(world: World) -> None:
    """The running run's own Started row (no job name, untouched for days) is the run's row by
    pair and created_at: the audit names it so, and the stale cleanup leaves it."""
    lb = world.lb
    exp = await world.exp(RUNNING)
    live = add_row(lb, ME, lb.ids["model_claude"], lb.ids["bench_swe"],
                   utc(exp.started_at) + timedelta(minutes=5), status="Started", score=None)
    add_row(lb, "bob", lb.ids["model_claude"], lb.ids["bench_swe"], datetime.now(UTC) - timedelta(days=3),
            status="Started", score=None)
    world.others_before = lb.others_rows()
    before = jobs_table(lb)
    checks = await world.audit(RUNNING)
    assert checks["registered"].status == "pass" and f"row {live[:8]} (yours, Started" in checks["registered"].evidence
    stale = checks["stale_rows"]
    assert stale.status == "fail" and stale.remediation == "delete_stale"
    assert lb.ids["job_stale"][:8] in stale.evidence and f"row {live[:8]} is this live run's own, never stale" in (
        stale.evidence)
    plan, _ = await world.apply("delete_stale", RUNNING)
    assert [args(s)["key"] for s in plan.steps] == [{"id": lb.ids["job_stale"]}]
    assert jobs_table(lb) == [r for r in before if str(r["id"]) != lb.ids["job_stale"]]
    assert (await world.plan("delete_stale", RUNNING)).nothing_to_do


async def test_another_users_row_in_the_window_never_blocks_registering_yours(world: World) -> None:
    lb = world.lb
    exp = await world.exp(HEALTHY)
    theirs = add_row(lb, OTHER, lb.ids["model_8b"], lb.ids["bench_tb2"],
                     utc(exp.started_at) + timedelta(hours=4))
    world.others_before = lb.others_rows()
    before = jobs_table(lb)
    checks = await world.audit(HEALTHY)
    registered = checks["registered"]
    assert registered.status == "fail" and registered.remediation == "register"
    assert f"not yours, never chosen: {theirs[:8]} {OTHER}" in registered.evidence
    assert checks["traces"].status == "skip" and "no leaderboard row of yours" in checks["traces"].evidence
    assert checks["traces"].action is None  # nobody is asked to upload onto another user's row
    await world.apply("register", HEALTHY)
    after = jobs_table(lb)
    new = [r for r in after if r not in before]
    assert len(new) == 1 and (new[0]["username"], new[0]["job_name"]) == (ME, HEALTHY)
    assert str(new[0]["model_id"]) == lb.ids["model_8b"] and str(new[0]["benchmark_id"]) == lb.ids["bench_tb2"]
    assert [r for r in after if r in before] == before
    assert (await world.audit(HEALTHY))["registered"].status == "pass"


async def test_a_later_row_of_yours_is_not_an_earlier_runs(world: World) -> None:
    """A complete row of yours made three days after partial run A finished is a later run's:
    A's de-register does not touch it, and a complete run's traces never link onto such a row."""
    lb = world.lb
    short = await world.exp(SHORT)
    later = utc(short.finished_at) + timedelta(days=3)
    lb.execute("UPDATE sandbox_jobs SET job_name = NULL, score = 0.45, n_trials = 267, n_errors = 3, created_at = %s,"
               " updated_at = %s WHERE id = %s", (later, later, lb.ids["job_partial"]))
    before = jobs_table(lb)
    checks = await world.audit(SHORT)
    assert checks["partial_registered"].status == "pass"
    plan = await world.plan("deregister", SHORT)
    assert plan.nothing_to_do and "no registered row of yours" in plan.preview[0]
    healthy = await world.exp(HEALTHY)
    late = add_row(lb, ME, lb.ids["model_8b"], lb.ids["bench_tb2"],
                   utc(healthy.finished_at) + timedelta(days=3))
    before = jobs_table(lb)
    upload = await world.plan("upload_traces", HEALTHY)
    assert upload.blocked and "no leaderboard row of yours" in upload.blocked
    assert all(getattr(s, "args", {}).get("key") != {"id": late} for s in upload.steps)
    assert (await world.audit(HEALTHY))["traces"].status == "skip"
    assert jobs_table(lb) == before


async def test_register_files_a_hosted_vllm_run_under_the_harvests_model(world: World) -> None:
    """`hosted_vllm/qwen3-coder-30b` registers under the existing `qwen3-coder-30b` (the harvest's
    name, used by another user's row): no sibling model is minted."""
    lb = world.lb
    cfg = world.demo.need(HEALTHY) / HEALTHY / "config.json"
    data = json.loads(cfg.read_text())
    data["agents"][0]["model_name"] = "hosted_vllm/qwen3-coder-30b"
    cfg.write_text(json.dumps(data))
    qwen = str(uuid.uuid4())
    lb.execute("INSERT INTO models (id, name) VALUES (%s, 'qwen3-coder-30b')", (qwen,))
    add_row(lb, OTHER, qwen, lb.ids["bench_tb2"], datetime.now(UTC) - timedelta(days=5), job="their_qwen_run")
    world.others_before = lb.others_rows()
    models = lb.sql("SELECT * FROM models ORDER BY id")
    plan, _ = await world.apply("register", HEALTHY)
    assert "add model" not in "\n".join(plan.preview)
    assert lb.sql("SELECT * FROM models ORDER BY id") == models
    assert lb.sql("SELECT j.username, m.name FROM sandbox_jobs j JOIN models m ON m.id = j.model_id "
                  "WHERE j.job_name = %s", (HEALTHY,)) == [{"username": ME, "name": "qwen3-coder-30b"}]


async def test_two_rows_of_yours_for_the_run_stop_and_show_both(world: World) -> None:
    lb = world.lb
    short = await world.exp(SHORT)
    dup = add_row(lb, ME, lb.ids["model_qwen"], lb.ids["bench_tb2"],
                  utc(short.finished_at) + timedelta(hours=1), job=SHORT, score=0.31)
    before = jobs_table(lb)
    checks = await world.audit(SHORT)
    for cid in ("registered", "partial_registered"):
        c = checks[cid]
        assert c.status == "fail" and c.remediation is None, c
        assert "unclear which row is this run's: 2 rows of yours carry this run's job name" in c.evidence
        for rid in (lb.ids["job_partial"], dup):
            assert f"{rid[:8]} {ME} Finished" in c.evidence
        assert f"job {SHORT}" in c.evidence and "created " in c.evidence
        assert "ask" not in (c.action or "")
    for action in ("deregister", "register"):
        plan = await world.plan(action, SHORT)
        assert plan.steps == [] and plan.blocked and dup[:8] in plan.blocked, action
        assert f"Cannot apply: {plan.blocked}" in plan.preview
        assert sum("candidate" in line for line in plan.preview) == 2
    assert jobs_table(lb) == before


async def test_upload_traces_streams_last_episodes_then_links_the_row(world: World) -> None:
    lb = world.lb
    demo = world.demo.need(HEALTHY)
    # give one trial terminus-style episodes: only the last one is uploaded
    trial = next(p for p in sorted((demo / HEALTHY).iterdir()) if (p / "result.json").exists())
    for n, text in ((1, "first"), (2, "middle"), (10, "LAST-EPISODE")):
        ep = trial / "agent" / f"episode-{n}"
        ep.mkdir(parents=True)
        (ep / "response.txt").write_text(text)
    await world.apply("register", HEALTHY)
    score_before = lb.sql("SELECT score FROM sandbox_jobs WHERE job_name = %s", (HEALTHY,))
    plan, record = await world.apply("upload_traces", HEALTHY)
    assert [s.kind for s in plan.steps] == ["external", "external"]
    repo = f"evals/{HEALTHY}-traces"
    data = world.hub.repos[repo].files["data/traces.jsonl"].decode().splitlines()
    assert len(data) == 267
    mine = next(json.loads(line) for line in data if json.loads(line)["trial_name"] == trial.name)
    assert mine["episode"] == "episode-10" and mine["files"] == {"response.txt": "LAST-EPISODE"}
    rows = lb.sql("SELECT trace_url, score FROM sandbox_jobs WHERE job_name = %s", (HEALTHY,))
    assert len(rows) == 1  # never a second row
    assert rows[0]["trace_url"] == f"{world.hub.url}/datasets/{repo}"
    assert [{"score": rows[0]["score"]}] == score_before  # never the score
    assert (await world.plan("upload_traces", HEALTHY)).nothing_to_do
    assert all(a.startswith("Bearer ") for a in world.hub.auth_seen)
    # the upload cannot be undone, so undo refuses as a whole and says why
    with pytest.raises(WriteRefused, match="cannot be undone"):
        await world.undo(record)


async def test_free_disk_only_after_upload_and_registration(world: World) -> None:
    demo = world.demo.need(HEALTHY)
    plan = await world.plan("free_disk", HEALTHY)
    assert plan.blocked and "register" in plan.blocked
    await world.apply("register", HEALTHY)
    assert "traces" in ((await world.plan("free_disk", HEALTHY)).blocked or "")
    await world.apply("upload_traces", HEALTHY)
    plan, record = await world.apply("free_disk", HEALTHY)
    assert plan.lock_dir == str(demo)
    assert not (demo / HEALTHY).exists()
    moved = Path(plan.meta["moved_to"])
    assert moved.is_dir() and ".evaldesk-quarantine" in str(moved)  # a move, never a delete
    await world.undo(record)
    assert (demo / HEALTHY / "config.json").exists()


async def test_http_500_mid_plan_rolls_back_and_says_so(world: World) -> None:
    lb = world.lb
    lb.fault(method="DELETE", table="sandbox_jobs", status=500, times=1)
    plan = await world.plan("deregister", SHORT)
    with pytest.raises(StepFailed) as failed:
        await registry.apply("deregister", plan, SHORT, world.source, world.config, world.write_path)
    msg = str(failed.value)
    assert "step 2 of 2" in msg and "injected server error" in msg
    assert "put back" in msg
    assert lb.job("job_partial") is not None
    assert len(lb.sql("SELECT * FROM sandbox_trial_model_usage WHERE job_id = %s", (lb.ids["job_partial"],))) == 1
    record = world.write_path.index.get(failed.value.record_id)
    assert record and record["status"] == "rolled_back"
    secrets_absent(msg)


async def test_timeout_mid_plan_reads_the_target_and_rolls_back(world: World) -> None:
    """The delete commits but its answer never comes in time: the step state is read from the
    leaderboard, the delete is seen as done, and it is put back."""
    lb = world.lb
    lb.fault(method="DELETE", table="sandbox_jobs", delay_after_s=5, times=1)
    plan = await world.plan("deregister", SHORT)
    with pytest.raises(StepFailed) as failed:
        await registry.apply("deregister", plan, SHORT, world.source, world.config, world.write_path)
    assert "timed out" in str(failed.value)
    assert lb.job("job_partial") is not None
    assert len(lb.sql("SELECT * FROM sandbox_trial_model_usage WHERE job_id = %s", (lb.ids["job_partial"],))) == 1


async def test_a_rollback_that_cannot_finish_leaves_a_record_to_roll_back_later(world: World) -> None:
    lb = world.lb
    # the delete of the job fails, and so does putting the usage rows back
    lb.fault(method="DELETE", table="sandbox_jobs", status=500, times=1)
    lb.fault(method="POST", table="sandbox_trial_model_usage", status=503, times=1)
    plan = await world.plan("deregister", SHORT)
    with pytest.raises(StepFailed) as failed:
        await registry.apply("deregister", plan, SHORT, world.source, world.config, world.write_path)
    assert f"evaldesk --batch undo {failed.value.record_id}" in str(failed.value)
    assert lb.sql("SELECT * FROM sandbox_trial_model_usage WHERE job_id = %s", (lb.ids["job_partial"],)) == []
    entry = world.write_path.index.get(failed.value.record_id)
    assert entry and entry["status"] == "failed"
    record = await world.write_path.load(failed.value.record_id, StepContext())
    await world.write_path.undo(record, registry.context("deregister", world.source, world.config))
    assert len(lb.sql("SELECT * FROM sandbox_trial_model_usage WHERE job_id = %s", (lb.ids["job_partial"],))) == 1
    assert lb.job("job_partial") is not None


async def test_read_only_refuses_every_leaderboard_write(world: World) -> None:
    read_only = WritePath(Journal(world.config.journal_path), read_only=True)
    plan = await world.plan("deregister", SHORT)
    with pytest.raises(WriteRefused, match="read-only"):
        await registry.apply("deregister", plan, SHORT, world.source, world.config, read_only)
    assert world.lb.job("job_partial") is not None


async def test_secrets_never_reach_records_or_the_journal(world: World) -> None:
    await world.apply("register", HEALTHY)
    await world.apply("upload_traces", HEALTHY)
    _, rec = await world.apply("deregister", SHORT)
    texts = [Path(world.config.journal_path or "").read_text()]
    from services.core.xdg import state_dir

    texts += [p.read_text() for p in (state_dir() / "records").rglob("*") if p.is_file()]
    secrets_absent(*texts)
    assert rec.status == "applied"


