"""The runbook's 8-item real-run checklist, mock-vs-real and the teardown reminder, on records
the real csbench wrote — edited where a case needs what only a real cloud run produces (a live
execution, an oracle scaffold, a harness error) — and controller logs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.audit.verdict import audit_experiment
from services.core.models import AuditReport
from services.csbench.checklist import harness_run_id
from services.csbench.model import CampaignExperiment
from services.csbench.source import ResultsSource
from tests.support.csbench_fixtures import INSTANCES, copy_results, results

Edit = Callable[[dict[str, Any]], None]
HARNESS_ID = harness_run_id(INSTANCES)
DF = [
    "$ docker system df",
    "TYPE            TOTAL     ACTIVE    SIZE      RECLAIMABLE",
    "Images          4         3         23.7GB    2.1GB (8%)",
    "Containers      3         0         1.2MB     1.2MB (100%)",
]
HF = ["Downloading data from https://hf-mirror.com/datasets/princeton-nlp/SWE-bench_Verified/resolve/main/"
      "data/test-00000-of-00001.parquet"]
CONTAINERS = [f"Running sweb.eval.{iid}.{HARNESS_ID}" for iid in INSTANCES]


def live_oracle(resolved: float = 1.0) -> Edit:
    def edit(rec: dict[str, Any]) -> None:
        rec["environment"].update(mode="cloud", execution="live", region="cn-hangzhou")
        rec["identity"]["adapter"] = "aliyun-agentrun"
        rec["provenance"]["scaffold"] = "oracle@slice2"
        rec["measurements"]["swe-bench.resolved"]["value"] = resolved
    return edit


def failed_with(message: str, error_type: str = "RuntimeError") -> Edit:
    def edit(rec: dict[str, Any]) -> None:
        live_oracle()(rec)
        rec["status"] = "failed"
        rec["measurements"] = {}
        rec["run"]["stages"].update(EXECUTE="failed", SCORE="skipped")
        rec["errors"] = [{"stage": "EXECUTE", "code": "execute_failed", "type": error_type, "message": message,
                          "retryable": True}]
    return edit


async def audit(tmp: Path, factory: pytest.TempPathFactory, edit: Edit | None = None, logs: list[str] | None = None,
                *, layout: str = "fetched", name: str = "camp-1234abcd") -> tuple[CampaignExperiment, AuditReport]:
    """A campaign dir with the passing record (edited), as `csbench fetch` leaves it, or as
    `run-plan` left it (artifacts included), with `controller.log` when `logs` is given."""
    if layout == "fetched":
        dest = tmp / name
        dest.mkdir()
        src = next((results(factory, "passing") / "agent-runtime").rglob("*.json"))
        rec = json.loads(src.read_text())
        if edit:
            edit(rec)
        (dest / f"{rec['identity']['task_id']}--{rec['run']['run_id']}.json").write_text(json.dumps(rec))
    else:
        dest = copy_results(factory, "passing", tmp / name)
        path = next((dest / "agent-runtime").rglob("*.json"))
        rec = json.loads(path.read_text())
        if edit:
            edit(rec)
        path.write_text(json.dumps(rec))
    if logs is not None:
        (dest / "controller.log").write_text("\n".join(logs) + "\n")
    snap = await ResultsSource(str(dest), label="t").scan()
    [exp] = snap.experiments
    assert isinstance(exp, CampaignExperiment)
    return exp, audit_experiment(exp)


def status(report: AuditReport, check: str) -> str:
    return report.check(check).status.value


async def test_a_real_oracle_run_passes_the_checklist(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    _, r = await audit(tmp_path, tmp_path_factory, live_oracle(), HF + DF + CONTAINERS, layout="run-plan")
    got = {c.id: c.status.value for c in r.checks}
    assert got == {
        "campaign_state": "pass", "tasks": "pass", "artifacts": "pass",
        "mock_vs_real": "pass", "harness_report": "pass", "hf_mirror": "pass", "oracle_resolved": "pass",
        "docker_room": "pass", "swebench_importable": "pass", "placement_local": "pass",
        "container_naming": "pass", "harness_stderr": "skip",
    }
    assert "resolved_instances/total_instances/resolved_ids" in r.check("harness_report").evidence
    assert "csbench-oracle-agent.<run_id>.json" in r.check("harness_report").evidence
    assert "hf-mirror.com" in r.check("hf_mirror").evidence
    assert "23.7 GiB of a 120 GiB disk" in r.check("docker_room").evidence
    assert HARNESS_ID in r.check("container_naming").evidence and "sha256 of this run's instance ids" in \
        r.check("container_naming").evidence
    assert "teardown" not in got  # a run-plan dir: nothing in the cloud to tear down


async def test_oracle_short_of_one_is_an_environment_problem(tmp_path: Path,
                                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    _, r = await audit(tmp_path, tmp_path_factory, live_oracle(2 / 3))
    c = r.check("oracle_resolved")
    assert c.status.value == "fail" and "resolved 0.667 of 3 instance(s)" in c.evidence
    assert "never agent quality" in (c.action or "")


async def test_mock_on_a_cloud_campaign_is_you_paid_for_a_mock(tmp_path: Path,
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    def cloud_mock(rec: dict[str, Any]) -> None:
        rec["environment"].update(mode="cloud", region="cn-hangzhou")
    _, r = await audit(tmp_path, tmp_path_factory, cloud_mock)
    c = r.check("mock_vs_real")
    assert c.status.value == "fail" and c.evidence.startswith("you paid for a mock")
    assert "environment.execution = simulated" in c.evidence and "mock-agent@slice1" in c.evidence
    assert "target.mode: real" in (c.action or "")
    assert r.verdict == "teardown" and r.needs_action
    # the harness items cannot be decided from a simulated run, and say so
    for item in ("harness_report", "swebench_importable", "placement_local"):
        assert status(r, item) == "skip"
    assert "canned fixture" in r.check("oracle_resolved").evidence


async def test_a_local_dev_run_may_be_a_mock(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    _, r = await audit(tmp_path, tmp_path_factory, layout="run-plan")
    assert status(r, "mock_vs_real") == "skip" and "a dev run" in r.check("mock_vs_real").evidence
    assert r.verdict == "finalize" and not r.needs_action


@pytest.mark.parametrize(("message", "check", "expected", "evidence"), [
    ("unrecognized swebench report shape — missing key(s) ['resolved_ids']; got top-level keys ['completed_ids', "
     "'resolved_instances', 'total_instances']. Pin a supported swebench version.", "harness_report", "fail",
     "missing key(s) ['resolved_ids']"),
    ("expected harness report 'csbench-oracle-agent.csbench-2b8e1f0c.json' not found in /tmp/csbench-swebench-x; "
     "json files present: ['oracle.csbench-2b8e1f0c.json']", "harness_report", "fail", "not found"),
    ("swebench extra not installed; install with 'pip install clousight-bench[swebench]' or use mock_artifacts() "
     "for the docker-free path", "swebench_importable", "fail", "swebench extra not installed"),
    ("driver.placement must be 'local' for the real SWE-bench harness (Docker runs on the local machine); got "
     "'remote'", "placement_local", "fail", "got 'remote'"),
    ("swebench harness failed (exit 1): ...Traceback (most recent call last):\n  File \"run_evaluation.py\", line "
     "9\ndocker.errors.ImageNotFound: 404 Client Error: sweb.env.x86_64.428", "harness_stderr", "pass",
     "docker.errors.ImageNotFound"),
    ("swebench harness failed (exit 1): ...", "harness_stderr", "fail", "only its exit code"),
    ("[Errno 28] No space left on device: '/var/lib/docker/tmp'", "docker_room", "fail", "ran out of disk"),
])
async def test_each_failure_lands_on_its_item(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                                              message: str, check: str, expected: str, evidence: str) -> None:
    _, r = await audit(tmp_path, tmp_path_factory, failed_with(message))
    c = r.check(check)
    assert c.status.value == expected, c
    assert evidence in c.evidence
    assert status(r, "tasks") == "fail" and message[:40] in r.check("tasks").evidence


@pytest.mark.parametrize(("logs", "expected", "evidence"), [
    (["Downloading https://huggingface.co/datasets/princeton-nlp/SWE-bench_Verified: ConnectTimeout, Max retries "
      "exceeded"], "fail", "went to huggingface.co and failed"),
    (["Resolving data files from huggingface.co/datasets/princeton-nlp/SWE-bench_Verified"], "warn",
     "not the mirror"),
    (["controller boot: python+import+oss OK"], "skip", "names no dataset download"),
])
async def test_the_dataset_item_reads_the_controller_log(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                                                         logs: list[str], expected: str, evidence: str) -> None:
    _, r = await audit(tmp_path, tmp_path_factory, live_oracle(), logs)
    c = r.check("hf_mirror")
    assert c.status.value == expected and evidence in c.evidence


async def test_docker_room_and_container_names(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    big = ["Images          9         3         110.2GB   2.1GB (2%)"]
    stranger = ["Running sweb.eval.django__django-11099.csbench-00000000"]
    _, r = await audit(tmp_path, tmp_path_factory, live_oracle(), big + stranger, layout="run-plan")
    assert status(r, "docker_room") == "warn" and "(92%)" in r.check("docker_room").evidence
    c = r.check("container_naming")
    assert c.status.value == "fail" and "csbench-00000000" in c.evidence and HARNESS_ID in c.evidence


async def test_no_log_means_skip_with_where_to_look(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    _, r = await audit(tmp_path, tmp_path_factory, live_oracle())
    assert status(r, "hf_mirror") == "skip" and "hf-mirror.com on the driver" in r.check("hf_mirror").evidence
    assert status(r, "docker_room") == "skip" and status(r, "container_naming") == "skip"


async def test_teardown_reminder_on_a_fetched_cloud_campaign(tmp_path: Path,
                                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    _, r = await audit(tmp_path, tmp_path_factory, live_oracle())
    c = r.check("teardown")
    assert c.status.value == "warn" and "NAT and EIP bill by the hour" in c.evidence
    assert c.remediation == "csbench_teardown"
    assert "csbench teardown camp-1234abcd" in (c.action or "")
    assert r.verdict == "teardown" and r.needs_action
    assert r.notes[0].startswith("Tear the campaign down first")
    # not a cloud campaign id: the reminder stays, with nothing evaldesk can run
    _, r2 = await audit(tmp_path, tmp_path_factory, live_oracle(), name="swe-smoke")
    assert r2.check("teardown").remediation is None
