"""Resume and re-run on real job dirs, with the stand-in `harbor` running as a real process:
which trials are set aside, where they go, the exact command, what Harbor is left to delete,
undo before and after new trials, and every refusal with nothing moved."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.journal import Journal
from services.core.models import Experiment
from services.core.plain import validate
from services.harbor.source import HarborSource
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.errors import WriteRefused
from services.remediations.records import QUARANTINE_DIR, aside_root, job_of_record_dir
from services.remediations.resume import NO_RESULT, UNREADABLE, select_trials
from tests.support.harbor_factory import T0, JobBuilder, tasks, tree
from tests.support.standin_tools import use_standins, without_standins

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
TASKS = tasks(6)


def mixed_job(root: Path, **kw: object) -> JobBuilder:
    """6 tasks × 2 attempts: 5 scored, then one of each way a trial can end without a valid
    reward, and a scored trial that carries an exception (valid, never re-run)."""
    job = JobBuilder(root, n_attempts=2, **kw)  # type: ignore[arg-type]
    for i, task in enumerate(TASKS):
        job.add(task, float(i % 2), started=T0)
    job.add(TASKS[0], None, "DaytonaError", name="t0-daytona__AAAAAAA")
    job.add(TASKS[1], None, "EnvironmentStartTimeoutError", name="t1-envstart__BBBBBBB")
    job.add(TASKS[2], None, "VerifierOutputParseError", name="t2-verifier__CCCCCCC")
    job.add(TASKS[3], None, "AgentTimeoutError", name="t3-timeout__DDDDDDD")
    job.add(TASKS[4], 0.0, "NonZeroAgentExitCodeError", name="t4-nonzero__EEEEEEE")
    job.add(TASKS[5], None, "CancelledError", name="t5-cancel__FFFFFFF")
    return job


def scan_exp(path: Path) -> tuple[HarborSource, Experiment]:
    src = HarborSource(path, Config().policy, label="jobs")
    snap = src.scan_sync()
    assert len(snap.experiments) == 1, snap.errors
    return src, snap.experiments[0]


@pytest.fixture
def job(tmp_path: Path) -> Path:
    return mixed_job(tmp_path / "jobs").write()


def wp(tmp_path: Path) -> WritePath:
    return WritePath(Journal(str(tmp_path / "journal.jsonl")))


# ---- which trials ---------------------------------------------------------------------------

def test_default_selection_is_what_harbor_retries_plus_what_it_deletes_never_a_scored_trial(job: Path) -> None:
    orphan = job / "t0-orphan__GGGGGGG"
    orphan.mkdir()
    (orphan / "config.json").write_text("{}")
    (job / "t1-broken__HHHHHHH").mkdir()
    (job / "t1-broken__HHHHHHH" / "result.json").write_text('{"task_name": "task-0')
    _, exp = scan_exp(job)
    sel = select_trials(exp)
    picked = {p.trial.path: p.label for p in sel.picks}
    assert picked == {"t0-daytona__AAAAAAA": "DaytonaError", "t1-envstart__BBBBBBB": "EnvironmentStartTimeoutError",
                      "t5-cancel__FFFFFFF": "CancelledError", "t0-orphan__GGGGGGG": NO_RESULT,
                      "t1-broken__HHHHHHH": UNREADABLE}
    assert dict(sel.left) == {"VerifierOutputParseError": 1, "AgentTimeoutError": 1}
    assert "should_retry = false" in sel.why["VerifierOutputParseError"]
    assert sel.types == ["CancelledError", "DaytonaError", "EnvironmentStartTimeoutError"]


def test_narrowing_by_type_is_case_insensitive_and_names_what_matched_nothing(job: Path) -> None:
    _, exp = scan_exp(job)
    sel = select_trials(exp, types=["verifieroutputparseerror", "NoSuchError"])
    assert [p.trial.path for p in sel.picks] == ["t2-verifier__CCCCCCC"]
    assert sel.unmatched == ["NoSuchError"]
    assert sel.types == ["VerifierOutputParseError"]


def test_named_trials_never_include_a_scored_one_and_cancelled_goes_when_no_type_is_left(job: Path) -> None:
    (job / "t1-broken__HHHHHHH").mkdir()
    (job / "t1-broken__HHHHHHH" / "result.json").write_text("{")
    _, exp = scan_exp(job)
    scored = next(t.path for t in exp.trials if t.reward is not None and not t.exception_type)
    sel = select_trials(exp, paths=[scored, "t4-nonzero__EEEEEEE", "t1-broken__HHHHHHH"])
    assert sel.scored_named == 2  # the plain scored one and the scored NonZeroAgentExitCodeError
    # only an unreadable result is set aside: with no -f at all Harbor would delete CancelledError
    assert sorted(p.trial.path for p in sel.picks) == ["t1-broken__HHHHHHH", "t5-cancel__FFFFFFF"]


# ---- the plan ---------------------------------------------------------------------------------

async def test_plan_previews_trials_per_type_where_they_go_and_the_exact_command(
        job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_standins(monkeypatch, tmp_path)
    (job / QUARANTINE_DIR / "20260101T000000000000Z-dedupe-abcdef").mkdir(parents=True)
    src, exp = scan_exp(job)
    plan = await registry.plan("resume", exp, src, Config(), NOW)
    text = plan.preview_text()
    assert plan.blocked is None
    assert "Set aside 3 trial(s), then run the command below on this machine:" in text
    assert "  DaytonaError ×1" in text and "  CancelledError ×1" in text
    aside = f"{aside_root(str(job))}/{plan.id}"
    assert aside.startswith(str(job.parent / QUARANTINE_DIR / job.name))
    assert f"They move to {aside}/trials/" in text
    assert plan.meta["argv"] == ["harbor", "jobs", "resume", "-p", str(job), "-f", "CancelledError",
                                 "-f", "DaytonaError", "-f", "EnvironmentStartTimeoutError"]
    assert f"  harbor jobs resume -p {job} -f CancelledError -f DaytonaError -f EnvironmentStartTimeoutError" in text
    # Harbor's resume deletes every top-level folder without a result.json: the quarantine goes too
    assert f"  {QUARANTINE_DIR}  (evaldesk's records of earlier writes" in text
    assert "Left in place: VerifierOutputParseError ×1" in text
    moves = [s for s in plan.steps if s.kind == "move"]
    assert [m.label for m in moves] == ["t0-daytona__AAAAAAA", "t1-envstart__BBBBBBB", "t5-cancel__FFFFFFF",
                                        QUARANTINE_DIR]
    assert plan.steps[-1].kind == "external"
    assert plan.lock_dir == aside_root(str(job)) and plan.record_dir == aside
    assert job_of_record_dir(aside) == str(job)
    # planning reads only
    assert not (job.parent / QUARANTINE_DIR).exists()


async def test_a_site_command_from_the_config_fills_placeholders_per_argument(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_standins(monkeypatch, tmp_path)
    job = mixed_job(tmp_path / "my jobs", name="run; rm -rf ~").write()
    src, exp = scan_exp(job)
    cfg = validate(Config, {"commands": {
        "resume": "sbatch --export=ALL,JOB_DIR={job_dir},TYPES={types} eval_harbor.sbatch --resume"}})
    plan = await registry.plan("resume", exp, src, cfg, NOW)
    assert plan.meta["argv"] == [
        "sbatch", f"--export=ALL,JOB_DIR={job},TYPES=CancelledError,DaytonaError,EnvironmentStartTimeoutError",
        "eval_harbor.sbatch", "--resume"]
    assert "'--export=ALL,JOB_DIR=" in plan.preview_text()  # shown quoted, as a shell would need it


@pytest.mark.parametrize("case", ["running", "no_config", "duplicates", "not_found", "lock"])
async def test_refusals_are_previewable_but_move_nothing(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_standins(monkeypatch, tmp_path)
    builder = mixed_job(tmp_path / "jobs", finished=case != "running")
    if case == "duplicates":
        builder.add(TASKS[0], 1.0)
        builder.add(TASKS[0], 1.0)
    job = builder.write()
    if case == "no_config":
        (job / "config.json").unlink()
    if case == "not_found":
        without_standins(monkeypatch)
    if case == "lock":
        (job / ".evaldesk-lock").mkdir()
    before = tree(job.parent)
    src, exp = scan_exp(job)
    plan = await registry.plan("resume", exp, src, Config(), NOW)
    expected = {"running": "still running", "no_config": "has no config.json", "duplicates": "dedupe first",
                "not_found": "harbor: command not found on this machine", "lock": "another evaldesk write"}[case]
    assert plan.blocked and expected in plan.blocked
    assert f"Cannot apply now: {plan.blocked}." in plan.preview_text()
    with pytest.raises(WriteRefused, match=r"(still running|config|dedupe|not found|another)"):
        await registry.apply("resume", plan, exp.id, src, Config(), wp(tmp_path))
    assert tree(job.parent) == before


# ---- apply, undo --------------------------------------------------------------------------------

async def test_apply_sets_aside_runs_harbor_and_the_audit_turns_green(
        job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = use_standins(monkeypatch, tmp_path, tasks={"terminal_bench_2": TASKS})
    (job / QUARANTINE_DIR / "earlier").mkdir(parents=True)
    (job / QUARANTINE_DIR / "earlier" / "record.json").write_text("{}")
    kept_before = {p.name: (p / "result.json").read_bytes() for p in job.iterdir()
                   if (p / "result.json").exists() and "__" in p.name and p.name[:2] not in ("t0", "t1", "t5")}
    src, exp = scan_exp(job)
    assert audit_experiment(exp).verdict == "resume"
    cfg = Config()
    plan = await registry.plan("resume", exp, src, cfg, NOW)
    chunks: list[tuple[str, str]] = []
    record = await registry.apply("resume", plan, exp.id, src, cfg, wp(tmp_path),
                                  resources={"on_output": lambda s, t: chunks.append((s, t))})
    assert record.status == "applied"
    result = record.results[len(plan.steps) - 1]
    assert result["exit_code"] == 0 and "Job finished" in result["stdout_tail"]
    assert any("Trial " in t for s, t in chunks if s == "stdout")  # streamed as it came
    # Harbor got -f for exactly what was set aside, and found none of it left to delete
    assert tools.calls() == [["harbor", *plan.meta["argv"][1:]]]
    assert "Removing trial directory" not in result["stdout_tail"]
    aside = Path(plan.meta["aside"])
    assert sorted(p.name for p in (aside / "trials").iterdir()) == [
        "t0-daytona__AAAAAAA", "t1-envstart__BBBBBBB", "t5-cancel__FFFFFFF"]
    assert (aside / "kept" / QUARANTINE_DIR / "earlier" / "record.json").exists()
    for name, data in kept_before.items():
        assert (job / name / "result.json").read_bytes() == data  # valid trials untouched
    _, after = scan_exp(job)
    # the three re-ran with a reward; the VerifierOutputParseError and the timeout were left
    assert (after.counts.valid, after.counts.total, after.state.value) == (10, 12, "finished")
    assert audit_experiment(after).check("valid_count").evidence.startswith("10 valid of 12")
    journal = [json.loads(x) for x in (tmp_path / "journal.jsonl").read_text().splitlines()]
    assert journal[-1]["action"] == "resume:apply"


async def test_a_failed_command_keeps_the_record_and_undo_puts_everything_back(
        job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_standins(monkeypatch, tmp_path, tasks={"terminal_bench_2": TASKS}, EXIT=3)
    (job / QUARANTINE_DIR / "earlier").mkdir(parents=True)
    before = tree(job)
    before_dirs = sorted(p.name for p in job.iterdir())
    src, exp = scan_exp(job)
    cfg = Config()
    path = wp(tmp_path)
    plan = await registry.plan("resume", exp, src, cfg, NOW)
    record = await registry.apply("resume", plan, exp.id, src, cfg, path)
    result = record.results[len(plan.steps) - 1]
    assert result["exit_code"] == 3 and "preflight failed" in result["stderr_tail"]
    assert "exit code 3" in result["error"]
    [found] = await registry.records_for(src.fs(), str(job))
    assert found.id == record.id and found.status == "applied"
    ctx = registry.context("resume", src, cfg)
    lines, blocked = await path.undo_preview(found, ctx)
    assert blocked == [] and "  restore t0-daytona__AAAAAAA" in lines
    await path.undo(found, ctx)
    assert sorted(p.name for p in job.iterdir()) == before_dirs
    assert tree(job) == before


async def test_undo_refuses_once_harbor_has_re_run_trials(
        job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_standins(monkeypatch, tmp_path, tasks={"terminal_bench_2": TASKS}, EXIT=4, RUN=1)
    src, exp = scan_exp(job)
    cfg = Config()
    path = wp(tmp_path)
    plan = await registry.plan("resume", exp, src, cfg, NOW)
    record = await registry.apply("resume", plan, exp.id, src, cfg, path)
    assert record.results[len(plan.steps) - 1]["exit_code"] == 4
    with pytest.raises(WriteRefused, match=r"1 new trial dir\(s\) appeared .*would duplicate them"):
        await path.undo(record, registry.context("resume", src, cfg))
    assert (Path(plan.meta["aside"]) / "trials" / "t0-daytona__AAAAAAA").exists()


async def test_a_command_that_vanished_before_apply_moves_nothing(
        job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_standins(monkeypatch, tmp_path)
    src, exp = scan_exp(job)
    cfg = Config()
    plan = await registry.plan("resume", exp, src, cfg, NOW)
    before = tree(job)
    without_standins(monkeypatch)
    with pytest.raises(WriteRefused, match=r"harbor: command not found on this machine .*; nothing was changed"):
        await registry.apply("resume", plan, exp.id, src, cfg, wp(tmp_path))
    assert tree(job) == before
    assert not (Path(plan.meta["aside"]) / "trials").exists()


async def test_read_only_refuses_and_creates_nothing(job: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    use_standins(monkeypatch, tmp_path)
    src, exp = scan_exp(job)
    plan = await registry.plan("resume", exp, src, Config(), NOW)
    with pytest.raises(WriteRefused, match="read-only"):
        await registry.apply("resume", plan, exp.id, src, Config(),
                             WritePath(Journal(str(tmp_path / "j.jsonl")), read_only=True))
    assert not (job.parent / QUARANTINE_DIR).exists()


# ---- re-run ------------------------------------------------------------------------------------

async def test_rerun_previews_a_fresh_job_and_starts_it_without_touching_the_old_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = use_standins(monkeypatch, tmp_path, tasks={"terminal_bench_2": TASKS})
    builder = JobBuilder(tmp_path / "jobs", "terminal_bench_2_org-1774950145766573_2026-03-02__09-00-00",
                         n_attempts=1, score=None)
    for task in TASKS:
        builder.add(task, None, "ModelNotFoundError")
    job = builder.write()
    before = tree(job)
    src, exp = scan_exp(job)
    assert audit_experiment(exp).verdict == "rerun"
    cfg = Config()
    plan = await registry.plan("rerun", exp, src, cfg, NOW)
    new = plan.meta["new_job_dir"]
    assert Path(new).name == "terminal_bench_2_org-1774950145766573_" + NOW.astimezone().strftime("%Y-%m-%d__%H-%M-%S")
    assert plan.preview[0].endswith(Path(new).name)
    assert plan.meta["argv"] == ["harbor", "jobs", "start", "-c", f"{job}/config.json", "--job-name",
                                 Path(new).name, "-o", str(job.parent)]
    assert [s.kind for s in plan.steps] == ["external"]
    record = await registry.apply("rerun", plan, exp.id, src, cfg, wp(tmp_path))
    assert record.results[0]["exit_code"] == 0
    assert tools.calls()[0][:3] == ["harbor", "jobs", "start"]
    assert tree(job) == before
    fresh = HarborSource(new, cfg.policy).scan_sync().experiments[0]
    assert fresh.counts.valid == len(TASKS)
    with pytest.raises(WriteRefused, match="started a fresh job"):
        await wp(tmp_path).undo(record, registry.context("rerun", src, cfg))


async def test_rerun_is_refused_without_a_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_standins(monkeypatch, tmp_path)
    builder = JobBuilder(tmp_path / "jobs", n_attempts=1)
    builder.add(TASKS[0], None, "ModelNotFoundError")
    job = builder.write()
    (job / "config.json").unlink()
    src, exp = scan_exp(job)
    plan = await registry.plan("rerun", exp, src, Config(), NOW)
    assert plan.blocked and "no config.json" in plan.blocked
