"""The committed fixtures (tests/fixtures/aisbench, made by the real ais_bench) parse exactly."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from services.aisbench.formats import (
    DatasetResult,
    PerfCommon,
    PerfTable,
    Quantity,
    count_predictions,
    log_error,
    parse_summary_csv,
    summary_table,
    ts_of_dir,
)

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "aisbench" / "task_root"


def run_dir(task: str) -> Path:
    runs = sorted((ROOT / task / "outputs").iterdir())
    assert len(runs) == 1 and ts_of_dir(runs[0].name) is not None, runs
    return runs[0]


def test_accuracy_results_predictions_and_summary() -> None:
    run = run_dir("gsm8k-accuracy")
    result = DatasetResult.model_validate_json((run / "results/fake-model/gsm8k.json").read_bytes())
    assert result.accuracy == 50.0
    assert result.score == ("accuracy", 50.0)
    assert result.metrics == {"accuracy": 50.0}
    assert not result.is_swebench
    preds = count_predictions((run / "predictions/fake-model/gsm8k.jsonl").read_bytes())
    assert (preds.total, preds.failed, preds.empty, preds.unreadable) == (4, 0, 0, 0)
    [row] = parse_summary_csv((run / f"summary/summary_{run.name}.csv").read_text())
    assert (row.dataset, row.metric, row.mode, row.values) == ("gsm8k", "accuracy", "gen", {"fake-model": "50.00"})
    table = summary_table((run / f"summary/summary_{run.name}.txt").read_text())
    assert table.splitlines()[0].split() == ["dataset", "version", "metric", "mode", "fake-model"]
    assert table.splitlines()[-1].split()[-1] == "50.00"
    assert not {"md", "txt", "csv"} - {p.suffix[1:] for p in (run / "summary").iterdir()}


def test_perf_json_and_csv_exactly() -> None:
    perf_dir = run_dir("perf-gsm8k") / "performances/fake-model"
    raw = json.loads((perf_dir / "gsm8k.json").read_text())
    common = PerfCommon.parse(raw)
    assert set(common.metrics) == set(raw)
    for metric, stages in raw.items():
        for stage, value in stages.items():
            q = common.get(metric, stage)
            assert q is not None and q.raw == str(value)
            number = value if isinstance(value, int | float) else float(str(value).split()[0])
            assert q.value == pytest.approx(number)
    assert common.get("Total Requests") == Quantity(value=4.0, unit="", raw="4")
    assert common.get("Failed Requests").value == 0  # type: ignore[union-attr]
    assert common.get("Request Throughput").unit == "req/s"  # type: ignore[union-attr]
    assert common.get("Benchmark Duration").unit == "ms"  # type: ignore[union-attr]
    text = (perf_dir / "gsm8k.csv").read_text()
    table = PerfTable.parse(text)
    rows = list(csv.reader(text.splitlines()))
    header = rows[0]
    assert header == ["Performance Parameters", "Stage", "Average", "Min", "Max", "Median", "P75", "P90", "P99", "N"]
    assert [r.metric for r in table.rows] == [r[0] for r in rows[1:]]
    assert [r.metric for r in table.rows][:4] == ["E2EL", "TTFT", "TPOT", "ITL"]
    for parsed, raw_row in zip(table.rows, rows[1:], strict=True):
        assert parsed.n == 4
        for col, cell in zip(header[2:9], raw_row[2:9], strict=True):
            assert parsed.stats[col].value == pytest.approx(float(cell.split()[0]))
            assert parsed.stats[col].unit == (cell.split()[1] if " " in cell else "")
    assert table.row("TTFT").stats["P99"].unit == "ms"  # type: ignore[union-attr]
    assert not (run_dir("perf-gsm8k") / "summary").exists()  # perf runs write no summary


def test_server_down_run_exits_0_without_a_results_file() -> None:
    task = ROOT / "gsm8k-server-down"
    run = run_dir("gsm8k-server-down")
    assert (task / "exit_code").read_text().strip() == "0"
    assert not (run / "results").exists()
    assert not (run / "predictions").exists()
    err = log_error((run / "logs/infer/fake-model/gsm8k.out").read_text())
    assert err is not None and err.code == "TINFER-RUNTIME-001"
    assert err.message.startswith("warmup failed") and "Cannot connect to host" in err.message
    assert err.traceback is not None and err.traceback.startswith("Traceback (most recent call last)")
    assert "Visit https://" not in err.message
    [row] = parse_summary_csv((run / f"summary/summary_{run.name}.csv").read_text())
    assert row.values == {"fake-model": "-"}


def test_hand_made_swebench_results_have_the_harness_shape() -> None:
    run = run_dir("swe-bench-verified-mini")
    result = DatasetResult.model_validate_json(
        (run / "results/fake-model/swe_bench_verified_mini.json").read_bytes())
    assert result.is_swebench
    assert (result.accuracy, result.resolved_instances, result.total_instances, result.error_instances) == (
        40.0, 4, 10, 1)
    assert result.metrics == {"accuracy": 40.0, "submitted_accuracy": 40.0}
    assert (ROOT / "swe-bench-verified-mini" / "HAND-MADE").exists()


def test_the_config_dump_holds_no_key_in_the_fixtures() -> None:
    """AISBench dumps the whole config (API key included) under configs/: the fixtures' key is empty."""
    for dump in ROOT.glob("*/outputs/*/configs/*.py"):
        assert "api_key=''" in dump.read_text() or 'api_key=""' in dump.read_text(), dump


@pytest.mark.parametrize("raw,value,unit", [("42.429 ms", 42.429, "ms"), (4, 4.0, ""), ("94.2751 req/s", 94.2751,
                                            "req/s"), ("1.5e3 token/s", 1500.0, "token/s"), ("n/a", None, "")])
def test_quantities(raw: object, value: float | None, unit: str) -> None:
    q = Quantity.parse(raw)
    assert (q.value, q.unit) == (value, unit)


def test_results_with_odd_values_do_not_break() -> None:
    r = DatasetResult.model_validate({"accuracy": "bad", "pass@1": 12.5, "details": [1]})
    assert r.accuracy is None and r.score == ("pass@1", 12.5)
