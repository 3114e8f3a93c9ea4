"""`evaldesk --batch dedupe --apply gs://…|s3://…` killed (SIGKILL, its own process) at points
of the write path and inside a move (copying, committed, deleting): `undo` puts every object
back byte for byte, `finish` reaches what an uninterrupted apply leaves."""

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


def _killed(url: str, point: str) -> None:
    p = run_cli("--batch", "dedupe", "--apply", "--format", "json", url, env={"EVALDESK_CRASH_AT": point})
    assert p.returncode == -signal.SIGKILL, f"never reached {point}: rc {p.returncode}\n{p.stderr}"
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("point", ["locked", "recorded", "move:copying", "move:committed", "move:deleting",
                                   "step:2", "write:result.json", "verified"])
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
