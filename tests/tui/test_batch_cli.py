"""The batch contract of DESIGN 7: the real `evaldesk` entry point, its output formats and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.services.remediations.test_dedupe import duplicated_job
from tests.support.harbor_factory import JobBuilder, healthy_job, tree
from tui.cli import main

EXPERIMENT_KEYS = {"id", "source", "path", "state", "state_raw", "model", "benchmark", "score", "trials",
                   "valid_fraction", "error_fraction", "checks", "verdict", "notes",
                   # why the verdict: the check that decided it, the fix it names, what a person decides
                   "reason", "decided_by", "fix", "ask"}
TRIALS_KEYS = {"total", "valid", "errored", "running", "expected", "invalid_errors", "n_rep",
               "max_attempts_per_task", "valid_after_dedupe"}
CHECK_IDS = ["finished", "score", "traces", "valid_count", "duplicates", "error_gate", "model_name",
             "benchmark_name", "stale_rows"]
DEDUPE_KEYS = {"id", "before", "after", "remove", "keep", "copies", "applied", "quarantine", "record"}


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def evaldesk(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script when present, else the same entry point via -m."""
    cmd = ["evaldesk"] if _has_script() else [sys.executable, "-m", "tui.cli"]
    return subprocess.run([*cmd, *argv], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})}, cwd=Path(__file__).resolve().parents[2])


def _has_script() -> bool:
    from shutil import which

    return which("evaldesk") is not None


def no_traceback(err: str) -> None:
    assert "Traceback" not in err, err


# -- audit ----------------------------------------------------------------------------------

def test_audit_json_matches_the_contract_and_exits_0_on_a_healthy_job(tmp_path: Path) -> None:
    d = healthy_job(tmp_path).write()
    p = evaldesk("--batch", "audit", "--format", "json", str(d))
    assert p.returncode == 0, p.stderr
    no_traceback(p.stderr)
    data = json.loads(p.stdout)
    assert set(data) == {"experiments"}
    (e,) = data["experiments"]
    assert set(e) == EXPERIMENT_KEYS
    assert set(e["trials"]) == TRIALS_KEYS
    assert [c["id"] for c in e["checks"]] == CHECK_IDS
    for c in e["checks"]:
        assert set(c) == {"id", "status", "evidence", "action"}
        assert c["status"] in ("pass", "warn", "fail", "skip")
    assert e["id"] == d.name and e["source"] == "harbor" and e["path"] == str(d)
    assert e["state"] == "finished" and e["verdict"] == "finalize"
    assert e["model"] == "hosted_vllm/org/Model-8B" and e["benchmark"] == "terminal_bench_2"
    assert isinstance(e["score"], float) and e["valid_fraction"] == 1.0 and e["error_fraction"] == 0.0
    assert e["trials"]["total"] == 30 and e["trials"]["expected"] == 30 and e["trials"]["n_rep"] == 3


def test_audit_exits_1_on_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = duplicated_job(tmp_path).write()
    code, out, _ = run_main(capsys, "--batch", "audit", "--format", "json", str(d))
    assert code == 1
    assert json.loads(out)["experiments"][0]["verdict"] == "dedupe"


def test_a_read_only_command_leaves_early_with_all_its_output_and_its_code(tmp_path: Path) -> None:
    # the script skips the interpreter's teardown after list, audit and trials: what they print
    # must still arrive whole, and the exit code must be the command's
    d = duplicated_job(tmp_path).write()
    p = evaldesk("--batch", "audit", "--format", "json", str(d))
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["experiments"][0]["verdict"] == "dedupe"
    p = evaldesk("--batch=trials", "--format", "jsonl", str(d))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines and all(json.loads(line)["trial_name"] for line in lines)
    p = evaldesk("--batch", "list", str(tmp_path / "missing"))
    assert p.returncode == 2 and "missing" in p.stderr and not p.stdout


def test_the_entry_point_lists_the_job_early_and_says_what_main_says(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the script lists the job dirs of audit and trials on a second core while it loads
    # (services/harbor/walk.py prelist); main() in process does not: both print the same
    d = duplicated_job(tmp_path).write()
    (d / "elsewhere").symlink_to(tmp_path)
    for cmd in ("audit", "trials"):
        p = evaldesk("--batch", cmd, "--format", "json", "--no-cache", str(d))
        code, out, _ = run_main(capsys, "--batch", cmd, "--format", "json", "--no-cache", str(d))
        assert p.returncode == code, p.stderr
        assert json.loads(p.stdout) == json.loads(out), cmd
        if cmd == "audit":  # (the symlink's note comes from the listing)
            assert "outside the job dir" in p.stdout


def test_json_output_does_not_load_rich(tmp_path: Path) -> None:
    # rich costs every batch run ~15 ms to import; only table output needs it
    d = healthy_job(tmp_path, "terminal_bench_2_a_2026-01-01__00-00-00", n_tasks=3, n_rep=1).write()
    probe = ("import sys; from tui.cli import main; main(sys.argv[1:]); "
             "sys.stderr.write('rich loaded' if 'rich' in sys.modules else 'no rich')")
    for cmd in ("audit", "trials", "list"):
        p = subprocess.run([sys.executable, "-c", probe, "--batch", cmd, "--format", "json", str(d)],
                           capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
        assert p.stderr.endswith("no rich"), (cmd, p.stderr)
        json.loads(p.stdout)


def test_a_reader_that_leaves_early_ends_the_command_quietly_with_141(tmp_path: Path) -> None:
    # `evaldesk --batch trials … | head`: more output than a pipe holds, and a reader that stops
    main(["demo", str(tmp_path / "demo")])
    cmd = ["evaldesk"] if _has_script() else [sys.executable, "-m", "tui.cli"]
    proc = subprocess.Popen([*cmd, "--batch", "trials", "--format", "jsonl", str(tmp_path / "demo")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(proc.stdout.readline())["trial_name"]
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert err == "", err  # no "Broken pipe", no traceback, no "Exception ignored"


def test_version_goes_to_stdout() -> None:
    p = evaldesk("--version")
    assert p.returncode == 0 and p.stdout.startswith("evaldesk ") and p.stderr == ""


@pytest.mark.parametrize("fmt", ["table", "json", "jsonl"])
def test_every_command_speaks_every_format(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    healthy_job(tmp_path, "terminal_bench_2_a_2026-01-01__00-00-00", n_tasks=3, n_rep=1).write()
    duplicated_job(tmp_path).write()
    for cmd in ("list", "audit", "trials", "dedupe"):
        code, out, err = run_main(capsys, "--batch", cmd, "--format", fmt, str(tmp_path))
        no_traceback(err)
        assert code in (0, 1), (cmd, err)
        assert out.strip(), cmd
        if fmt == "json":
            json.loads(out)
        elif fmt == "jsonl":
            for line in out.splitlines():
                json.loads(line)
        else:
            assert not out.lstrip().startswith("{")
    code, out, _ = run_main(capsys, "--batch", "list", "--format", "jsonl", str(tmp_path))
    rows = [json.loads(x) for x in out.splitlines()]
    assert sorted(r["verdict"] for r in rows) == ["dedupe", "finalize"]
    assert code == 1


def test_audit_table_shows_checks_and_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = duplicated_job(tmp_path).write()
    code, out, _ = run_main(capsys, "--batch", "audit", "--format", "table", str(d))
    assert code == 1
    assert "DEDUPE" in out and "No duplicates" in out and "Error gate" in out


def test_trials_filters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = JobBuilder(tmp_path, n_attempts=1)
    job.add("ok", 1.0)
    job.add("daytona", None, "DaytonaError")
    job.add("vnc", None, "VerificationNotCompletedError")
    job.add("live", running=True)
    d = job.write()
    code, out, _ = run_main(capsys, "--batch", "trials", "--format", "json", str(d))
    assert code == 0
    trials = json.loads(out)["trials"]
    assert len(trials) == 4 and {t["experiment"] for t in trials} == {d.name}
    _, out, _ = run_main(capsys, "--batch", "trials", "--format", "jsonl", "--status", "errored", str(d))
    assert sorted(json.loads(x)["task_name"] for x in out.splitlines()) == ["daytona", "vnc"]
    _, out, _ = run_main(capsys, "--batch", "trials", "--format", "json", "--exception", "DaytonaError", str(d))
    assert [t["task_name"] for t in json.loads(out)["trials"]] == ["daytona"]
    _, out, _ = run_main(capsys, "--batch", "trials", "--format", "json", "--status", "running", str(d))
    assert [t["task_name"] for t in json.loads(out)["trials"]] == ["live"]


# -- dedupe and undo ------------------------------------------------------------------------

def test_dedupe_dry_run_apply_and_undo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = duplicated_job(tmp_path).write()
    original = tree(d)
    code, out, _ = run_main(capsys, "--batch", "dedupe", "--format", "json", str(d))
    [plan] = json.loads(out)["plans"]
    assert set(plan) == DEDUPE_KEYS
    assert code == 1 and plan["applied"] is False and plan["quarantine"] is None
    assert plan["before"] == 12 and plan["after"] == 8 and len(plan["remove"]) == 4 and len(plan["copies"]) == 2
    assert tree(d) == original

    code, out, _ = run_main(capsys, "--batch", "dedupe", "--apply", "--format", "json", str(d))
    [done] = json.loads(out)["plans"]
    assert code == 0 and done["applied"] is True and done["quarantine"].startswith(str(d))
    assert all(not (d / r).exists() for r in done["remove"] + done["copies"])

    code, out, _ = run_main(capsys, "--batch", "dedupe", "--format", "json", str(d))
    [again] = json.loads(out)["plans"]
    assert code == 0 and again["before"] == again["after"] == 8 and again["remove"] == []

    code, out, _ = run_main(capsys, "--batch", "undo", "--format", "json", str(d))
    assert code == 0 and len(json.loads(out)["restored"]) == 7  # 6 dirs and the aggregate
    assert tree(d) == original
    code, out, _ = run_main(capsys, "--batch", "undo", "--format", "table", str(d))
    assert code == 0 and "nothing to undo" in out

    from services.core.journal import Journal

    assert [e.action for e in Journal().entries()] == ["dedupe:begin", "dedupe:apply", "dedupe:undo"]


def test_read_only_refuses_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = duplicated_job(tmp_path).write()
    before = tree(d)
    code, out, err = run_main(capsys, "--batch", "dedupe", "--apply", "--read-only", str(d))
    assert code == 2 and "read-only" in err.lower() and out == ""
    assert len(err.strip().splitlines()) == 1
    code, _, err = run_main(capsys, "--batch", "undo", "--read-only", str(d))
    assert code == 2 and "read-only" in err.lower()
    assert tree(d) == before


def test_read_only_from_the_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    d = duplicated_job(tmp_path).write()
    monkeypatch.setenv("EVALDESK_READ_ONLY", "true")
    code, _, err = run_main(capsys, "--batch", "dedupe", "--apply", str(d))
    # the refusal names where read-only came from
    assert code == 2 and "read-only mode is on (evaldesk_read_only in the environment)" in err.lower()
    cfg = tmp_path / "config.toml"
    cfg.write_text("read_only = true\n")
    monkeypatch.delenv("EVALDESK_READ_ONLY")
    code, _, err = run_main(capsys, "--config", str(cfg), "--batch", "dedupe", "--apply", str(d))
    assert code == 2 and f"(read_only = true in {cfg})" in err
    code, _, err = run_main(capsys, "--read-only", "--batch", "dedupe", "--apply", str(d))
    assert code == 2 and "(--read-only)" in err


def test_dedupe_refuses_a_running_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = duplicated_job(tmp_path, finished=False)
    job.add("task-009", running=True)
    d = job.write()
    before = tree(d)
    code, _, err = run_main(capsys, "--batch", "dedupe", "--apply", "--format", "json", str(d))
    assert code == 1 and "still running" in err
    no_traceback(err)
    assert tree(d) == before


# -- progress -------------------------------------------------------------------------------

def test_progress_json_lines_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = healthy_job(tmp_path).write()
    code, out, err = run_main(capsys, "--batch", "audit", "--format", "json", "--progress", "json", str(d))
    assert code == 0
    json.loads(out)  # stdout holds only the result
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines
    for line in lines:
        prefix, _, payload = line.partition("=")
        assert prefix == "__EVALDESK_PROGRESS__"
        msg = json.loads(payload)
        assert set(msg) == {"done", "total", "message"}
    code, _, err = run_main(capsys, "--batch", "audit", "--format", "json", "--progress", "none", str(d))
    assert err == ""


# -- usage errors: exit 2, one line, no traceback -------------------------------------------

def test_missing_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    p = evaldesk("--batch", "audit", str(tmp_path / "no-such-dir"))
    assert p.returncode == 2
    assert p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "no-such-dir" in p.stderr
    no_traceback(p.stderr)


@pytest.mark.parametrize("argv", [
    ["--batch", "audit", "--bogus", "x"],
    ["--batch", "explode", "x"],
    ["--batch", "audit", "--format", "yaml", "x"],
    ["--batch", "trials", "--status", "maybe", "x"],
])
def test_bad_flags_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    _, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1
    no_traceback(err)


def test_unknown_config_key_names_key_and_file(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('read_only = false\ncolour = "blue"\n')
    d = healthy_job(tmp_path / "jobs", n_tasks=2, n_rep=1).write()
    p = evaldesk("--config", str(cfg), "--batch", "audit", str(d))
    assert p.returncode == 2
    line, = p.stderr.strip().splitlines()
    assert "colour" in line and str(cfg) in line
    no_traceback(p.stderr)


def test_file_instead_of_dir_and_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "file.txt"
    f.write_text("x")
    code, out, err = run_main(capsys, "--batch", "list", str(f))
    assert code == 2 and out == "" and "not a directory" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run_main(capsys, "--batch", "audit", str(empty))
    assert code == 2 and "no Harbor job dir, AISBench task root" in err and "Rock" in err and "csbench" in err


def test_batch_without_source_or_config(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "--batch", "audit")
    assert code == 2 and "needs a SOURCE" in err


def test_sources_from_the_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = healthy_job(tmp_path / "jobs", n_tasks=2, n_rep=1).write()
    cfg_dir = Path(os.environ["XDG_CONFIG_HOME"]) / "evaldesk"
    cfg_dir.mkdir(parents=True)
    (cfg_dir / "config.toml").write_text(f'[[sources]]\npath = "{d}"\n')
    code, out, _ = run_main(capsys, "--batch", "list", "--format", "json")
    assert code == 0 and [e["id"] for e in json.loads(out)["experiments"]] == [d.name]


# -- the demo -------------------------------------------------------------------------------

def test_demo_then_audit_gives_the_expected_verdicts(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    p = evaldesk("demo", str(demo))
    assert p.returncode == 0, p.stderr
    p = evaldesk("--batch", "audit", "--format", "json", str(demo))
    assert p.returncode == 1, p.stderr
    verdicts: dict[str, Any] = {e["id"]: e["verdict"] for e in json.loads(p.stdout)["experiments"]
                                if e["source"] in ("harbor", "csbench", "rock")}  # more backends' demo data sits beside
    expect = {
        "dev_set_v2": "dedupe",
        # the demo folder's baselines/ is read as the console reads it: the alignment fails, a person decides
        "OpenThinker-Agent-8B": "investigate",
        "Qwen3-32B": "resume",
        "SERA-14B": "investigate",  # none of its errors is one Harbor retries: it asks which to re-run
        "1774950145766573": "rerun",
        "swebench": "wait",
        "camp-5e1f0c2a": "teardown",  # the csbench campaign: a mock on the cloud, not torn down (it bills)
        "exp-7f3a9c21": "retry",  # the Rock regression run: errors past the gate, retry them
    }
    assert len(verdicts) == 8
    for needle, verdict in expect.items():
        (job_id,) = [k for k in verdicts if needle in k]
        assert verdicts[job_id] == verdict, (job_id, verdicts[job_id])
