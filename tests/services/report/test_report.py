"""Reports over the common Experiment model: figures equal the audit's, any backend, comparisons
with per-task deltas, the JSON shape, and an HTML page that is self-contained and escapes
every name that came from a run."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.baselines import load_baseline
from services.core.config import Config
from services.core.models import Experiment
from services.core.policy import Policy
from services.core.registry import open_sources, write_demo
from services.core.times import DEMO_NOW
from services.report.html import render_html
from services.report.output import default_name, render, report_for, write_text_atomic
from tests.support.harbor_factory import JobBuilder, scan_one

NOW = DEMO_NOW + timedelta(minutes=5)
OPENTHINKER = "terminal_bench_2_laion-OpenThinker-Agent-8B_2026-11-19__12-00-00"
QWEN = "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Experiment]:
    root = tmp_path_factory.mktemp("demo")
    write_demo(root, DEMO_NOW)
    import asyncio

    exps: dict[str, Experiment] = {}
    for src in open_sources(str(root), Config()):
        for e in asyncio.run(src.scan()).experiments:
            exps[e.id] = e
    exps["_root"] = root  # type: ignore[assignment]
    return exps


def test_kpis_are_the_audits_for_every_demo_experiment_of_every_backend(demo: dict[str, Experiment]) -> None:
    policy = Policy()
    exps = [e for k, e in demo.items() if k != "_root"]
    assert {e.source for e in exps} == {"harbor", "rock", "aisbench", "csbench"}
    for exp in exps:
        audit = audit_experiment(exp, policy, NOW)
        run = report_for([exp], policy, NOW).runs[0]
        k = run.kpis
        assert (k.score, k.valid, k.expected, k.error_fraction, k.valid_fraction) == (
            audit.score, audit.trials["valid"], audit.trials["expected"], audit.error_fraction, audit.valid_fraction)
        assert run.audit.verdict == audit.verdict and [c.id for c in run.audit.checks] == [c.id for c in audit.checks]
        attempts = [t for t in exp.trials if t.copy_of is None]
        assert run.ring.finished + run.ring.running == len(attempts)
        # a perf run's valid trials carry no reward, so they have no place in the histogram
        assert sum(run.histogram.counts) == sum(1 for t in attempts if t.status == "valid" and t.reward is not None)
        assert sum(t.attempts for t in run.tasks) == len(attempts)
        assert sum(g.count for g in run.exceptions) == sum(
            1 for t in attempts if t.status != "running" and (t.exception_type or t.status == "errored"))


def test_exception_groups_and_task_rows(demo: dict[str, Experiment]) -> None:
    sera = demo["terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00"]
    run = report_for([sera], Policy(), NOW).runs[0]
    groups = {g.exception: g for g in run.exceptions}
    assert (groups["NonZeroAgentExitCodeError"].count, groups["VerifierOutputParseError"].count) == (38, 12)
    ex = groups["VerifierOutputParseError"].example
    assert ex.message == "Could not parse reward from /logs/verifier/reward.txt" and ex.trial.startswith(ex.task[:20])
    assert groups["VerifierOutputParseError"].failure_class == "verifier_failed"
    assert len(run.tasks) == 89 and all(t.attempts == 3 for t in run.tasks)
    assert run.kpis.tokens == (sera.n_input_tokens or 0) + (sera.n_output_tokens or 0)
    assert run.kpis.duration_s and run.kpis.duration_s > 3600


def test_rock_experiment_report(demo: dict[str, Experiment]) -> None:
    run = report_for([demo["exp-7f3a9c21"]], Policy(), NOW).runs[0]
    assert (run.source, run.ring.passed, run.ring.failed, run.ring.errored) == ("rock", 17, 13, 10)
    assert {g.exception: g.count for g in run.exceptions} == {
        "RewardFileNotFoundError": 4, "RuntimeError": 3, "AgentTimeoutError": 2, "no reward": 1}


def test_two_runs_of_one_benchmark_are_compared_task_by_task(demo: dict[str, Experiment]) -> None:
    a, b = demo[OPENTHINKER], demo[QWEN]
    report = report_for([a, b], Policy(), NOW)
    c = report.comparison
    assert c is not None and c.benchmark == "terminal_bench_2" and c.runs == [a.id, b.id]
    assert c.score_delta == pytest.approx((b.score or 0) - (a.score or 0))
    rows = {t.task: t for t in report.runs[0].tasks}, {t.task: t for t in report.runs[1].tasks}
    for d in c.tasks:
        assert d.outcomes == [rows[0][d.task].outcome, rows[1][d.task].outcome]
        assert d.delta == pytest.approx((d.outcomes[1] or 0) - (d.outcomes[0] or 0))
    # largest change first
    assert [abs(d.delta or 0) for d in c.tasks] == sorted((abs(d.delta or 0) for d in c.tasks), reverse=True)
    other = report_for([a, demo["exp-7f3a9c21"]], Policy(), NOW)
    assert other.comparison is None and other.notes[0].startswith("not compared: the runs are of different")


def test_alignment_rides_along_when_a_baseline_applies(demo: dict[str, Experiment]) -> None:
    root = Path(str(demo["_root"]))
    baseline = load_baseline(root / "baselines" / "terminal_bench_2-openthinker-agent-8b.json")
    report = report_for([demo[OPENTHINKER], demo[QWEN]], Policy(), NOW, [baseline])
    al = report.runs[0].alignment
    assert al is not None and al.status == "fail" and al.alignment is not None
    assert [d.field for d in al.differing] == ["timeout_multiplier"]
    assert report.runs[1].alignment is None  # another model: the baseline does not apply
    assert report.runs[0].audit.checks[-1].id == "alignment"


def test_json_output_is_the_model(demo: dict[str, Experiment]) -> None:
    report = report_for([demo[OPENTHINKER]], Policy(), NOW)
    data = json.loads(render(report, "json"))
    assert data["schema_version"] == 1 and data["title"] == OPENTHINKER
    run = data["runs"][0]
    assert set(run) >= {"id", "kpis", "ring", "histogram", "exceptions", "audit", "tasks", "alignment"}
    assert run["audit"]["checks"][0]["id"] == "finished"
    assert default_name(report, "html") == f"{OPENTHINKER}-20261120T180500Z.html"


def test_html_is_self_contained_and_escapes_what_came_from_the_run(tmp_path: Path) -> None:
    hostile = '<img src=x onerror=alert(1)>"&\u001b[31m'
    job = JobBuilder(tmp_path / "jobs", name="evil_job", n_attempts=1)
    job.add(hostile, reward=None, exception="RuntimeError")
    job.add("fine", reward=1.0)
    job.write()
    exp = scan_one(tmp_path / "jobs")
    page = render_html(report_for([exp], Policy(), NOW))
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;&quot;&amp;" in page
    # the embedded JSON block cannot be closed by a name either
    block = page.split('id="evaldesk-report">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and json.loads(block)["runs"][0]["id"] == "evil_job"
    # nothing is fetched: no external URL in any src/href, and a CSP that forbids it anyway
    assert not re.search(r'(?:src|href)\s*=\s*"(?:https?:)?//', page)
    assert "default-src 'none'" in page and page.count("<script") == 2
    out = write_text_atomic(tmp_path / "r" / "x.html", page)
    assert out.read_text() == page and [p.name for p in out.parent.iterdir()] == ["x.html"]
