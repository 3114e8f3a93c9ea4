"""The parse cache's record of a trial is versioned (parse.VERSION): these golden records say what
version 1 holds. A change to what a file becomes, or to the record's layout, fails here until the
version is bumped and the goldens written again — so no cache keeps records of another layout."""

from __future__ import annotations

import pytest

from services.harbor.parse import VERSION, decode, encode, parse_trial

VALID = (b'{"trial_name":"fix-git__AbCdEfG","task_name":"fix-git","started_at":"2026-11-01T10:00:00+00:00",'
         b'"finished_at":"2026-11-01T10:12:30+00:00","verifier_result":{"rewards":{"reward":1.0}},'
         b'"agent_result":{"n_input_tokens":1200,"n_cache_tokens":300,"n_output_tokens":80,"cost_usd":0.25},'
         b'"agent_info":{"name":"terminus-2","model_info":{"name":"hosted_vllm/laion/M"}},"source":"terminal-bench"}')
ERRORED = (b'{"trial_name":"fix-git__HhIiJjK","task_name":"fix-git","exception_info":'
           b'{"exception_type":"AgentTimeoutError","exception_message":"timed out"},"verifier_result":null}')

GOLDEN = {
    VALID: b'["fix-git__AbCdEfG","fix-git","valid",1.0,{"reward":1.0},null,null,null,null,'
           b'"2026-11-01T10:00:00+00:00","2026-11-01T10:12:30+00:00",1200,300,80,0.25,"hosted_vllm/laion/M",'
           b'"terminus-2","terminal-bench",1764000000.5,null]',
    ERRORED: b'["fix-git__HhIiJjK","fix-git","errored",null,{},"AgentTimeoutError","timed out",'
             b'"agent_exhausted_budget",null,null,null,null,null,null,null,null,null,null,1764000000.5,null]',
}


def test_the_goldens_are_of_this_version() -> None:
    assert VERSION == 1, "write the goldens again for the new version"


@pytest.mark.parametrize("result", list(GOLDEN), ids=["valid", "errored"])
def test_a_trial_file_becomes_its_golden_record_and_back(result: bytes) -> None:
    trial = parse_trial("fix-git__X", "fix-git__X", result, None, 1764000000.5)
    assert encode(trial) == GOLDEN[result], "the record changed: bump parse.VERSION"
    assert decode("fix-git__X", GOLDEN[result]) == trial
