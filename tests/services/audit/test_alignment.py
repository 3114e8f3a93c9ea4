"""The `alignment` check: actual vs expected with a confidence interval, config drift field by
field, the top gap tasks; and the baseline files it reads (the monitor's rule c reads the same)."""

from __future__ import annotations

import json
from pathlib import Path

from services.audit.alignment import BaselineEnrichment, baseline_context, evaluate
from services.audit.verdict import audit_experiment
from services.core.alignment import config_drift
from services.core.baselines import Baseline, configured_baselines, load_baseline, pick_baseline
from services.core.config import Config
from services.core.models import CheckStatus, Experiment
from services.core.policy import Policy
from tests.support.harbor_factory import JobBuilder, scan_one

TASKS = [f"task-{i:02d}" for i in range(40)]


def _run(tmp_path: Path, passes: int, **config: object) -> Experiment:
    """40 tasks × 1 attempt, the first `passes` solved; `config` goes into the agent's kwargs."""
    job = JobBuilder(tmp_path / f"jobs-{passes}", n_attempts=1,
                     extra_config={"agents": [{"name": "terminus-2", "model_name": "hosted_vllm/org/Model-8B",
                                               "kwargs": config}]} if config else None)
    for i, task in enumerate(TASKS):
        job.add(task, reward=1.0 if i < passes else 0.0)
    job.write()
    return scan_one(job.root)


def test_baseline_files_score_alias_config_and_model_scope(tmp_path: Path) -> None:
    p = tmp_path / "terminal_bench_2-model-8b.json"
    p.write_text(json.dumps({"benchmark": "terminal_bench_2", "model": "org/Model-8B", "score": 0.5,
                             "config": {"temperature": 0.6}}))
    b = load_baseline(p)
    assert (b.name, b.pass_rate, b.path) == ("terminal_bench_2-model-8b", 0.5, str(p))
    assert b.expected_config == {"temperature": 0.6, "model": "org/Model-8B"}
    exp = _run(tmp_path, 20)
    assert b.applies_to(exp)  # hosted_vllm/org/Model-8B is org/Model-8B
    other = Baseline(name="o", benchmark="terminal_bench_2", model="org/Other-8B", pass_rate=0.5)
    any_model = Baseline(name="a", benchmark="terminal_bench_2", pass_rate=0.5)
    assert not other.applies_to(exp)
    assert pick_baseline(exp, [any_model, other, b]) is b  # the model-scoped one wins
    assert pick_baseline(exp, [other]) is None


def test_config_dir_baselines_and_a_bad_file(tmp_path: Path) -> None:
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps({"pass_rate": 0.4}))
    (folder / "bad.json").write_text("[]")
    found, errors = configured_baselines(Config(baselines_dir=str(folder)))
    assert [b.name for b in found] == ["good"]
    assert errors == [f"baseline {folder / 'bad.json'}: holds a JSON list, not an object"]
    assert baseline_context([]) is None


def test_config_drift_field_by_field() -> None:
    drift = config_drift({"model": "m", "temperature": 0.6, "thinking": True, "max_tokens": 32768, "seed": 1},
                         {"model": "m", "temperature": "0.6", "thinking": "false", "max_tokens": 16384})
    assert [(d.field, d.differs, d.known) for d in drift] == [
        ("model", False, True), ("temperature", False, True), ("thinking", True, True),
        ("max_tokens", True, True), ("seed", False, False)]


def test_statuses_pass_warn_fail_skip(tmp_path: Path) -> None:
    exp = _run(tmp_path, 20, temperature=0.6)  # 20 of 40: actual 0.5, 95% CI ~0.35–0.65
    assert exp.run_config["temperature"] == 0.6 and exp.run_config["model"] == "hosted_vllm/org/Model-8B"
    same = evaluate(exp, Baseline(name="b", pass_rate=0.55, config={"temperature": 0.6}))
    assert same.status == CheckStatus.pass_ and "config matches the baseline's" in same.evidence
    drift = evaluate(exp, Baseline(name="b", pass_rate=0.55, config={"temperature": 1.0, "image": "tb:1"}))
    assert drift.status == CheckStatus.warn
    assert "config drift: temperature 1 → 0.6" in drift.evidence and "not recorded by the run: image" in drift.evidence
    below = evaluate(exp, Baseline(name="b", pass_rate=0.8))
    assert below.status == CheckStatus.fail and below.ci is not None and below.ci[1] < 0.8
    assert below.evidence.startswith("actual 0.500 over 40 finished attempts, 95% CI 0.352–0.648 vs expected 0.800")
    above = evaluate(exp, Baseline(name="b", pass_rate=0.2))
    assert above.status == CheckStatus.warn and above.action and "above the baseline" in above.action
    none = evaluate(exp, Baseline(name="b", tasks={"not-a-task": 1.0}))
    assert none.status == CheckStatus.skip and "name none of the run's tasks" in none.evidence


def test_per_task_expectations_compare_like_with_like_and_name_the_gaps(tmp_path: Path) -> None:
    exp = _run(tmp_path, 20)  # tasks 00–19 pass, 20–39 fail
    expected = {t: 1.0 for t in TASKS[:10]} | {t: 1.0 for t in TASKS[30:33]}
    res = evaluate(exp, Baseline(name="tasks", tasks=expected))
    al = res.alignment
    assert al is not None and al.compared == 13 and al.expected == 1.0
    assert [g.task for g in al.gaps] == ["task-30", "task-31", "task-32"]
    assert "top gaps: task-30 0.00 vs 1.00, task-31 0.00 vs 1.00, task-32 0.00 vs 1.00" in res.evidence


def test_the_enrichment_adds_a_row_only_where_a_baseline_applies(tmp_path: Path) -> None:
    exp = _run(tmp_path, 20)
    scoped = Baseline(name="swe", benchmark="swebench", pass_rate=0.5)
    report = audit_experiment(exp, Policy(), context=baseline_context([scoped]))
    assert "alignment" not in [c.id for c in report.checks]
    enrich = BaselineEnrichment([Baseline(name="tb2", benchmark="terminal_bench_2", pass_rate=0.9)])
    report = audit_experiment(exp, Policy(), context=baseline_context(enrich.baselines))
    check = report.check("alignment")
    assert (check.status, check.title) == (CheckStatus.fail, "Aligned with the baseline")
    # a failing row is not finalized: a person aligns the config (no fix evaldesk runs for it)
    assert report.verdict == "investigate" and report.decided_by == "alignment" and report.needs_action
