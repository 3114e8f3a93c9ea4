"""Reading csbench's outputs never raises on bad content: it says what was wrong."""

from __future__ import annotations

import pytest

from services.csbench.formats import OutputError, parse_campaign, parse_record, parse_status, parse_teardown


def test_status_line() -> None:
    st = parse_status('warning: something\n{"counts": {"completed": 2, "failed": 1}, "current_task": "suite:x", '
                      '"heartbeat_age_s": 3.5, "stale": false, "done": "FAILED"}\n')
    assert st.counts == {"completed": 2, "failed": 1} and st.total == 3 and st.done == "FAILED"
    empty = parse_status('{"counts": {}, "current_task": null, "heartbeat_age_s": null, "stale": false, '
                         '"done": null}')
    assert empty.total == 0 and empty.done is None
    with pytest.raises(OutputError, match="no JSON line"):
        parse_status("Traceback (most recent call last):\n  ...")
    with pytest.raises(OutputError, match="unreadable"):
        parse_status('{"counts": "many", "done": "MAYBE"}')


def test_teardown_prints_a_python_dict() -> None:
    td = parse_teardown("{'destroyed': True, 'residual_deleted': ['ar-1']}\n")
    assert td is not None and td.destroyed is True and td.residual_deleted == ["ar-1"]
    assert parse_teardown('{"destroyed": false}') is not None  # JSON is a Python literal too
    assert parse_teardown("terraform: error") is None
    assert parse_teardown("{'destroyed': __import__('os')}") is None  # never evaluated


@pytest.mark.parametrize("raw", [b"", b"[]", b"\xff", b'{"schema_version": "0.4"}', b"{" * 10])
def test_records_and_campaigns_that_are_not(raw: bytes) -> None:
    rec, why = parse_record(raw)
    assert rec is None and why
    camp, why = parse_campaign(raw)
    assert camp is None and why


def test_a_record_with_odd_values() -> None:
    rec, why = parse_record(b'{"schema_version": "0.4", "identity": {"task_id": "suite:gsm8k"}, "status": "completed",'
                            b' "measurements": {"gsm8k.accuracy": {"value": "NaN", "unit": "ratio", "official": true},'
                            b' "x": {"value": true}}, "observations": {"manifest": {"a": 3}}}')
    assert why is None and rec is not None
    assert rec.measurements["gsm8k.accuracy"].value is None and rec.measurements["x"].value is None
    assert rec.observations.manifest == {} and rec.suite_id == "gsm8k" and rec.primary() is None
