"""Garbage in job dirs gives a clear reason and never a traceback, in the engine and in batch."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.models import AGGREGATE_UNREADABLE, TrialStatus
from services.harbor.parse import parse_trial
from tests.support.harbor_factory import JobBuilder, healthy_job, scan_one
from tui.cli import main

GARBAGE: list[bytes | None] = [
    None, b"", b"   ", b"null", b"[]", b"42", b'"text"', b"{", b'{"a": 1', b"\x00\x01\x02", b"\xff\xfe\xfd",
    b'{"verifier_result": 5}', b'{"verifier_result": {"rewards": "all"}}', b'{"exception_info": "boom"}',
    b'{"step_results": [1, 2]}', b'{"step_results": 5}', b'{"step_results": true}', b'{"started_at": 12}',
    b'{"id": {"nested": true}}',
    json.dumps({"verifier_result": {"rewards": {"reward": 10**400}}}).encode(),
    b"{" + b'"k": 1, ' * 10000 + b'"z": 2}',
]


@pytest.mark.parametrize("result", GARBAGE)
@pytest.mark.parametrize("config", [None, b"", b"[]", b"{", b'{"trial_name": 5, "task": "x"}',
                                    b'{"agent": {"model_name": ["a"]}}'])
def test_parse_trial_never_raises(result: bytes | None, config: bytes | None) -> None:
    t = parse_trial("x__AAAAAAA", "x__AAAAAAA", result, config, None)
    if result is None:
        assert t.status == TrialStatus.running
    else:
        assert t.status == TrialStatus.errored and t.parse_error
    assert t.trial_name and t.task_name


@pytest.mark.parametrize("job_result", [
    b"not json", b"[1, 2]", b'{"n_total_trials": "many"}', b'{"stats": []}',
    b'{"stats": {"evals": {"k": {"metrics": [{"mean": "0.5"}]}}}}', b'{"finished_at": "soon"}',
    b'{"n_total_trials": -5}', b'{"n_total_trials": 0}',
])
def test_bad_job_result_is_a_problem_not_a_crash(tmp_path: Path, job_result: bytes) -> None:
    job = healthy_job(tmp_path, n_tasks=3, n_rep=1)
    d = job.write()
    (d / "result.json").write_bytes(job_result)
    exp = scan_one(d)
    assert exp.counts.total == 3 and exp.score is None
    assert exp.counts.expected is None or exp.counts.expected > 0
    r = audit_experiment(exp)
    if exp.state_raw == AGGREGATE_UNREADABLE:
        assert r.verdict == "repair" and r.check("finished").remediation == "rebuild_aggregate"
    else:
        assert r.verdict in ("investigate", "wait", "resume", "finalize")
    if job_result not in (b'{"stats": {"evals": {"k": {"metrics": [{"mean": "0.5"}]}}}}',):
        assert exp.problems


@pytest.mark.parametrize("job_config", [b"not json", b'"str"', b'{"n_attempts": "three"}', b'{"agents": 5}'])
def test_bad_job_config_falls_back_to_the_default_n_rep(tmp_path: Path, job_config: bytes) -> None:
    d = healthy_job(tmp_path, n_tasks=3, n_rep=1).write()
    (d / "config.json").write_bytes(job_config)
    exp = scan_one(d)
    assert exp.n_rep == 3 and exp.n_rep_source == "default"
    assert any("config.json" in p for p in exp.problems)


@pytest.mark.parametrize("n_attempts", [0, -2])
def test_non_positive_n_attempts_is_harbors_default(tmp_path: Path, n_attempts: int) -> None:
    d = healthy_job(tmp_path, n_tasks=3, n_rep=1, n_attempts=n_attempts).write()
    exp = scan_one(d)
    assert exp.n_rep == 1
    assert any("n_attempts" in p for p in exp.problems)
    audit_experiment(exp)


def test_garbage_everywhere_in_batch_is_never_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = JobBuilder(tmp_path, n_attempts=1)
    job.add("fine", 1.0)
    for i, raw in enumerate(GARBAGE[1:]):
        job.add(f"junk-{i}", raw_result=raw or b"", name=f"junk-{i}__AAAAAAA")
    d = job.write()
    (d / "result.json").write_bytes(b"{truncated")
    (d / "config.json").write_bytes(b"\xff")
    # a non-UTF-8 trial dir name, as any byte string is a valid Linux file name
    odd = os.fsencode(str(d)) + b"/caf\xe9-task__AAAAAAA"
    os.makedirs(odd)
    with open(odd + b"/result.json", "wb") as fh:
        fh.write(b'{"verifier_result": {"rewards": {"reward": 1}}}')
    for cmd in ("list", "audit", "trials", "dedupe"):
        for fmt in ("json", "jsonl", "table"):
            code = main(["--batch", cmd, "--format", fmt, str(d)])
            out, err = capsys.readouterr()
            assert code in (0, 1), (cmd, fmt, err)
            assert "Traceback" not in err and out.strip()
    main(["--batch", "trials", "--format", "json", str(d)])
    trials = json.loads(capsys.readouterr().out)["trials"]
    assert len(trials) == 1 + len(GARBAGE[1:]) + 1  # fine, the junk, the odd name
    assert sum(t["status"] == "valid" for t in trials) == 2


def test_a_huge_result_file_is_refused_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from services.harbor import walk

    monkeypatch.setattr(walk, "MAX_BYTES", 1024)
    job = JobBuilder(tmp_path)
    job.add("big", raw_result=b'{"pad": "' + b"x" * 4096 + b'"}', name="big__AAAAAAA")
    exp = scan_one(job.write())
    assert exp.trials[0].status == TrialStatus.errored
    assert "larger than" in (exp.trials[0].parse_error or "")
