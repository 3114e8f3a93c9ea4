"""`csbench submit` through the one write path, and the runbook's preflight before it pays.

The preflight reads real files (a git checkout with the plan committed and the local config
gitignored, or not), the environment by name, the terraform dir and the program. The submit
runs the stand-in `csbench` first on PATH — csbench's own CLI with OSS as a dir and terraform
recorded (tests/support/csbench_standin.py) — which logs its argv and the names of the
ALICLOUD_* variables it was given."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import Config, CsbenchConfig
from services.core.journal import Journal
from services.core.models import State
from services.csbench.cli import settings
from services.csbench.model import CampaignExperiment, PlanExperiment
from services.csbench.plans import read_config, read_plan
from services.csbench.preflight import ALICLOUD_ENV, blocking, run_preflight
from services.csbench.source import CampaignSource
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.errors import WriteRefused
from tests.support.csbench_fixtures import (
    SECRET_VALUES,
    SMOKE_SUBMIT_PLAN,
    calls,
    git,
    local_config,
    standin_on_path,
    submit_checkout,
)


@dataclass
class Desk:
    tmp: Path
    checkout: Path
    plan: Path
    yaml: Path
    log: Path
    config: Config

    def source(self) -> CampaignSource:
        s = settings(self.config)
        assert s is not None
        return CampaignSource(s)

    async def scan(self) -> tuple[PlanExperiment, list[CampaignExperiment]]:
        snap = await self.source().scan()
        [plan] = [e for e in snap.experiments if isinstance(e, PlanExperiment)]
        return plan, [e for e in snap.experiments if isinstance(e, CampaignExperiment)]

    def preflight(self, **env_over: str | None) -> dict[str, tuple[str, str]]:
        s = settings(self.config)
        assert s is not None
        import os

        env = {k: v for k, v in {**os.environ, **env_over}.items() if v is not None}
        items = run_preflight(s, read_plan(str(self.plan)), read_config(str(self.yaml)), [], {}, env)
        return {i.id: (i.status, i.evidence) for i in items}


def make_desk(tmp: Path, monkeypatch: pytest.MonkeyPatch, mode: str | None = "real") -> Desk:
    log = standin_on_path(tmp, monkeypatch)
    checkout, plan, yaml = submit_checkout(tmp, mode)
    config = Config(journal_path=str(tmp / "journal.jsonl"), csbench=CsbenchConfig(
        config=str(yaml), results_dir=str(tmp / "results"), plans=[str(plan)]))
    return Desk(tmp, checkout, plan, yaml, log, config)


@pytest.fixture
def desk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Desk:
    return make_desk(tmp_path, monkeypatch)


def no_secret_in(*texts: str) -> None:
    for text in texts:
        for name, value in SECRET_VALUES.items():
            if name != "ALICLOUD_REGION":  # a region is not a secret (and cn-hangzhou is in the config)
                assert value not in text, name
        assert "sentinel-arms-license" not in text


def test_the_preflight_of_a_checkout_as_the_runbook_keeps_it(desk: Desk) -> None:
    items = desk.preflight()
    assert {k for k, (st, _) in items.items() if st == "fail"} == set()
    assert items["plan_file"][0] == "pass" and "suite:swe-bench" in items["plan_file"][1]
    assert "driver hf_endpoint, install_docker, instance_type, system_disk_size" in items["plan_file"][1]
    assert items["config_not_committed"] == ("pass", f"agent-runtime-aliyun.local.yaml is gitignored in "
                                             f"{desk.checkout}")
    assert items["target_mode"][0] == "pass"
    assert items["credentials"] == ("pass", f"{', '.join(ALICLOUD_ENV)} set (values not read)")
    assert items["target_keys"][0] == "pass" and "auth_env CSB_OSS_KEY" in items["target_keys"][1]
    assert items["watchdog"][0] == "pass" and "--watchdog-timeout 5400" in items["watchdog"][1]
    assert items["llm_key"][0] == "skip" and items["balance"][0] == "skip"
    no_secret_in(json.dumps(items))
    # committed by mistake: refused, and it says how to undo it
    git(desk.checkout, "add", "-f", str(desk.yaml))
    git(desk.checkout, "commit", "-q", "-m", "oops")
    assert desk.preflight()["config_not_committed"][0] == "fail"
    git(desk.checkout, "rm", "-q", "--cached", str(desk.yaml))
    (desk.checkout / ".gitignore").write_text("")
    status, evidence = desk.preflight()["config_not_committed"]
    assert status == "warn" and "not ignored either" in evidence


def test_the_preflight_refuses_what_the_runbook_warns_of(desk: Desk) -> None:
    # names, never values
    items = desk.preflight(ALICLOUD_SECRET_KEY=None, CSB_OSS_KEY=None)
    assert items["credentials"][0] == "fail" and "ALICLOUD_SECRET_KEY not set" in items["credentials"][1]
    assert items["target_keys"][0] == "fail" and "CSB_OSS_KEY" in items["target_keys"][1]
    no_secret_in(json.dumps(items))
    # the run-plan shape, and a driver key csbench rejects
    desk.plan.write_text(SMOKE_SUBMIT_PLAN.replace("task_id:", "task:"))
    assert "the run-plan shape" in desk.preflight()["plan_file"][1]
    desk.plan.write_text(SMOKE_SUBMIT_PLAN.replace("install_docker", "install_dockr"))
    assert "unknown driver key(s) install_dockr" in desk.preflight()["plan_file"][1]
    # llm mode: the key does not reach the driver on the prod path
    desk.plan.write_text(SMOKE_SUBMIT_PLAN.replace("agent_kind: oracle", "agent_kind: llm"))
    status, evidence = desk.preflight(DASHSCOPE_API_KEY="sk-sentinel-dashscope")["llm_key"]
    assert status == "warn" and "does not deliver DASHSCOPE_API_KEY" in evidence and "sk-sentinel" not in evidence
    # the costliest mistake: suite tasks on a config that is not real
    desk.plan.write_text(SMOKE_SUBMIT_PLAN)
    for mode in ("mock", None):
        desk.yaml.write_text(local_config(desk.tmp / "bucket", mode))
        status, evidence = desk.preflight()["target_mode"]
        assert status == "fail" and "canned fixtures" in evidence
    desk.yaml.write_text(local_config(desk.tmp / "bucket", "real", oss_bucket="old"))
    assert "renamed to blob_bucket" in desk.preflight()["target_keys"][1]
    desk.yaml.unlink()
    assert desk.preflight()["config_file"][0] == "fail"
    (desk.checkout / "infra").rename(desk.checkout / "infra-moved")
    assert desk.preflight()["terraform_dir"][0] == "fail"
    assert desk.config.csbench is not None
    desk.config.csbench.watchdog_timeout_s = 0
    desk.config.csbench.executable = str(desk.tmp / "no-such-csbench")
    items = desk.preflight()
    assert items["watchdog"][0] == "fail" and items["executable"][0] == "fail"


async def test_submit_through_the_write_path(desk: Desk) -> None:
    plan_exp, campaigns = await desk.scan()
    assert campaigns == [] and (plan_exp.state, plan_exp.state_raw) == (State.pending, "not submitted")
    report = audit_experiment(plan_exp)
    assert report.verdict == "submit" and report.check("submitted").remediation == "csbench_submit"
    src = desk.source()
    plan = await registry.plan("csbench_submit", plan_exp, src, desk.config)
    assert plan.blocked is None and len(plan.steps) == 1
    command = (f"cd {desk.checkout} && csbench submit {desk.plan} --config {desk.yaml} --watchdog-timeout 5400")
    assert f"  {command}" in plan.preview
    assert calls(desk.log) == []  # planning ran nothing
    record = await registry.apply("csbench_submit", plan, plan_exp.id, src, desk.config,
                                  WritePath(Journal(desk.config.journal_path)))
    assert record.status == "applied"
    [call] = calls(desk.log)
    assert call["argv"] == ["csbench", "submit", str(desk.plan), "--config", str(desk.yaml),
                            "--watchdog-timeout", "5400"]
    assert call["cwd"] == str(desk.checkout) and set(ALICLOUD_ENV) <= set(call["env_names"])
    cid = record.results[0]["stdout_tail"].strip().splitlines()[-1]
    launch = json.loads((desk.tmp / "bucket" / "clousight-bench" / "control" / cid / "launch.json").read_text())
    assert launch["watchdog_timeout_s"] == 5400 and launch["target"]["mode"] == "real"
    [tf] = [json.loads(line) for line in (desk.tmp / "bucket" / "terraform.log").read_text().splitlines()]
    assert tf["argv"][:2] == ["apply", "-auto-approve"] and f"campaign_id={cid}" in tf["argv"]
    assert "controller_system_disk_size=120" in tf["argv"]
    journal = Path(desk.config.journal_path or "").read_text()
    record_file = next((desk.tmp / "results" / ".evaldesk-quarantine").glob("*/record.json")).read_text()
    no_secret_in(journal, record_file, "\n".join(plan.preview))

    # evaldesk follows the campaign it submitted; the plan says where it went
    plan_exp, [camp] = await desk.scan()
    assert camp.id == cid and (camp.state, camp.state_raw) == (State.pending, "no manifest")
    assert (plan_exp.state, plan_exp.state_raw) == (State.dispatched, f"submitted {cid}")
    report = audit_experiment(plan_exp)
    # dispatched: the plan waits on the campaign it started, which its own row follows
    assert report.verdict == "wait" and cid in report.check("submitted").evidence
    assert not [c for c in report.checks if c.status.value == "fail"]
    # idempotent: the same plan and config again would pay for a second controller
    again = await registry.plan("csbench_submit", plan_exp, src, desk.config)
    assert again.blocked and f"submitted as {cid}" in again.blocked
    with pytest.raises(WriteRefused):
        await registry.apply("csbench_submit", again, plan_exp.id, src, desk.config,
                             WritePath(Journal(desk.config.journal_path)))
    assert len(calls(desk.log)) == 3  # the scans' status and logs, no second submit

    # once torn down, it may be submitted again
    teardown = await registry.plan("csbench_teardown", camp, src, desk.config)
    await registry.apply("csbench_teardown", teardown, camp.id, src, desk.config,
                         WritePath(Journal(desk.config.journal_path)))
    plan_exp, _ = await desk.scan()
    assert plan_exp.state == State.pending
    assert "torn down since" in audit_experiment(plan_exp).check("not_submitted").evidence


async def test_a_mock_config_goes_only_with_the_word(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    desk = make_desk(tmp_path, monkeypatch, mode="mock")
    plan_exp, _ = await desk.scan()
    report = audit_experiment(plan_exp)
    assert report.check("target_mode").status.value == "fail"
    assert report.check("submitted").remediation == "csbench_submit"  # the dialog can take the word
    src = desk.source()
    plan = await registry.plan("csbench_submit", plan_exp, src, desk.config)
    assert plan.blocked and "target.mode" in plan.blocked and plan.meta["confirm_word"] == "mock"
    wp = WritePath(Journal(desk.config.journal_path))
    with pytest.raises(WriteRefused, match="canned fixtures"):
        await registry.apply("csbench_submit", plan, plan_exp.id, src, desk.config, wp)
    wrong = await registry.plan("csbench_submit", plan_exp, src, desk.config, options={"confirm_word": "yes"})
    assert wrong.blocked
    plan = await registry.plan("csbench_submit", plan_exp, src, desk.config, options={"confirm_word": "mock"})
    assert plan.blocked is None and plan.preview[0].startswith("You typed mock")
    record = await registry.apply("csbench_submit", plan, plan_exp.id, src, desk.config, wp)
    assert record.status == "applied"
    # csbench itself only warns, after the fact
    assert "the suite will run MOCK artifacts" in record.results[0]["stderr_tail"]
    [call] = [c for c in calls(desk.log) if c["argv"][1] == "submit"]
    assert call["argv"][-2:] == ["--watchdog-timeout", "5400"]


async def test_read_only_refuses_the_submit(desk: Desk) -> None:
    plan_exp, _ = await desk.scan()
    src = desk.source()
    plan = await registry.plan("csbench_submit", plan_exp, src, desk.config)
    with pytest.raises(WriteRefused, match="read-only"):
        await registry.apply("csbench_submit", plan, plan_exp.id, src, desk.config,
                             WritePath(Journal(desk.config.journal_path), read_only=True))
    assert calls(desk.log) == []
    # nor is any other experiment a submit plan
    with pytest.raises(WriteRefused, match="not a csbench submit plan"):
        await registry.plan("csbench_submit", _not_a_plan(), src, desk.config)


def _not_a_plan() -> CampaignExperiment:
    from services.csbench.model import CampaignFacts

    return CampaignExperiment(id="x", source="csbench", facts=CampaignFacts(origin="run-plan", results_dir="/x"))


def test_blocking_takes_the_word_for_its_item_only() -> None:
    from services.csbench.model import PreflightItem

    items = [PreflightItem(id="target_mode", title="m", status="fail", evidence="e", word="mock"),
             PreflightItem(id="credentials", title="c", status="fail", evidence="e")]
    first = blocking(items, "mock")
    assert first is not None and first.id == "credentials"
    assert blocking(items[:1], "mock") is None
