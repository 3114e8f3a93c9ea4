"""`--format table` as a person reads it: on a real terminal (a pty, via `script`) it fits the
width, `--wide` keeps everything, off a terminal it is TSV; no cell is ever huge."""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.services.remediations.test_dedupe import duplicated_job
from tests.support.ui_demo import shared_demo
from tui.batch_table import CELL_CAP, Column, print_rows
from widgets.ids import run_labels, trial_label

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
QWEN = "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00"


def on_terminal(cols: int, *argv: str) -> list[str]:
    """evaldesk's stdout on a pty `cols` wide, as lines without colours."""
    if shutil.which("script") is None:
        pytest.skip("script(1) (util-linux) is needed for a pty")
    cmd = shlex.join([sys.executable, "-m", "tui.cli", *argv])
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.run(["script", "-qec", f"stty cols {cols} rows 24; {cmd} 2>/dev/null", "/dev/null"],
                       capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    return [ANSI.sub("", ln).rstrip("\r") for ln in p.stdout.splitlines()]


def piped(*argv: str) -> str:
    p = subprocess.run([sys.executable, "-m", "tui.cli", *argv], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    return p.stdout


def test_list_fits_80_columns_with_labels_that_keep_benchmark_model_and_date(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    demo = shared_demo(tmp_path_factory)
    lines = on_terminal(80, "--batch", "list", "--format", "table", str(demo))
    assert lines and all(len(ln) <= 80 for ln in lines), max(lines, key=len)
    assert any("tb2 Qwen" in ln and "11-19" in ln for ln in lines), lines
    assert any("verdict" in ln and "age" in ln for ln in lines)
    wide = on_terminal(80, "--batch", "list", "--format", "table", "--wide", str(demo))
    assert any(QWEN in ln and "hosted_vllm/laion/Qwen3-32B-agentic" not in ln for ln in wide)
    assert max(len(ln) for ln in wide) > 80


def test_audit_fits_the_terminal_and_off_a_terminal_every_table_is_tsv(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    demo = shared_demo(tmp_path_factory)
    lines = on_terminal(80, "--batch", "audit", "--format", "table", str(demo / QWEN))
    assert all(len(ln) <= 80 for ln in lines) and any("Error gate" in ln for ln in lines)
    out = piped("--batch", "list", "--format", "table", str(demo))
    rows = [ln.split("\t") for ln in out.splitlines()]
    assert rows[0][:4] == ["source", "id", "benchmark", "model"]
    assert len({len(r) for r in rows}) == 1 and QWEN in {r[1] for r in rows}  # whole ids for cut and awk
    audit = [ln.split("\t") for ln in piped("--batch", "audit", "--format", "table", str(demo / QWEN)).splitlines()]
    assert audit[0] == ["experiment", "verdict", "", "check", "evidence", "action"]
    assert any(r[0] == QWEN and r[3] == "Error gate" for r in audit[1:])


def test_journal_table_is_one_summarised_line_per_write(tmp_path: Path) -> None:
    d = duplicated_job(tmp_path).write()
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    p = subprocess.run([sys.executable, "-m", "tui.cli", "--batch", "dedupe", "--apply", str(d)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-m", "tui.cli", "--batch", "journal", "--format", "table"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    lines = p.stdout.splitlines()
    assert lines[0].split("\t")[:3] == ["when", "user", "action"]
    assert 2 <= len(lines) <= 4 and all(len(ln) < 2 * CELL_CAP * 3 for ln in lines)  # begin, apply: no row lists


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_cell_is_longer_than_the_cap_however_long_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    huge = "x" * 10_000_000
    for out in (io.StringIO(), Tty()):
        monkeypatch.setenv("COLUMNS", "80")
        print_rows(out, "t", [Column("a"), Column("b", flexible=True)], [["1", huge], ["2", "\x1b[2J\tok"]],
                   wide=True)
        text = out.getvalue()
        assert max(len(ln) for ln in text.splitlines()) < CELL_CAP + 40
        assert "\\x1b[2J\\tok" in text  # escaped: a tab in a field never splits a TSV row


def test_labels_keep_what_tells_runs_apart_and_trials_keep_their_task() -> None:
    runs = [("terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00", "terminal_bench_2",
             "hosted_vllm/laion/Qwen3-32B-agentic"),
            ("terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__19-15-00", "terminal_bench_2",
             "hosted_vllm/laion/Qwen3-32B-agentic"),
            ("terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00", "terminal_bench_2", "hosted_vllm/laion/SERA-14B"),
            ("hostile_job_with_a_long_name", None, None), ("gsm8k-qwen3-32b", "gsm8k", "Qwen3-32B")]
    labels = run_labels(runs, 30)
    assert labels[2] == "tb2 SERA-14B 11-19"
    assert labels[0].endswith("11-19 09:15")
    assert labels[0] != labels[1] and labels[0].startswith("tb2 Qwen3")
    assert labels[3] == "hostile_job_with_a_long_name" and labels[4] == "gsm8k-qwen3-32b"
    assert all(len(x) <= 30 for x in labels) and all(len(x) <= 16 for x in run_labels(runs, 16))
    assert trial_label("scikit-learn__scikit-learn-26104__xiruUEG", 24) == "scikit-learn-26104__xiru"
    assert "26104" in trial_label("scikit-learn__scikit-learn-26104__xiruUEG", 14)
