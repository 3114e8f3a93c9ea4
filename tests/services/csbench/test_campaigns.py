"""Cloud campaigns by id through the `csbench` CLI: status/logs read on every scan, fetch and
teardown as write-path commands. The cloud side is the stand-in csbench (tests/support/
csbench_standin.py: csbench's own CLI with OSS as a local dir and terraform recorded) serving
campaigns csbench's own controller ran offline."""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import Config, CsbenchConfig
from services.core.journal import Journal
from services.core.models import State, TrialStatus
from services.core.registry import open_all, open_sources
from services.core.source import SourceUnavailable
from services.csbench.cli import settings
from services.csbench.model import CampaignExperiment, RunTrial
from services.csbench.source import CampaignSource
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.errors import WriteRefused
from services.remediations.records import Plan
from tests.support.csbench_fixtures import SMOKE_TASK, cloud_bucket, csbench_exe, standin

CID = "camp-aaaa1111"
FAILING_TASK = {"task_id": "suite:swe-bench-lite", "params": {"_tmp_dir": "/dev/null/scratch"}}


@dataclass
class Cloud:
    tmp: Path
    bucket: Path
    exe: Path
    yaml: Path
    config: Config

    def source(self, *ids: str) -> CampaignSource:
        s = settings(self.config)
        assert s is not None
        return CampaignSource(s, list(ids) or None)

    async def campaign(self, cid: str = CID) -> CampaignExperiment:
        snap = await self.source(cid).scan()
        [exp] = snap.experiments
        assert isinstance(exp, CampaignExperiment)
        return exp


@pytest.fixture
def cloud(tmp_path: Path) -> Cloud:
    csbench_exe()
    bucket = tmp_path / "bucket"
    exe, yaml = standin(tmp_path, bucket)
    (tmp_path / "checkout" / "infra" / "terraform" / "aliyun-iam").mkdir(parents=True)
    config = Config(journal_path=str(tmp_path / "journal.jsonl"), csbench=CsbenchConfig(
        config=str(yaml), executable=str(exe), results_dir=str(tmp_path / "results"),
        workdir=str(tmp_path / "checkout"), campaigns=[CID]))
    return Cloud(tmp_path, bucket, exe, yaml, config)


def write_path(c: Cloud, read_only: bool = False) -> WritePath:
    return WritePath(Journal(c.config.journal_path), read_only=read_only)


async def test_a_done_campaign_before_fetch(cloud: Cloud) -> None:
    cloud_bucket(cloud.bucket, cloud.tmp, CID)
    exp = await cloud.campaign()
    assert (exp.state, exp.state_raw) == (State.finished, "DONE")
    st = exp.facts.status
    assert st is not None and st.counts == {"completed": 1} and st.done == "DONE" and not st.stale
    assert (exp.counts.valid, exp.counts.expected) == (1, 1)
    assert exp.facts.logs is not None and exp.facts.logs[0] == "controller boot: python+import+oss OK"
    assert exp.trials == []  # nothing fetched yet
    r = audit_experiment(exp)
    fetched = r.check("fetched")
    assert fetched.status.value == "warn" and fetched.remediation == "csbench_fetch"
    teardown = r.check("teardown")
    assert teardown.status.value == "warn" and "is DONE and no teardown is recorded" in teardown.evidence
    assert f"{cloud.exe} teardown {CID} --config {cloud.yaml}" in (teardown.action or "")


async def test_fetch_then_teardown_through_the_write_path(cloud: Cloud) -> None:
    cloud_bucket(cloud.bucket, cloud.tmp, CID)
    src = cloud.source(CID)
    exp = (await src.scan()).experiments[0]
    wp = write_path(cloud)

    plan = await registry.plan("csbench_fetch", exp, src, cloud.config)
    results = cloud.tmp / "results"
    assert f"  cd {results} && {cloud.exe} fetch {CID} --config {cloud.yaml} --dest {CID}" in plan.preview
    await registry.apply("csbench_fetch", plan, exp.id, src, cloud.config, wp)
    fetched = sorted(p.name for p in (results / CID).glob("*.json"))
    assert len(fetched) == 1 and fetched[0].startswith("suite:swe-bench--run-")

    exp = (await src.scan()).experiments[0]
    assert isinstance(exp, CampaignExperiment)
    [t] = exp.trials
    assert isinstance(t, RunTrial) and t.status == TrialStatus.valid and t.run.record is not None
    r = audit_experiment(exp)
    assert r.check("fetched").status.value == "pass"
    # csbench's own controller ran the smoke task with target.mode mock: the runbook's trap
    assert r.check("mock_vs_real").status.value == "fail"
    assert "cloud/aliyun-agentrun" in r.check("mock_vs_real").evidence

    plan = await registry.plan("csbench_teardown", exp, src, cloud.config)
    workdir = cloud.tmp / "checkout"
    assert f"  cd {workdir} && {cloud.exe} teardown {CID} --config {cloud.yaml}" in plan.preview
    assert any("NAT gateway and EIP" in line for line in plan.preview)
    record = await registry.apply("csbench_teardown", plan, exp.id, src, cloud.config, wp)
    assert record.status == "applied"
    [tf] = [json.loads(line) for line in (cloud.bucket / "terraform.log").read_text().splitlines()]
    assert tf["argv"][:2] == ["destroy", "-auto-approve"] and tf["cwd"] == str(workdir)
    assert (cloud.bucket / f"clousight-bench/control/{CID}/stop").exists()

    exp = (await src.scan()).experiments[0]
    assert isinstance(exp, CampaignExperiment)
    mark = exp.facts.teardown
    assert mark is not None and mark.destroyed is True and mark.record_id == record.id
    check = audit_experiment(exp).check("teardown")
    assert check.status.value == "pass" and "{'destroyed': True" in check.evidence
    # the output is in the journal, and a second teardown has nothing to do
    last = json.loads(Path(cloud.config.journal_path or "").read_text().splitlines()[-1])
    assert last["action"] == "csbench_teardown:apply"
    assert "'destroyed': True" in last["after"]["0"]["stdout_tail"]
    again = await registry.plan("csbench_teardown", exp, src, cloud.config)
    assert again.nothing_to_do and "already torn down" in again.preview[0]


async def test_a_teardown_that_destroyed_nothing_keeps_the_warning(cloud: Cloud,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cloud_bucket(cloud.bucket, cloud.tmp, CID)
    src = cloud.source(CID)
    exp = (await src.scan()).experiments[0]
    monkeypatch.setenv("CSBENCH_STANDIN_TF_RC", "1")  # terraform destroy fails; csbench still exits 0
    plan = await registry.plan("csbench_teardown", exp, src, cloud.config)
    record = await registry.apply("csbench_teardown", plan, exp.id, src, cloud.config, write_path(cloud))
    assert record.status == "applied"
    exp = (await src.scan()).experiments[0]
    check = audit_experiment(exp).check("teardown")
    assert check.status.value == "warn" and "did not destroy everything" in check.evidence
    assert "{'destroyed': False" in check.evidence and check.remediation == "csbench_teardown"


async def test_a_failed_campaign(cloud: Cloud) -> None:
    cloud_bucket(cloud.bucket, cloud.tmp, CID, [SMOKE_TASK, FAILING_TASK])
    exp = await cloud.campaign()
    assert (exp.state, exp.state_raw) == (State.failed, "FAILED")
    assert exp.facts.status is not None and exp.facts.status.counts == {"completed": 1, "failed": 1}
    assert (exp.counts.valid, exp.counts.errored, exp.counts.expected) == (1, 1, 2)
    [t] = exp.trials  # the failed task: a row without a record (csbench uploads completed tasks only)
    assert t.status == TrialStatus.errored and "records of completed tasks only" in (t.exception_message or "")
    r = audit_experiment(exp)
    assert r.check("campaign_state").status.value == "fail"
    assert r.check("tasks").status.value == "fail"
    assert r.check("harness_stderr").status.value == "skip"
    assert "does not upload" in r.check("harness_stderr").evidence
    assert r.check("teardown").status.value == "warn"


async def test_running_and_stale_campaigns(cloud: Cloud) -> None:
    cloud_bucket(cloud.bucket, cloud.tmp, CID, finish=False)
    exp = await cloud.campaign()
    assert (exp.state, exp.state_raw) == (State.running, "running")
    [t] = exp.trials
    assert t.status == TrialStatus.running and t.task_name == "suite:swe-bench"
    r = audit_experiment(exp)
    assert r.verdict == "wait" and r.check("teardown").status.value == "skip"

    cloud_bucket(cloud.bucket, cloud.tmp, "camp-bbbb2222", finish=False, heartbeat_age_s=600)
    exp = await cloud.campaign("camp-bbbb2222")
    assert (exp.state, exp.state_raw) == (State.failed, "stale")
    r = audit_experiment(exp)
    assert r.check("campaign_state").status.value == "fail" and "heartbeat is 6" in r.check("campaign_state").evidence
    assert r.check("teardown").status.value == "warn" and "is stale" in r.check("teardown").evidence


async def test_an_unknown_id_prints_empty_counts(cloud: Cloud) -> None:
    exp = await cloud.campaign("camp-ffff0000")
    assert (exp.state, exp.state_raw) == (State.pending, "no manifest")
    assert exp.facts.status is not None and exp.facts.status.counts == {} and exp.facts.status.done is None
    assert exp.facts.logs == []
    assert audit_experiment(exp).verdict == "wait"


async def test_the_real_csbench_without_oss_is_a_clear_error(cloud: Cloud) -> None:
    """The real csbench needs oss2 for status; its traceback becomes one line, never a crash."""
    if importlib.util.find_spec("oss2") is not None:
        pytest.skip("oss2 is installed: the real csbench would try to reach Aliyun OSS")
    assert cloud.config.csbench is not None
    cloud.config.csbench.executable = csbench_exe()
    snap = await cloud.source(CID).scan()
    [err] = snap.errors
    assert err.where == CID and "exited 1" in err.message
    assert "No module named 'oss2'" in err.message or "Error" in err.message
    [exp] = snap.experiments
    assert exp.problems and audit_experiment(exp).check("campaign_state").status.value == "fail"
    cloud.config.csbench.executable = str(cloud.tmp / "no-such-csbench")
    snap = await cloud.source(CID).scan()
    assert "command not found" in snap.errors[0].message


async def test_read_only_refuses_the_teardown(cloud: Cloud) -> None:
    cloud_bucket(cloud.bucket, cloud.tmp, CID)
    src = cloud.source(CID)
    exp = (await src.scan()).experiments[0]
    plan = await registry.plan("csbench_teardown", exp, src, cloud.config)
    with pytest.raises(WriteRefused, match="read-only"):
        await registry.apply("csbench_teardown", plan, exp.id, src, cloud.config, write_path(cloud, read_only=True))
    assert not (cloud.bucket / "terraform.log").exists()


async def test_without_a_config_there_is_no_command(cloud: Cloud) -> None:
    cloud_bucket(cloud.bucket, cloud.tmp, CID)
    exp = (await cloud.source(CID).scan()).experiments[0]
    # the audit's fix still plans its one step; the step cannot run until the config names csbench's
    unset: Plan = await registry.plan("csbench_teardown", exp, cloud.source(CID), Config())
    assert len(unset.steps) == 1 and unset.blocked and "[csbench] section" in unset.blocked
    shutil.rmtree(cloud.tmp / "checkout")
    plan: Plan = await registry.plan("csbench_teardown", exp, cloud.source(CID), cloud.config)
    assert plan.blocked and "infra/terraform/aliyun-iam" in plan.blocked
    with pytest.raises(WriteRefused):
        await registry.apply("csbench_teardown", plan, exp.id, cloud.source(CID), cloud.config, write_path(cloud))


async def test_sources_from_urls_and_the_config(cloud: Cloud) -> None:
    [src] = open_sources(f"csbench://{CID}", cloud.config)
    assert isinstance(src, CampaignSource) and src.campaigns == [CID]
    with pytest.raises(SourceUnavailable, match=r"\[csbench\]"):
        open_sources(f"csbench://{CID}", Config())
    with pytest.raises(ValueError, match="csbench://CAMPAIGN_ID"):
        open_sources("csbench://camp-1,--x", cloud.config)
    # csbench:// alone: whatever the [csbench] config follows
    [every] = open_sources("csbench://", cloud.config)
    assert isinstance(every, CampaignSource) and every.campaigns == [CID] and every.submitted
    sources, errors = open_all([], cloud.config)
    assert errors == [] and [s.kind for s in sources] == ["csbench"]


def test_settings_resolve_paths_against_the_config_file(tmp_path: Path) -> None:
    cfg = Config(csbench=CsbenchConfig(config="checkout/configs/agent-runtime-aliyun.local.yaml",
                                       results_dir="results"))
    cfg.config_path = str(tmp_path / "evaldesk.toml")
    s = settings(cfg)
    assert s is not None
    assert s.config == str(tmp_path / "checkout/configs/agent-runtime-aliyun.local.yaml")
    assert s.workdir == str(tmp_path / "checkout")  # the checkout the runbook runs from
    assert s.results_dir == str(tmp_path / "results") and s.executable == "csbench"
    assert s.argv("teardown", CID) == ["csbench", "teardown", CID, "--config", s.config]


def test_a_campaign_id_is_never_an_option(tmp_path: Path) -> None:
    from services.core.config import ConfigError, load_config

    toml = tmp_path / "c.toml"
    toml.write_text('[csbench]\nconfig = "x.yaml"\ncampaigns = ["--help"]\n')
    with pytest.raises(ConfigError, match=r"csbench\.campaigns.*not a campaign id"):
        load_config(toml)
    cfg = Config(csbench=CsbenchConfig(config="x.yaml"))
    with pytest.raises(ValueError, match="CAMPAIGN_ID"):
        open_sources("csbench://--config=/etc/passwd", cfg)


async def test_a_configured_campaigns_dir_is_read_once(cloud: Cloud) -> None:
    """Its fetched dir under results_dir belongs to the campaign source, not to a second source
    over the same folder."""
    cloud_bucket(cloud.bucket, cloud.tmp, CID)
    src = cloud.source(CID)
    exp = (await src.scan()).experiments[0]
    await registry.apply("csbench_fetch", await registry.plan("csbench_fetch", exp, src, cloud.config), exp.id, src,
                         cloud.config, write_path(cloud))
    assert open_sources(str(cloud.tmp / "results"), cloud.config)[0].kind == "harbor"  # nothing csbench is left
    [other] = open_sources(str(cloud.tmp / "results"), Config())
    assert other.kind == "csbench"  # without the config, it is just a fetched dir


async def test_a_fetched_failed_campaign_stays_failed(cloud: Cloud) -> None:
    """The controller uploads only completed tasks' records: the fetched dir of a FAILED campaign
    holds nothing failed. The fetch's record keeps what csbench status said, so the dir — read
    later as a path, without the config — is still the failed campaign, not a finished one."""
    cloud_bucket(cloud.bucket, cloud.tmp, CID, [SMOKE_TASK, FAILING_TASK])
    src = cloud.source(CID)
    exp = (await src.scan()).experiments[0]
    plan = await registry.plan("csbench_fetch", exp, src, cloud.config)
    assert any("FAILED: only its completed tasks' records" in line for line in plan.preview)
    await registry.apply("csbench_fetch", plan, exp.id, src, cloud.config, write_path(cloud))
    fetched = cloud.tmp / "results" / CID
    assert [json.loads(p.read_text())["status"] for p in fetched.glob("*.json")] == ["completed"]
    [path_src] = open_sources(str(fetched), Config())
    [exp] = (await path_src.scan()).experiments
    assert isinstance(exp, CampaignExperiment) and exp.facts.origin == "fetched"
    assert (exp.state, exp.state_raw) == (State.failed, "FAILED")
    assert (exp.counts.valid, exp.counts.errored, exp.counts.expected) == (1, 1, 2)
    r = audit_experiment(exp)
    state = r.check("campaign_state")
    assert state.status.value == "fail" and "FAILED marker" in state.evidence and "when evaldesk fetched" in \
        state.evidence
    assert r.verdict != "finalize" and r.check("tasks").status.value == "fail"
    # the campaign source, when csbench status cannot answer, says what it said at the fetch, dated
    assert cloud.config.csbench is not None
    cloud.config.csbench.executable = str(cloud.tmp / "no-such-csbench")
    [exp] = (await cloud.source(CID).scan()).experiments
    assert exp.state == State.failed and exp.stale_since is not None
    assert any("when evaldesk fetched it" in p for p in exp.problems)
