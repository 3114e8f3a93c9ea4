"""The parse cache's record of a trial is versioned (parse.VERSION): these golden records say what
version 1 holds. A change to what a file becomes, or to the record's layout, fails here until the
version is bumped and the goldens written again — so no cache keeps records of another layout."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.models import TrialStatus
from services.harbor import parse
from services.harbor.parse import VERSION, decode, encode, parse_trial


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as m:  # (hypothesis runs a test many times in one fixture)
        yield m

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


# -- the reading of only the fields the parser reads ----------------------------------------------

_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 63), 2 ** 64 - 1),
                  st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
                  st.sampled_from(["2026-11-01T00:00:01+00:00", "2026-13-01", "AgentTimeoutError", "reward"]),
                  st.just([]), st.just({}), st.just([1]), st.just({"a": 1}))


def _object(fields: dict[str, st.SearchStrategy[object]]) -> st.SearchStrategy[object]:
    # an object with some of its fields, or (rarely) a value of the wrong shape in its place
    return st.one_of(st.fixed_dictionaries({}, optional=fields), _LEAF)


_REWARDS = st.one_of(st.dictionaries(st.sampled_from(["reward", "acc", "r2"]),
                                     st.one_of(st.floats(allow_nan=False), st.integers(-3, 3), st.booleans(),
                                               st.none(), st.text(max_size=2)), max_size=3), _LEAF)
_VERIFIER = _object({"rewards": _REWARDS})
_EXCEPTION = _object({"exception_type": _LEAF, "exception_message": _LEAF, "exception_traceback": _LEAF})
_USAGE = _object({k: _LEAF for k in ("n_input_tokens", "n_cache_tokens", "n_output_tokens", "cost_usd",
                                       "rollout_details")})
_AGENT = _object({"name": _LEAF, "version": _LEAF, "model_info": _object({"name": _LEAF, "provider": _LEAF})})
_STEP = _object({"verifier_result": _VERIFIER, "exception_info": _EXCEPTION, "agent_result": _USAGE})
_RESULT = st.one_of(st.fixed_dictionaries({}, optional={
    **{k: _LEAF for k in ("task_name", "trial_name", "source", "started_at", "finished_at", "id")},
    "config": _object({"agent": _object({"kwargs": _LEAF})}),
    "verifier_result": _VERIFIER, "exception_info": _EXCEPTION, "agent_result": _USAGE, "agent_info": _AGENT,
    "step_results": st.one_of(st.lists(_STEP, max_size=3), _LEAF)}), _LEAF)
_CONFIG = st.sampled_from([None, b'{"trial_name": "c__B", "task": {"name": "org/alpha"}, '
                                 b'"agent": {"name": "ag", "model_name": "m2"}}', b'{"agent": 5}', b"{"])


@settings(max_examples=600, deadline=None)
@given(doc=_RESULT, config=_CONFIG)
def test_reading_only_the_parsers_fields_gives_the_trial_of_the_whole_document(
        doc: object, config: bytes | None, monkeypatch_module: pytest.MonkeyPatch) -> None:
    data = json.dumps(doc).encode()
    pruned = parse_trial("t__AAAAAAA", "t__AAAAAAA", data, config, 1.0)
    with monkeypatch_module.context() as m:
        m.setattr(parse, "read_doc", parse.read_whole)
        whole = parse_trial("t__AAAAAAA", "t__AAAAAAA", data, config, 1.0)
    assert pruned == whole


def test_a_token_count_past_64_bits_is_read_exactly() -> None:
    data = b'{"verifier_result": {"rewards": {"reward": 1}}, "agent_result": {"n_input_tokens": 123456789012345678901}}'
    assert parse_trial("t__A", "t__A", data, None, None).n_input_tokens == 123456789012345678901


def test_a_big_side_field_is_not_what_the_trial_is_read_from() -> None:
    rollout = {"completion_token_ids": list(range(50_000)), "logprobs": [0.5] * 50_000}
    data = json.dumps({"task_name": "t", "verifier_result": {"rewards": {"reward": 0.0}},
                       "agent_result": {"n_output_tokens": 7, "rollout_details": [rollout]}}).encode()
    t = parse_trial("t__A", "t__A", data, None, None)
    assert (t.status, t.reward, t.n_output_tokens) == (TrialStatus.valid, 0.0, 7)
    doc, odd = parse.read_doc(data, "Result")
    assert (doc.agent_result.n_output_tokens, doc.verifier_result.rewards, odd) == (7, {"reward": 0.0}, [])
    assert not hasattr(doc.agent_result, "rollout_details")


# -- the lenient reading of a document whose fields do not all have their types ------------------

def test_a_field_of_the_wrong_type_is_read_as_absent_and_the_results_own_is_named_first() -> None:
    data = json.dumps({"exception_info": {"exception_type": 5}, "agent_info": "x",
                       "agent_result": {"n_input_tokens": 12}, "task_name": 3}).encode()
    t = parse_trial("t__A", "t__A", data, None, None)
    assert (t.status, t.exception_type, t.n_input_tokens, t.task_name) == (TrialStatus.errored, None, 12, "t")
    assert t.parse_error == "result.json field 'agent_info': not an object"
    inner = json.dumps({"exception_info": {"exception_type": 5}}).encode()
    assert parse_trial("t__A", "t__A", inner, None, None).parse_error == \
        "result.json field 'exception_info.exception_type': not a string"


def test_a_steps_odd_fields_are_passed_over_and_its_good_ones_read() -> None:
    steps = [1, {"verifier_result": "x", "exception_info": {"exception_type": []}},
             {"verifier_result": {"rewards": {"reward": 0.5}}}]
    t = parse_trial("t__A", "t__A", json.dumps({"step_results": steps}).encode(), None, None)
    assert (t.status, t.reward, t.parse_error) == (TrialStatus.valid, 0.5, None)


def test_a_document_of_many_odd_steps_is_read_in_bounded_time() -> None:
    steps = [{"verifier_result": 1, "exception_info": 2, "agent_result": 3}] * 5000
    data = json.dumps({"step_results": steps, "verifier_result": {"rewards": {"reward": 1}}}).encode()
    t = parse_trial("t__A", "t__A", data, None, None)
    assert (t.status, t.reward) == (TrialStatus.valid, 1.0)


def test_the_diagnose_panels_exception_details_read_each_field_leniently() -> None:
    full = b'{"exception_info":{"exception_type":"E","exception_message":"m","exception_traceback":"tb"}}'
    assert parse.exception_details(full) == ("E", "m", "tb")
    odd = b'{"exception_info":{"exception_type":"E","exception_message":7,"exception_traceback":"tb"}}'
    assert parse.exception_details(odd) == ("E", None, "tb")
    for nothing in (None, b"", b"{", b"[1]", b'{"exception_info":"boom"}', b'{"exception_info":null}'):
        assert parse.exception_details(nothing) == (None, None, None)
