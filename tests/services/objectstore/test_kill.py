"""`evaldesk --batch dedupe|resume --apply gs://…|s3://…`, and `--batch undo`, killed (SIGKILL,
its own process) inside a move (copying, committed, deleting), while an object is written, and at
one point before and after each (the write path's other points, which do not depend on where the
job is, are killed on local disk in tests/services/remediations/test_crash_recovery.py):
`undo` puts every object back byte for byte, `finish` reaches what an uninterrupted apply
leaves — named by the job's URL, or by the record's id alone."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.services.objectstore.conftest import Emulator
from tests.services.remediations.test_dedupe import duplicated_job
from tests.support.writes import run_cli

JOB = "dev_set_v2_org-M_2026-03-02__09-00-00"
OWN = ("record.json", "steps.log", "listing.json")


def _put(store: Emulator, tmp: Path, prefix: str) -> str:
    d = tmp / "local" / JOB  # one local copy for every prefix: its trial configs name where it was written
    if not d.exists():
        d = duplicated_job(tmp / "local").write()
    store.upload(d, f"{prefix}/{JOB}")
    return store.url(f"{prefix}/{JOB}")


def _view(store: Emulator, prefix: str) -> dict[str, bytes]:
    """The job's objects relative to it, the record id named alike, the record's own files out."""
    out = {}
    for key, data in store.objects(f"{prefix}/{JOB}/").items():
        parts = key[len(prefix) + len(JOB) + 2:].split("/")
        if parts[0] == ".evaldesk-quarantine":
            if len(parts) == 3 and parts[2] in OWN:
                continue
            parts[1] = "<record>"
        out["/".join(parts)] = data
    return out


def _killed(url: str, point: str, *argv: str, env: dict[str, str] | None = None) -> None:
    """`evaldesk --batch ARGV… URL` (default: dedupe --apply) killed at `point`."""
    p = run_cli("--batch", *(argv or ("dedupe", "--apply")), "--format", "json", url,
                env={**(env or {}), "EVALDESK_CRASH_AT": point})
    assert p.returncode == -signal.SIGKILL, f"never reached {point}: rc {p.returncode}\n{p.stderr}"
    assert "Traceback" not in p.stderr


def _record_id(store: Emulator, prefix: str) -> str | None:
    """The id of the one record kept in the bucket under `prefix` (None: none was written)."""
    ids = {o.key.split("/")[-2] for o in store.bucket.objects(prefix) if o.key.endswith("/record.json")
           and "/.evaldesk-quarantine/" in o.key and "/trials/" not in o.key}
    assert len(ids) <= 1, ids
    return next(iter(ids), None)


@pytest.mark.parametrize("point", ["locked", "recorded", "move:copying", "move:committed", "move:deleting",
                                   "write:result.json"])
def test_kill_then_undo_restores_every_object(store: Emulator, tmp_path: Path, point: str) -> None:
    url = _put(store, tmp_path, "a")
    before = store.objects("a/")
    _killed(url, point)
    u = run_cli("--batch", "undo", "--format", "json", url)
    assert u.returncode == 0, u.stderr
    assert store.objects("a/") == before
    again = run_cli("--batch", "dedupe", "--apply", "--format", "json", url)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["plans"][0]["applied"] is True


@pytest.mark.parametrize("point", ["recorded", "move:copying", "move:committed", "move:deleting",
                                   "write:result.json"])
def test_kill_then_finish_reaches_the_uninterrupted_apply(store: Emulator, tmp_path: Path, point: str) -> None:
    ref_url = _put(store, tmp_path, "ref")
    assert run_cli("--batch", "dedupe", "--apply", ref_url).returncode == 0
    url = _put(store, tmp_path, "a")
    before = store.objects("a/")
    _killed(url, point)
    f = run_cli("--batch", "finish", "--format", "json", url)
    assert f.returncode == 0, f.stderr
    assert json.loads(f.stdout)["status"] == "applied"
    assert _view(store, "a") == _view(store, "ref")
    assert not [k for k in store.objects("a/") if k.rpartition("/")[2].startswith(".evaldesk-")]
    u = run_cli("--batch", "undo", "--format", "json", url)
    assert u.returncode == 0, u.stderr
    assert store.objects("a/") == before


def test_undo_and_finish_by_record_id_reopen_the_bucket(store: Emulator, tmp_path: Path) -> None:
    """A record id alone names a write in a bucket: this machine's index says which bucket."""
    url = _put(store, tmp_path, "a")
    before = store.objects("a/")
    done = run_cli("--batch", "dedupe", "--apply", "--format", "json", url)
    assert done.returncode == 0, done.stderr
    rid = json.loads(done.stdout)["plans"][0]["record"]
    f = run_cli("--batch", "finish", "--format", "json", rid)
    assert f.returncode == 0 and "nothing to finish" in json.loads(f.stdout)["message"], f.stdout + f.stderr
    u = run_cli("--batch", "undo", "--format", "json", rid[:24])  # a unique prefix of it will do
    assert u.returncode == 0, u.stderr
    assert json.loads(u.stdout)["status"] == "undone"
    assert store.objects("a/") == before
    again = run_cli("--batch", "undo", "--format", "json", rid)
    assert again.returncode == 0 and "already undone" in json.loads(again.stdout)["message"], again.stdout


# -- an undo killed ---------------------------------------------------------------------------

@pytest.mark.parametrize("point", ["write:result.json", "undo:step:last", "move:copying", "move:committed",
                                   "move:deleting"])
def test_an_undo_killed_is_carried_on_by_the_next(store: Emulator, tmp_path: Path, point: str) -> None:
    url = _put(store, tmp_path, "a")
    before = store.objects("a/")
    done = run_cli("--batch", "dedupe", "--apply", "--format", "json", url)
    assert done.returncode == 0, done.stderr
    rid = _record_id(store, "a/")
    assert rid is not None
    record = json.loads(store.objects(f"a/{JOB}/.evaldesk-quarantine/{rid}/record.json")[
        f"a/{JOB}/.evaldesk-quarantine/{rid}/record.json"])
    point = point.replace("last", str(len(record["plan"]["steps"]) - 1))
    _killed(rid, point, "undo")
    u = run_cli("--batch", "undo", "--format", "json", rid)
    assert u.returncode == 0, u.stderr
    assert json.loads(u.stdout)["status"] == "undone"
    assert store.objects("a/") == before


# -- a resume killed: its moves are dedupe's (above); what is its own is the command step ------

def _resume_job(store: Emulator, tmp: Path) -> tuple[str, dict[str, str]]:
    """The errored job of test_resume.py in the bucket, and the config whose launcher re-runs it."""
    import shutil

    from tests.services.objectstore import test_resume as r

    d = r._job(tmp / "local").write()
    store.upload(d, f"{r.PREFIX}/{r.JOB}")
    relaunched = tmp / "relaunched"
    (relaunched / r.JOB).mkdir(parents=True)
    made = r._job(tmp / "made", rerun=True)
    made.write()
    for t in made.trials:
        shutil.copytree(tmp / "made" / r.JOB / t.name, relaunched / r.JOB / t.name)
    return store.url(f"{r.PREFIX}/{r.JOB}"), {"EVALDESK_CONFIG": str(r._config(tmp, store, relaunched))}


RESUME_PREFIX = "marin/"


@pytest.mark.parametrize("point", ["recorded", "move:committed", "step:2:ran"])
def test_a_resume_killed_is_finished_by_its_record(store: Emulator, tmp_path: Path, point: str) -> None:
    url, env = _resume_job(store, tmp_path)
    _killed(url, point, "resume", "--apply", env=env)
    rid = _record_id(store, RESUME_PREFIX)
    assert rid is not None
    f = run_cli("--batch", "finish", "--format", "json", rid, env=env)
    assert f.returncode == 0, f.stderr
    assert json.loads(f.stdout)["status"] == "applied"
    exp = json.loads(run_cli("--batch", "audit", "--format", "json", url, env=env).stdout)["experiments"][0]
    assert exp["trials"]["valid"] == 6 and exp["trials"]["errored"] == 0, exp["trials"]
    left = [k for k in store.objects(RESUME_PREFIX) if k.rpartition("/")[2] in
            (".evaldesk-moved.json", ".evaldesk-incoming.json", ".evaldesk-dir") or "/.evaldesk-lock/" in k]
    assert not left


@pytest.mark.parametrize("point", ["locked", "move:copying", "step:2:starting"])
def test_a_resume_killed_before_its_command_ran_is_undone(store: Emulator, tmp_path: Path, point: str) -> None:
    url, env = _resume_job(store, tmp_path)
    before = store.objects(RESUME_PREFIX)
    _killed(url, point, "resume", "--apply", env=env)
    rid = _record_id(store, RESUME_PREFIX)
    u = run_cli("--batch", "undo", "--format", "json", rid or url, env=env)  # (no record yet: by its URL)
    assert u.returncode == 0, u.stderr
    assert store.objects(RESUME_PREFIX) == before
