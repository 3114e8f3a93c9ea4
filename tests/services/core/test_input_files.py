"""Every file evaldesk is handed goes through one bounded reader: a fifo as the config, as a
baseline, inside the baselines dir or as an AISBench task table answers at once with a clear
error (each under a 60 s timeout, through the real entry point where there is one); bombs
(nested 200k deep, a deep TOML, bytes that are not UTF-8) are errors, not tracebacks; and a
config value of the wrong type is refused rather than converted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from services.aisbench.table import TableError, TaskTable
from services.core.input_files import InputFileError, read_bytes, read_json, read_toml
from services.csbench.formats import parse_campaign, parse_record
from tests.support.harbor_factory import JobBuilder, tasks
from tests.support.writes import ROOT, evaldesk_cmd


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([*evaldesk_cmd(), "--batch", *argv], capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert "Traceback" not in p.stderr, p.stderr
    return p


@pytest.fixture
def job(tmp_path: Path) -> Path:
    b = JobBuilder(tmp_path / "jobs", n_attempts=1)
    for t in tasks(2):
        b.add(t, 1.0)
    return b.write()


def test_a_fifo_as_the_config_is_refused_at_once(tmp_path: Path, job: Path) -> None:
    p = cli("audit", "--config", str(fifo(tmp_path / "config.toml")), str(job))
    assert p.returncode == 2 and "not a regular file (a fifo)" in p.stderr, p.stderr


def test_a_fifo_as_the_baseline_is_refused_at_once(tmp_path: Path, job: Path) -> None:
    p = cli("audit", "--baseline", str(fifo(tmp_path / "b.json")), str(job))
    assert p.returncode == 2 and "not a regular file (a fifo)" in p.stderr, p.stderr


def test_a_fifo_in_the_baselines_dir_is_one_error_line(tmp_path: Path, job: Path) -> None:
    d = tmp_path / "baselines"
    d.mkdir()
    fifo(d / "stuck.json")
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'baselines_dir = "{d}"\n')
    p = cli("audit", "--config", str(cfg), "--format", "json", str(job))
    assert "stuck.json: not a regular file (a fifo)" in p.stderr, p.stderr


@pytest.mark.parametrize(("body", "said"), [
    (b"a = " + b"[" * 50_000 + b"]" * 50_000 + b"\n", "nested deeper than"),
    (b'read_only = true\nname = "\xff\xfe"\n', "not UTF-8 text"),
    (b'read_only = "yes"\n', "key 'read_only': Input should be a valid boolean"),
    (b'[policy]\nerror_fraction_max = "0.1"\n', "key 'policy.error_fraction_max': Input should be a valid number"),
])
def test_a_config_bomb_or_a_wrong_type_is_an_error(tmp_path: Path, job: Path, body: bytes, said: str) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_bytes(body)
    p = cli("audit", "--config", str(cfg), str(job))
    assert p.returncode == 2 and said in p.stderr, p.stderr


def test_an_aisbench_task_table_that_is_a_fifo_is_a_table_error(tmp_path: Path) -> None:
    table = TaskTable(fifo(tmp_path / ".evaldesk-tasks.json"), "here", str(tmp_path))
    with pytest.raises(TableError, match="not a regular file"):
        table.rows()


def test_csbench_records_and_campaigns_nested_200k_deep_are_not_json_to_it() -> None:
    bomb = b'{"a":' * 200_000 + b"1" + b"}" * 200_000
    record, why = parse_record(bomb)
    assert record is None and why is not None and "nested deeper than" in why
    camp, why = parse_campaign(b"[" * 200_000 + b"]" * 200_000)
    assert camp is None and why is not None and "nested deeper than" in why


def test_the_reader_itself(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b"0," * 1000 + b"0]")
    with pytest.raises(InputFileError, match="over the 100 byte limit"):
        read_bytes(big, max_bytes=100)
    with pytest.raises(InputFileError, match="not a regular file"):
        read_bytes(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "absent")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 300 + "]" * 300)
    with pytest.raises(InputFileError, match="nested deeper than 200"):
        read_json(deep)
    assert read_json(big)[:2] == [0, 0]
    toml = tmp_path / "c.toml"
    toml.write_text("x = 1\n")
    assert read_toml(toml) == {"x": 1}


@pytest.mark.parametrize("kind", ["fifo", "empty object"])
def test_a_csbench_campaign_that_is_a_fifo_or_empty_is_named_and_not_finalized(tmp_path: Path, kind: str) -> None:
    import json

    res = tmp_path / "res"
    (res / "campaigns").mkdir(parents=True)
    camp = res / "campaigns" / "x.json"
    if kind == "fifo":
        fifo(camp)
    else:
        camp.write_text("{}")
    p = cli("audit", "--format", "json", str(res))
    (exp,) = json.loads(p.stdout)["experiments"]
    assert exp["verdict"] == "investigate"
    said = "not a regular file" if kind == "fifo" else "not a csbench campaign file"
    assert f"campaigns/x.json: {said}" in exp["checks"][0]["evidence"]
