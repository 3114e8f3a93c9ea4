"""Resume of a job in a bucket: the errored trials set aside into the quarantine beside the job
(same bucket), then the store's own command (`[[stores]] commands.resume`: its launcher with
the same --job_name) run on this machine; undo puts the set-aside trials back."""

from __future__ import annotations

import json
import shutil
import sys
from datetime import timedelta
from pathlib import Path

from tests.services.objectstore.conftest import Emulator
from tests.support.harbor_factory import T0, JobBuilder
from tests.support.writes import run_cli

PREFIX = "marin/eval_jobs"
JOB = "terminal_bench_2_org-M_2026-03-02__09-00-00"
LAUNCHER = Path(__file__).with_name("launcher.py")


def _job(root: Path, rerun: bool = False) -> JobBuilder:
    job = JobBuilder(root, JOB, n_attempts=1, seed=3)
    for i in range(6):
        errored = i in (1, 4) and not rerun
        if rerun and i not in (1, 4):
            continue
        job.add(f"task-{i:03d}", None if errored else 1.0, "DaytonaError" if errored else None,
                started=T0 + timedelta(minutes=i + (100 if rerun else 0)))
    return job


def _config(tmp: Path, store: Emulator, relaunched: Path) -> Path:
    cfg = tmp / "evaldesk.toml"
    argv = [sys.executable, str(LAUNCHER), "--job_name", "{job_name}", "--output", store.url(PREFIX),
            "--from", str(relaunched)]
    cfg.write_text(f"""
[[stores]]
url = "{store.url(PREFIX)}"
name = "iris"
[stores.commands]
resume = {json.dumps(argv)}
""")
    return cfg


def test_resume_sets_aside_runs_the_launcher_and_undo_puts_back(store: Emulator, tmp_path: Path) -> None:
    d = _job(tmp_path / "local").write()
    store.upload(d, f"{PREFIX}/{JOB}")
    relaunched = tmp_path / "relaunched"
    (relaunched / JOB).mkdir(parents=True)  # (the trials the launcher's Harbor writes)
    new = _job(tmp_path / "made", rerun=True)
    new.write()
    for t in new.trials:  # the trials the launcher's Harbor writes: only the two re-run ones
        shutil.copytree(tmp_path / "made" / JOB / t.name, relaunched / JOB / t.name)
    env = {"EVALDESK_CONFIG": str(_config(tmp_path, store, relaunched))}
    url = store.url(f"{PREFIX}/{JOB}")
    before = store.objects(PREFIX)

    dry = run_cli("--batch", "resume", "--format", "json", url, env=env)
    assert dry.returncode == 1, dry.stderr  # something to resume
    plan = json.loads(dry.stdout.splitlines()[0])
    shown = plan.get("plans", [plan])[0]
    assert shown["command"][1] == str(LAUNCHER) and JOB in shown["command"]
    assert len(shown["rerun"]) == 2

    done = run_cli("--batch", "resume", "--apply", "--format", "json", url, env=env)
    assert done.returncode == 0, done.stderr
    after = store.objects(PREFIX)
    aside = [k for k in after if k.startswith(f"{PREFIX}/.evaldesk-quarantine/{JOB}/")]
    assert len([k for k in aside if k.endswith("/result.json")]) == 2
    audit = run_cli("--batch", "audit", "--format", "json", url, env=env)
    exp = json.loads(audit.stdout)["experiments"][0]
    assert exp["trials"]["valid"] == 6 and exp["trials"]["errored"] == 0, exp["trials"]
    assert not [k for k in after if k.rpartition("/")[2] in (".evaldesk-moved.json", ".evaldesk-incoming.json")]

    # undo refuses: the launcher wrote new trials into the job since (undo would put back files
    # written before they existed) — the write path's own rule, here on a bucket
    u = run_cli("--batch", "undo", "--format", "json", url, env=env)
    assert u.returncode != 0 or "refused" in u.stdout + u.stderr
    assert {k: v for k, v in store.objects(PREFIX).items() if "/.evaldesk-" not in k} == {
        k: v for k, v in after.items() if "/.evaldesk-" not in k}
    assert before


def test_state_from_the_launchers_jobs_table(store: Emulator, tmp_path: Path) -> None:
    """`[[stores]] status` prints the launcher's jobs table: a job it says is running is not
    resumed, whatever its aggregate says; one it says is completed is audited as finished."""
    d = _job(tmp_path / "local").write()
    store.upload(d, f"{PREFIX}/{JOB}")
    table = tmp_path / "jobs.csv"
    show = [sys.executable, "-c", f"print(open({str(table)!r}).read())"]
    cfg = _config(tmp_path, store, tmp_path)
    cfg.write_text(cfg.read_text().replace("[stores.commands]", f"status = {json.dumps(show)}\n[stores.commands]"))
    env = {"EVALDESK_CONFIG": str(cfg)}
    url = store.url(f"{PREFIX}/{JOB}")

    table.write_text(f"job_id,state\nbenjamin/eval-{JOB},2\nother,4\n")
    exp = json.loads(run_cli("--batch", "audit", "--format", "json", url, env=env).stdout)["experiments"][0]
    assert exp["state"] == "running"
    dry = run_cli("--batch", "resume", "--format", "json", url, env=env)
    assert "still running" in dry.stdout + dry.stderr

    table.write_text(f"job_id,state\nbenjamin/eval-{JOB},4\n")
    exp = json.loads(run_cli("--batch", "audit", "--format", "json", url, env=env).stdout)["experiments"][0]
    assert exp["state"] == "finished"
