"""Hostile names through every batch command: no raw control character on stdout or stderr in
any format, tables show the names escaped, and JSON gives every value back exactly."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.hostile import BYTES_NAME, EXCEPTION, JOB_NAME, MODEL, TRIAL_NAMES, hostile_job, raw_controls
from tui.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def job(tmp_path: Path) -> Path:
    return hostile_job(tmp_path / "jobs")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    if "table" in argv:
        # off a terminal a table is TSV: its tabs separate cells (a tab in a name is shown as \t)
        assert all(len(ln.split("\t")) == len(out.split("\n", 1)[0].split("\t")) for ln in out.splitlines()
                   if "\t" in ln), out
        out = out.replace("\t", " ")
    assert not raw_controls(out), f"raw controls on stdout: {raw_controls(out)!r}"
    assert not raw_controls(err), f"raw controls on stderr: {raw_controls(err)!r}"
    assert "Traceback" not in err
    return code, out, err


def cli(*argv: str, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    """The real entry point in a process of its own: what reaches the pipe, byte for byte."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "tui.cli", *argv], capture_output=True, env=env, timeout=60,
                          cwd=ROOT, **kw)


def assert_clean_bytes(data: bytes) -> str:
    """Valid UTF-8 with no control byte but newline (and TSV's tab), and no C1 control in its UTF-8 form."""
    text = data.decode("utf-8")  # strict: a name's undecodable bytes never leak raw
    assert not raw_controls(text.replace("\t", " ")), raw_controls(text)
    return text


@pytest.mark.parametrize("command", ["list", "audit", "trials", "dedupe"])
@pytest.mark.parametrize("fmt", ["table", "json", "jsonl"])
def test_every_command_and_format_keeps_controls_off_the_terminal(
    job: Path, capsys: pytest.CaptureFixture[str], command: str, fmt: str
) -> None:
    code, out, err = run(capsys, "--batch", command, "--format", fmt, "--progress", "text", str(job.parent))
    assert code in (0, 1), err
    assert "\\x1b" in err, "the progress line names the job, escaped"
    if fmt == "table":
        assert "\\x1b]0;owned-title" in out  # the open OSC is shown, not obeyed
    else:
        docs = [json.loads(line) for line in out.splitlines()] if fmt == "jsonl" else [json.loads(out)]
        assert JOB_NAME in json.dumps(docs, ensure_ascii=False) or _values(docs, JOB_NAME)


def _values(doc: Any, wanted: str) -> bool:
    if isinstance(doc, str):
        return doc == wanted
    if isinstance(doc, dict):
        return any(_values(v, wanted) for v in doc.values())
    if isinstance(doc, list):
        return any(_values(v, wanted) for v in doc)
    return False


def test_json_gives_every_hostile_value_back_exactly(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "--batch", "list", "--format", "json", str(job.parent))
    (row,) = json.loads(out)["experiments"]
    assert row["id"] == JOB_NAME and row["model"] == MODEL and row["path"] == str(job)

    _, out, _ = run(capsys, "--batch", "trials", "--format", "json", str(job))
    trials = json.loads(out)["trials"]
    assert sorted(t["path"] for t in trials) == sorted(TRIAL_NAMES)
    # the name that is not UTF-8 comes back as the same bytes
    assert os.fsencode(next(t["path"] for t in trials if t["path"] == BYTES_NAME)) == b"task-bytes__\xff\xferaw"
    assert {t["exception_type"] for t in trials} == {None, EXCEPTION}

    _, out, _ = run(capsys, "--batch", "audit", "--format", "json", str(job))
    (exp,) = json.loads(out)["experiments"]
    gate = next(c for c in exp["checks"] if c["id"] == "error_gate")
    assert EXCEPTION in gate["evidence"]

    _, out, _ = run(capsys, "--batch", "dedupe", "--format", "json", str(job))
    (plan,) = json.loads(out)["plans"]
    assert plan["remove"] == [BYTES_NAME] and TRIAL_NAMES[1] in plan["keep"]


def test_tables_show_names_escaped_one_row_each(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "--batch", "trials", "--format", "table", str(job))
    assert "task-nl__line1⏎line2" in out  # a newline in a name does not split its row
    assert "task-esc__\\x1b[2Jclear" in out and "task-cmd__$(touch PWNED)`id`" in out
    assert "task-bidi__\\u202eexe.txt" in out
    assert "task-markup__[red]x[bold]" in out and "task-markup[/bold][/]" in out  # as written, not markup
    assert "Boom\\x1b[2J\\x9d0;t\\x07Error" in out


def test_dedupe_apply_and_undo_with_hostile_names(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--batch", "dedupe", "--apply", "--format", "table", "--progress", "text", str(job))
    assert code == 0, err
    assert "move task-bytes__\\xff\\xferaw" in out and "applied: record" in out
    assert not (job / BYTES_NAME).exists()
    code, out, err = run(capsys, "--batch", "undo", "--format", "table", str(job))
    assert code == 0, err
    assert (job / BYTES_NAME).is_dir()
    code, out, err = run(capsys, "--batch", "dedupe", "--apply", "--format", "json", str(job))
    assert json.loads(out)["plans"][0]["applied"] is True
    code, out, err = run(capsys, "--batch", "undo", "--format", "json", str(job))
    assert json.loads(out)["target"] == str(job)


def test_the_bytes_on_the_pipe_are_clean(job: Path) -> None:
    for argv in (["--batch", "trials", "--format", "table", "--progress", "text"],
                 ["--batch", "audit", "--format", "json", "--progress", "json"],
                 ["--batch", "dedupe", "--format", "jsonl", "--progress", "text"]):
        p = cli(*argv, str(job))
        assert p.returncode in (0, 1), p.stderr
        assert_clean_bytes(p.stdout)
        err = assert_clean_bytes(p.stderr)
        assert "Traceback" not in err
    p = cli("--batch", "audit", "--format", "json", "--progress", "json", str(job))
    for line in p.stderr.decode().splitlines():
        payload = json.loads(line.split("=", 1)[1])
        assert set(payload) == {"done", "total", "message"}


def test_monitor_streams_clean_jsonl_with_the_exact_names(job: Path) -> None:
    p = cli("--batch", "monitor", "--until", "1", "--interval", "0", str(job))
    assert p.returncode in (0, 1), p.stderr
    lines = assert_clean_bytes(p.stdout).splitlines()
    snapshot = json.loads(lines[0])
    assert snapshot["type"] == "snapshot" and snapshot["id"] == JOB_NAME
    assert_clean_bytes(p.stderr)


def test_errors_naming_a_hostile_path_are_one_clean_line(tmp_path: Path) -> None:
    missing = tmp_path / "gone\x1b]0;t\n\udcff"
    p = cli("--batch", "list", os.fsencode(str(missing)).decode("utf-8", "surrogateescape"))
    assert p.returncode == 2
    err = assert_clean_bytes(p.stderr)
    assert len(err.strip().splitlines()) == 1 and "gone\\x1b]0;t⏎\\xff" in err


# -- Ctrl+C ---------------------------------------------------------------------------------

def _interrupt_after_delay(argv: list[str], seconds: float) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(seconds)
    assert proc.poll() is None, "it should still be waiting on the host"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _interrupt_after(argv: list[str], ready: bytes, stream: str) -> subprocess.CompletedProcess[bytes]:
    """Start the command, wait until `ready` shows on `stream`, then Ctrl+C (SIGINT) it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
        # a test runner started in the background may ignore SIGINT; the command must not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    pipe = proc.stdout if stream == "stdout" else proc.stderr
    assert pipe is not None
    seen = b""
    deadline = time.monotonic() + 30
    while ready not in seen:
        assert time.monotonic() < deadline, seen
        chunk = pipe.readline()
        assert chunk, f"exited before {ready!r}: {seen!r}"
        seen += chunk
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       out if stream == "stderr" else seen + out,
                                       seen + err if stream == "stderr" else err)


@pytest.fixture(scope="module")
def big_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.harbor_factory import JobBuilder, tasks

    job = JobBuilder(tmp_path_factory.mktemp("big"), "big_2026-03-02__09-00-00", n_attempts=1, lean=True)
    for t in tasks(2500):
        job.add(t, 1.0)
    return job.write()


@pytest.fixture
def big_job(big_template: Path, tmp_path: Path) -> Path:
    """Enough trials that a cold scan (a new path: nothing cached) is still reading when Ctrl+C comes."""
    import shutil

    return Path(shutil.copytree(big_template, tmp_path / big_template.name))


@pytest.fixture
def silent_host() -> Iterator[int]:
    """A TCP port that accepts and never says a word: an SSH source waits there until stopped."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield int(server.getsockname()[1])
    stop.set()
    t.join()
    for conn in held:
        conn.close()
    server.close()


def _assert_interrupted(p: subprocess.CompletedProcess[bytes]) -> None:
    err = p.stderr.decode()
    assert p.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.splitlines()[-1] == "evaldesk: interrupted (Ctrl+C)"
    assert err.count("interrupted") == 1
    assert p.stdout == b"", "nothing half-written on stdout"


@pytest.mark.parametrize("command", ["audit", "dedupe"])
def test_ctrl_c_while_a_scan_thread_reads_is_one_line_and_exit_130(big_job: Path, command: str) -> None:
    # the local scan runs in a thread that cannot be cancelled: the exit must not wait for it
    _assert_interrupted(_interrupt_after(
        ["--batch", command, "--format", "json", "--progress", "text", str(big_job)], b"evaldesk: reading", "stderr"))


@pytest.mark.parametrize("command", ["list", "trials", "undo", "dedupe"])
def test_ctrl_c_while_waiting_on_a_host_is_one_line_and_exit_130(silent_host: int, command: str) -> None:
    url = f"ssh://127.0.0.1:{silent_host}/jobs"
    argv = ["--batch", command, "--format", "table", "--progress", "text", url]
    ready = b"" if command == "undo" else b"evaldesk: scanning"
    if command == "undo":
        _assert_interrupted(_interrupt_after_delay(argv, 1.5))
    else:
        _assert_interrupted(_interrupt_after(argv, ready, "stderr"))


def test_ctrl_c_in_monitor_is_one_line_and_exit_130(job: Path) -> None:
    # the job is finished, so `--until done` would leave right after its first snapshot and the
    # Ctrl+C could land in the interpreter's own exit; two polls keep it waiting 30 s for the second
    p = _interrupt_after(["--batch", "monitor", "--interval", "30", "--until", "2", str(job)],
                         b'"type":"snapshot"', "stdout")
    err = p.stderr.decode()
    assert p.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == ["evaldesk: interrupted (Ctrl+C)"]
    # every line written before the interrupt is whole JSON
    for line in p.stdout.decode().splitlines():
        json.loads(line)


def test_a_job_dir_that_is_not_utf8_is_deduped_journaled_and_undone(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from datetime import timedelta

    from services.core.journal import Journal
    from tests.support.harbor_factory import T0, JobBuilder

    builder = JobBuilder(tmp_path / "jobs", "placeholder_2026-03-02__09-00-00", n_attempts=1)
    builder.add("t", 1.0, name="t__a")
    builder.add("t", 0.0, name="t__b", started=T0 + timedelta(hours=1))
    job = Path(os.fsdecode(os.fsencode(str(tmp_path / "jobs")) + b"/job\xff_2026-03-02__09-00-00"))
    os.rename(builder.write(), job)

    code, out, err = run(capsys, "--batch", "dedupe", "--apply", "--format", "json", str(job))
    assert code == 0, err
    (plan,) = json.loads(out)["plans"]
    assert plan["applied"] is True and plan["id"] == job.name and not (job / "t__b").exists()
    entries = Journal().entries()  # the journal took the path as it is, and reads it back exactly
    assert [e.target for e in entries] == [str(job)] * len(entries) and entries

    code, out, err = run(capsys, "--batch", "undo", "--format", "table", str(job))
    assert code == 0, err
    assert (job / "t__b").is_dir() and out.startswith("undid dedupe")
