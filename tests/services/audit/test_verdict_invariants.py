"""The verdict of every experiment of the demo (Harbor, Rock, AISBench, csbench) and of job
dirs built here, with and without a baseline, keeps its promises: never finalize while a
check fails; a verdict that names a fix has a fix that plans at least one step by default
(planned here through the registry, as `x` and `--batch fix` plan it); otherwise it asks a
person and says what to decide; a task that needs input asks for it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from services.audit.alignment import baseline_context
from services.audit.verdict import audit_experiment
from services.core.baselines import load_baselines_dir
from services.core.config import Config
from services.core.models import AuditReport, CheckStatus, Experiment, State
from services.core.registry import demo_sources, open_sources, write_demo
from services.core.source import Source
from services.core.times import DEMO_NOW
from services.remediations import inputs, registry
from tests.support.harbor_factory import T0, JobBuilder, healthy_job, tasks

NOW = DEMO_NOW + timedelta(minutes=5)


async def _audits(sources: list[Source], config: Config, baselines_dir: Path | None = None
                  ) -> list[tuple[Source, Experiment, AuditReport]]:
    context = baseline_context(load_baselines_dir(baselines_dir)) if baselines_dir else None
    out = []
    for src in sources:
        snap = await src.scan()
        out += [(src, e, audit_experiment(e, config.policy, NOW, context)) for e in snap.experiments]
    return out


async def assert_verdicts_hold(found: list[tuple[Source, Experiment, AuditReport]], config: Config) -> None:
    for src, exp, r in found:
        where = f"{exp.source} {exp.id}: {r.verdict}"
        failing = [c.id for c in r.checks if c.status == CheckStatus.fail]
        assert r.verdict != "finalize" or not failing, f"{where} beside failing {failing}"
        assert r.reason, where
        if exp.state == State.needs_input:
            assert r.verdict == "input", where
        if r.verdict == "investigate":
            assert r.ask and r.fix is None, where
        if r.fix is None:
            continue
        assert r.check(r.decided_by or "").remediation == r.fix, where
        fields = await inputs.needed(r.fix, exp, src, config)
        if fields:
            assert r.verdict == "input", f"{where}: its fix asks for {[f.name for f in fields]}"
            continue
        plan = await registry.plan(r.fix, exp, src, config)
        assert plan.steps, f"{where}: {r.fix} plans nothing: {plan.preview}"


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    write_demo(root, DEMO_NOW)
    return root


@pytest.mark.parametrize("with_baseline", [False, True])
def test_every_demo_experiment(demo_root: Path, tmp_path: Path, with_baseline: bool) -> None:
    config = Config(journal_path=str(tmp_path / "journal.jsonl"))

    async def go() -> dict[str, AuditReport]:
        found = await _audits(demo_sources(config, demo_root), config,
                              demo_root / "baselines" if with_baseline else None)
        await assert_verdicts_hold(found, config)
        return {e.id: r for _, e, r in found}

    reports = asyncio.run(go())
    sera = next(r for k, r in reports.items() if "SERA-14B" in k)
    # its errors are not ones Harbor retries: a person decides, and is given the command
    assert sera.verdict == "investigate" and sera.decided_by == "error_gate"
    assert "--exception VerifierOutputParseError" in (sera.ask or "") and "--batch resume" in (sera.ask or "")
    # its bias note names its own exception types, and no note tells it to resume
    unverified = next(n for n in sera.notes if "verifier never ran" in n)
    assert "VerifierOutputParseError ×12" in unverified and "VerificationNotCompleted" not in unverified
    assert not any(": resume, never register" in n for n in sera.notes)
    assert reports["gsm8k-qwen3-32b"].verdict == "input"
    assert reports["mmlu-qwen3-8b"].verdict == "launch"  # removed: launched again, not "fix the endpoint"
    thinker = next(r for k, r in reports.items() if "OpenThinker" in k)
    if with_baseline:
        assert thinker.check("alignment").status == CheckStatus.fail
        assert thinker.verdict == "investigate" and thinker.decided_by == "alignment"
    else:
        assert thinker.verdict == "finalize"


def _harbor_jobs(root: Path) -> None:
    healthy_job(root, "terminal_bench_2_org-Healthy-8B_2026-03-02__09-00-00").write()
    dup = healthy_job(root, "terminal_bench_2_org-Dup-8B_2026-03-02__09-00-00")
    dup.add("task-000", 1.0, started=T0 + timedelta(hours=9))
    dup.write()
    retry = JobBuilder(root, "terminal_bench_2_org-Retry-8B_2026-03-02__09-00-00", n_attempts=1)
    for i, t in enumerate(tasks(20)):
        if i < 5:
            retry.add(t, None, exception="DaytonaError", started=T0 + timedelta(minutes=i))
        else:
            retry.add(t, 1.0, started=T0 + timedelta(minutes=i))
    retry.write()
    stuck = JobBuilder(root, "terminal_bench_2_org-Parse-8B_2026-03-02__09-00-00", n_attempts=1)
    for i, t in enumerate(tasks(20)):
        if i < 5:
            stuck.add(t, None, exception="VerifierOutputParseError", started=T0 + timedelta(minutes=i))
        else:
            stuck.add(t, 0.0, started=T0 + timedelta(minutes=i))
    stuck.write()
    scored = JobBuilder(root, "terminal_bench_2_org-Exit-8B_2026-03-02__09-00-00", n_attempts=1)
    for i, t in enumerate(tasks(20)):
        scored.add(t, 0.0, exception="NonZeroAgentExitCodeError" if i < 5 else None,
                   started=T0 + timedelta(minutes=i))
    scored.write()
    never = JobBuilder(root, "terminal_bench_2_org-Never-8B_2026-03-02__09-00-00", n_attempts=1, score=None)
    for i, t in enumerate(tasks(20)):
        never.add(t, None, exception="BadRequestError", started=T0 + timedelta(minutes=i))
    never.write()
    live = JobBuilder(root, "terminal_bench_2_org-Live-8B_2026-03-02__09-00-00", n_attempts=1, finished=False)
    for i, t in enumerate(tasks(5)):
        live.add(t, 1.0, started=T0 + timedelta(minutes=i))
    live.add("task-late", running=True)
    live.write()


def test_generated_harbor_jobs(tmp_path: Path) -> None:
    root = tmp_path / "jobs"
    _harbor_jobs(root)
    config = Config(journal_path=str(tmp_path / "journal.jsonl"))

    async def go() -> dict[str, AuditReport]:
        found = await _audits(open_sources(str(root), config), config)
        await assert_verdicts_hold(found, config)
        return {e.id.split("_org-")[1].split("-8B")[0]: r for _, e, r in found}

    v = {k: r.verdict for k, r in asyncio.run(go()).items()}
    assert v == {"Healthy": "finalize", "Dup": "dedupe", "Retry": "resume", "Parse": "investigate",
                 "Exit": "investigate", "Never": "rerun", "Live": "wait"}
