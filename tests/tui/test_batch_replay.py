"""The audit replay (tui/batch_replay.py): a `--batch audit` of unchanged job dirs prints the
last run's output, and anything the audit reads that changed runs it in full again."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import tui.batch
from tests.support.harbor_factory import JobBuilder
from tui.batch_replay import candidate, replay_path
from tui.cli import main

ROOT = Path(__file__).resolve().parents[2]


def finished_job(root: Path, *, errored: int = 0) -> Path:
    job = JobBuilder(root)
    tasks = [f"task-{i:02d}" for i in range(10)]
    job.add_many(tasks, 3)
    for t in job.trials[:errored]:
        t.reward, t.exception = None, "DaytonaError"
    return job.write()


def audit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--batch", "audit", "--format", "json", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def no_full_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, a full audit is an error: only a replay can answer."""
    def refuse(*_: object, **__: object) -> int:
        raise AssertionError("the audit ran in full")

    monkeypatch.setattr(tui.batch, "run_batch", refuse)


def replay_file(*argv: str) -> Path:
    return replay_path(["--batch", "audit", "--format", "json", *argv])


def test_an_unchanged_job_is_answered_by_the_last_runs_output_and_exit_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    d = finished_job(tmp_path, errored=12)  # 40% errors: needs action, exit 1
    first = audit(capsys, str(d))
    assert first[0] == 1 and json.loads(first[1])["experiments"][0]["verdict"] == "resume"
    assert replay_file(str(d)).is_file()
    no_full_run(monkeypatch)
    assert audit(capsys, str(d)) == first


def test_a_changed_trial_file_runs_the_audit_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = finished_job(tmp_path, errored=12)
    assert audit(capsys, str(d))[0] == 1
    # every errored trial now has a reward: the same job passes
    for res in sorted(d.glob("*/result.json")):
        data = json.loads(res.read_text())
        if data.get("exception_info"):
            data["exception_info"] = None
            data["verifier_result"] = {"rewards": {"reward": 1.0}}
            res.write_text(json.dumps(data))
    code, out, _ = audit(capsys, str(d))
    assert code == 0 and json.loads(out)["experiments"][0]["verdict"] == "finalize"


def test_a_new_trial_dir_and_a_removed_one_run_the_audit_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = finished_job(tmp_path)
    _, out, _ = audit(capsys, str(d))
    assert json.loads(out)["experiments"][0]["trials"]["total"] == 30
    some = sorted(p for p in d.iterdir() if p.is_dir())[0]
    shutil.copytree(some, d / "task-99__zzzzzzz")
    res = d / "task-99__zzzzzzz" / "result.json"
    res.write_text(json.dumps({**json.loads(res.read_text()), "trial_name": "task-99__zzzzzzz",
                               "task_name": "task-99"}))
    _, out, _ = audit(capsys, str(d))
    assert json.loads(out)["experiments"][0]["trials"]["total"] == 31
    shutil.rmtree(d / "task-99__zzzzzzz")
    shutil.rmtree(some)
    _, out, _ = audit(capsys, str(d))
    assert json.loads(out)["experiments"][0]["trials"]["total"] == 29


def test_the_config_the_environment_and_a_baseline_are_inputs_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    d = finished_job(tmp_path, errored=2)
    gate = lambda out: json.loads(out)["experiments"][0]["checks"][5]["evidence"]  # noqa: E731
    assert "limit 10.0%" in gate(audit(capsys, str(d))[1])
    cfg = Path(os.environ["XDG_CONFIG_HOME"]) / "evaldesk" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("[policy]\nerror_fraction_max = 0.05\n")
    code, out, _ = audit(capsys, str(d))
    assert "limit 5.0%" in gate(out) and code == 1
    monkeypatch.setenv("EVALDESK_READ_ONLY", "true")  # any variable: the environment is hashed
    assert audit(capsys, str(d))[1] == out
    # one file per command line and environment; a changed config replaced its own
    assert len(list(replay_file(str(d)).parent.glob("*.json"))) == 2
    # a baseline in the config dir adds the alignment check
    (cfg.parent / "baselines").mkdir()
    (cfg.parent / "baselines" / "terminal_bench_2-ref.json").write_text(json.dumps(
        {"name": "ref", "benchmark": "terminal_bench_2", "pass_rate": 0.9, "n": 30}))
    _, out, _ = audit(capsys, str(d))
    assert "alignment" in [c["id"] for c in json.loads(out)["experiments"][0]["checks"]]


def test_an_unfinished_write_is_said_and_never_replayed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.services.remediations.test_dedupe import duplicated_job
    from tests.support.writes import run_cli

    d = duplicated_job(tmp_path).write()
    assert audit(capsys, str(d))[0] == 1
    assert replay_file(str(d)).is_file()
    # a dedupe killed after its second move leaves its record unfinished in the quarantine
    p = run_cli("--batch", "dedupe", "--apply", "--format", "json", str(d), env={"EVALDESK_CRASH_AT": "step:1"})
    assert p.returncode == -signal.SIGKILL, p.stderr
    (record,) = [q.name for q in (d / ".evaldesk-quarantine").iterdir()]
    for _ in range(2):
        code, _, err = audit(capsys, str(d))
        assert record in err and code == 1, err


def test_a_running_trial_a_problem_or_a_folder_of_jobs_is_never_remembered(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    live = JobBuilder(tmp_path / "live", finished=False)
    live.add_many(["a", "b"], 2)
    live.add("c", running=True)
    d = live.write()
    audit(capsys, str(d))
    assert not replay_file(str(d)).exists()

    odd = finished_job(tmp_path / "odd")
    (odd / "elsewhere").symlink_to(tmp_path)
    _, out, _ = audit(capsys, str(odd))
    assert "symlink" in out and not replay_file(str(odd)).exists()

    folder = tmp_path / "many"
    finished_job(folder)
    audit(capsys, str(folder))
    assert not replay_file(str(folder)).exists()

    plain = finished_job(tmp_path / "plain")
    main(["--batch", "audit", "--format", "json", "--no-cache", str(plain)])
    capsys.readouterr()
    assert not replay_file(str(plain)).parent.exists() or not any(replay_file(str(plain)).parent.iterdir())


def test_a_corrupt_or_unwritable_replay_only_costs_the_full_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    d = finished_job(tmp_path, errored=12)
    first = audit(capsys, str(d))
    path = replay_file(str(d))
    for junk in (b"", b"{not json", b'{"format": 1, "watch": [["nope", "/", "x"]]}', json.dumps(
            {"format": 1, "watch": "x", "out": 3}).encode()):
        path.write_bytes(junk)
        assert audit(capsys, str(d)) == first
    # a cache dir that cannot be written (under a file: no user, root included, can make it)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    for _ in range(2):
        assert audit(capsys, str(d)) == first


def test_only_a_plain_audit_to_a_pipe_is_a_candidate() -> None:
    class Pipe:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    pipe, tty = Pipe(False), Pipe(True)
    ok = ["--batch", "audit", "--format", "json", "/jobs/a"]
    assert candidate(ok, pipe)  # type: ignore[arg-type]
    assert candidate(["--batch=audit", "--format=table", "--baseline", "b.json", "--config", "c", "/j"], pipe)  # type: ignore[arg-type]
    assert not candidate(ok, tty)  # type: ignore[arg-type]
    for bad in (["--batch", "list", "/j"], ["--batch", "audit", "--no-cache", "/j"],
                ["--batch", "audit", "--progress", "json", "/j"], ["--batch", "audit", "ssh://h/j"],
                ["--batch", "audit", "--format", "html", "/j"], ["--batch"], ["/j"]):
        assert not candidate(bad, pipe), bad  # type: ignore[arg-type]


def test_a_replay_loads_nothing_but_the_standard_library_and_says_so_on_a_terminal(tmp_path: Path) -> None:
    d = finished_job(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = ["--batch", "audit", "--format", "json", str(d)]
    first = subprocess.run([sys.executable, "-m", "tui.cli", *argv], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=60)
    assert first.returncode == 0, first.stderr
    probe = ("import sys; from tui.cli import main; code = main(sys.argv[1:]); "
             "sys.stderr.write(' '.join(m for m in ('pydantic', 'rich', 'sqlite3', 'services.core.models') "
             "if m in sys.modules)); raise SystemExit(code)")
    again = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=60)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert again.stderr == "", again.stderr  # none of them loaded, and nothing said off a terminal


def test_a_replay_file_names_only_declared_stamps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = finished_job(tmp_path)
    first = audit(capsys, str(d))
    path = replay_file(str(d))
    memo = json.loads(path.read_text())
    canary = tmp_path / "canary"
    # a function of evaldesk's that is not a stamp is never called, whatever the file says
    memo["watch"] = [["services.core.xdg:config_file", str(canary), "x"], *memo["watch"]]
    path.write_text(json.dumps(memo))
    assert audit(capsys, str(d)) == first
    memo["watch"] = [["os:remove", str(canary), "x"], *memo["watch"][1:]]
    canary.write_text("")
    path.write_text(json.dumps(memo))
    assert audit(capsys, str(d)) == first and canary.exists()


def test_processes_sharing_the_replay_agree(tmp_path: Path) -> None:
    d = finished_job(tmp_path, errored=12)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "tui.cli", "--batch", "audit", "--format", "json", str(d)]
    for _ in range(2):  # a first round that writes the replay at once, then one that reads it
        runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
                for _ in range(4)]
        done = [(p.wait(timeout=60), *p.communicate()) for p in runs]
        assert {code for code, _, _ in done} == {1} and len({out for _, out, _ in done}) == 1, done
        assert json.loads(done[0][1])["experiments"][0]["verdict"] == "resume"
    (kept,) = replay_file(str(d)).parent.glob("*.json")  # (their environment names its own file)
    assert json.loads(kept.read_text())["code"] == 1
