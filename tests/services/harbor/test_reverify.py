"""A poll of a live job costs what changed: the job dir is listed once, running trials are stat'ed
every poll, finished ones on a rotation that checks each within the window; `verify_all` checks
them all. Unreadable job dirs and sources exit 2 from batch; foreign names never crash it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from services.core.plain import copy_with
from services.harbor import walk
from services.harbor.scan import HarborScanner
from services.harbor.source import HarborSource
from tests.support.harbor_factory import JobBuilder
from tests.support.no_dac import command

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _live_job(tmp_path: Path, n: int = 30, running: int = 5) -> tuple[JobBuilder, Path]:
    job = JobBuilder(tmp_path / "jobs", "terminal_bench_2_live_2026-01-01__00-00-00", n_attempts=1,
                     finished=False, n_total_trials=n + running)
    for i in range(n):
        job.add(f"task-{i:03d}", 0.0, started=T0 + timedelta(minutes=i))
    for i in range(running):
        job.add(f"live-{i}", running=True)
    return job, job.write()


def _rewrite(result: Path, reward: float) -> None:
    data = json.loads(result.read_text())
    data["verifier_result"] = {"rewards": {"reward": reward}}
    result.write_text(json.dumps(data))


def test_running_trials_are_checked_every_poll_finished_ones_on_a_rotation(tmp_path: Path) -> None:
    job, d = _live_job(tmp_path)
    clock = [1000.0]
    scanner = HarborScanner(walk.LocalWalkFS(), str(d), HarborSource(d).policy, verify_window_s=60)
    import services.harbor.scan as scan_mod

    real = scan_mod.time.monotonic
    scan_mod.time.monotonic = lambda: clock[0]  # type: ignore[assignment]
    try:
        exp, st = scanner.scan()
        assert st["verified"] == 35 and exp.counts.running == 5
        # a running trial finishes: seen on the very next poll, without stat'ing the finished ones
        live = next(t for t in job.trials if t.running)
        live.running = False
        live.reward = 1.0
        job.write_trial(live)
        clock[0] += 1
        exp, st = scanner.scan()
        assert exp.counts.running == 4 and exp.counts.valid == 31
        assert st["verified"] <= 5 + 1  # the running ones, and 1/60 of the finished ones
        # a finished trial rewritten in place is seen within the window
        target = d / (job.trials[7].name or "") / "result.json"
        _rewrite(target, 1.0)
        seen_at = None
        for second in range(1, 62):
            clock[0] += 1
            exp, st = scanner.scan()
            if next(t for t in exp.trials if t.path == job.trials[7].name).reward == 1.0:
                seen_at = second
                break
        assert seen_at is not None and seen_at <= 61
        assert exp.verified_at is not None
        assert (datetime.now(UTC) - exp.verified_at).total_seconds() < 120
        # `r`: every finished trial is checked on the next poll
        _rewrite(d / (job.trials[3].name or "") / "result.json", 1.0)
        scanner.verify_all()
        clock[0] += 0.001
        exp, st = scanner.scan()
        assert st["verified"] == 35
        assert next(t for t in exp.trials if t.path == job.trials[3].name).reward == 1.0
    finally:
        scan_mod.time.monotonic = real  # type: ignore[assignment]


def test_new_and_removed_trial_dirs_show_on_the_next_poll(tmp_path: Path) -> None:
    import shutil

    job, d = _live_job(tmp_path)
    src = HarborSource(d)
    first = src.scan_sync().experiments[0]
    new = job.add("task-new", 1.0)
    job.write_trial(new)
    shutil.rmtree(d / (job.trials[0].name or ""))
    exp = src.scan_sync().experiments[0]
    names = {t.trial_name for t in exp.trials}
    assert new.name in names and job.trials[0].name not in names
    assert exp.counts.total == first.counts.total
    # staged copies appear under a folder that is listed on every poll
    shutil.copytree(d / (job.trials[2].name or ""), d / "restored" / (job.trials[2].name or ""))
    exp = src.scan_sync().experiments[0]
    assert exp.counts.copies == 1


def _batch(*argv: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": os.getcwd()}
    return subprocess.run(command(sys.executable, "-m", "tui.cli", "--batch", *argv), capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def test_an_unreadable_source_or_job_dir_exits_2_naming_it(tmp_path: Path) -> None:
    _, d = _live_job(tmp_path)
    other = JobBuilder(tmp_path / "jobs", "dev_set_v2_private_2026-01-01__00-00-00")
    other.add("x", 1.0)
    private = other.write()
    os.chmod(private, 0)
    try:
        alone = _batch("audit", str(private), "--format", "json")
        among = _batch("list", str(tmp_path / "jobs"), "--format", "json")
        monitor = _batch("monitor", str(private), "--until", "1", "--interval", "0")
    finally:
        os.chmod(private, 0o755)
    assert alone.returncode == 2, alone.stderr
    assert f"cannot read {private}: cannot read: Permission denied" in alone.stderr
    assert "Traceback" not in alone.stderr + among.stderr + monitor.stderr
    assert among.returncode == 2
    assert f"{private}: cannot read: Permission denied" in among.stderr
    assert [e["id"] for e in json.loads(among.stdout)["experiments"]] == [d.name]  # the rest is still read
    assert monitor.returncode == 2 and "Permission denied" in monitor.stderr


def test_an_unreadable_source_is_a_clear_error_for_the_console(tmp_path: Path) -> None:
    _, d = _live_job(tmp_path)
    os.chmod(d, 0)
    code = f"""
from services.core.config import Config
from services.core.registry import open_all
sources, errors = open_all([{str(d)!r}], Config())
print(len(sources), errors)
"""
    try:
        out = subprocess.run(command(sys.executable, "-c", code), capture_output=True, text=True,
                             env=os.environ | {"PYTHONPATH": os.getcwd()}, timeout=60, check=False)
    finally:
        os.chmod(d, 0o755)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"0 ['{d}: cannot read: Permission denied']"


def test_names_that_are_not_utf8_through_batch_and_monitor(tmp_path: Path) -> None:
    _, d = _live_job(tmp_path, n=3, running=1)
    bad = os.fsencode(str(d)) + b"/t\xe9ch-\x1b[31m__\xff0001"
    os.mkdir(bad)
    with open(bad + b"/result.json", "wb") as fh:
        fh.write(b'{"verifier_result": {"rewards": {"reward": 1.0}}}')
    env = os.environ | {"PYTHONPATH": os.getcwd()}
    for argv in (["trials", "--format", "json"], ["audit", "--format", "json"], ["list", "--format", "jsonl"],
                 ["monitor", "--until", "1", "--interval", "0"]):
        out = subprocess.run([sys.executable, "-m", "tui.cli", "--batch", argv[0], str(d), *argv[1:]],
                             capture_output=True, text=True, env=env, timeout=120, check=False)
        assert out.returncode in (0, 1), (argv, out.stderr)
        assert "Traceback" not in out.stderr
        for line in out.stdout.splitlines():
            json.loads(line)
    trials = json.loads(subprocess.run([sys.executable, "-m", "tui.cli", "--batch", "trials", str(d), "--format",
                                        "json"], capture_output=True, text=True, env=env, check=True).stdout)
    assert len(trials["trials"]) == 5


def test_the_header_says_how_fresh_finished_trials_are(tmp_path: Path) -> None:
    from tui.chrome import verified_age

    _, d = _live_job(tmp_path)
    exp = HarborSource(d).scan_sync().experiments[0]
    assert exp.verified_at is not None
    assert verified_age([exp]) is None  # just checked: nothing worth saying
    old = copy_with(exp, verified_at=datetime.now(UTC) - timedelta(seconds=42))
    assert verified_age([exp, old]) in (42, 43)
