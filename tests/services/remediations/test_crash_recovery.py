"""`evaldesk --batch dedupe --apply` killed (SIGKILL, in its own process) at every point of the
write path, then `undo` restores the job dir byte for byte — evaldesk's own files included —
or `finish` carries the write to the same end an uninterrupted one reaches. A second writer
is refused naming the holder; stale locks are broken only when asked."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from services.core.journal import Journal
from services.remediations.records import RecordIndex
from tests.support.writes import ROOT, evaldesk_cmd, full_tree, job_to_dedupe, run_cli, tree_diff

# moves 0-2 (two surplus attempts and a staged copy), then result.json (3), harbor_result.json (4)
CHECKPOINTS = [
    "locked", "write:record.json", "recorded",
    "step:0:dirs", "step:0:ran", "step:0", "step:1", "step:2:dirs", "step:2",
    "step:3:backup", "write:result.json.orig", "write:result.json", "step:3:ran", "step:3",
    "step:4:backup", "write:harbor_result.json", "step:4",
    "write:listing.json", "verified", "applied",
]
NO_RECORD = {"locked", "write:record.json"}


def applied_view(d: Path) -> dict[str, Any]:
    """The job after a dedupe, with the record id and the record's own files (timestamps)
    taken out, and the folder it sits in (written into trial configs) named alike: equal for
    every apply of the same plan."""
    out = {}
    root = str(d.parent).encode()
    for rel, entry in full_tree(d).items():
        if entry[0] == "file":
            entry = (*entry[:2], entry[2].replace(root, b"<root>"))
        parts = rel.split("/")
        if parts[0] == ".evaldesk-quarantine" and len(parts) > 1:
            if len(parts) == 3 and parts[2] in ("record.json", "steps.log", "listing.json"):
                continue
            parts[1] = "<record>"
        out["/".join(parts)] = entry
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What an uninterrupted apply leaves."""
    d = job_to_dedupe(tmp_path_factory.mktemp("reference"))
    p = run_cli("--batch", "dedupe", "--apply", "--format", "json", str(d),
                env={"XDG_STATE_HOME": str(tmp_path_factory.mktemp("reference-state"))})
    assert p.returncode == 0, p.stderr
    return applied_view(d)


def record_ids(d: Path) -> list[str]:
    q = d / ".evaldesk-quarantine"
    return sorted(p.name for p in q.iterdir()) if q.exists() else []


def killed_at(d: Path, point: str) -> subprocess.CompletedProcess[str]:
    p = run_cli("--batch", "dedupe", "--apply", "--format", "json", str(d), env={"EVALDESK_CRASH_AT": point})
    assert p.returncode == -signal.SIGKILL, f"never reached {point}: rc {p.returncode}\n{p.stderr}"
    assert "Traceback" not in p.stderr
    return p


def no_leftovers(d: Path) -> None:
    names = [str(p.relative_to(d)) for p in d.rglob("*")]
    assert not [n for n in names if ".evaldesk-tmp-" in n or ".evaldesk-lock" in n], names


@pytest.mark.parametrize("point", CHECKPOINTS)
def test_kill_then_undo_restores_the_job_byte_for_byte(tmp_path: Path, point: str,
                                                       reference: dict[str, Any]) -> None:
    d = job_to_dedupe(tmp_path)
    before = full_tree(d)
    killed_at(d, point)
    assert (d / ".evaldesk-lock").is_dir()  # the dead writer's lock is still there
    ids = record_ids(d)
    # undo by record id or by job dir, alternately
    by_id = point not in NO_RECORD and CHECKPOINTS.index(point) % 2 == 1
    u = run_cli("--batch", "undo", "--format", "json", ids[0] if by_id else str(d))
    assert u.returncode == 0, u.stderr
    result = json.loads(u.stdout)
    assert result["notes"] and "process is gone" in result["notes"][0]
    assert full_tree(d) == before, tree_diff(before, full_tree(d))

    journal = [e for e in Journal().entries() if not e.action.startswith("lock:")]
    if point in NO_RECORD:
        assert result["record"] is None and journal == []
    else:
        # the record survives on this machine, and the journal tells the story
        [record_id] = ids
        entry = RecordIndex().get(record_id)
        assert entry is not None and entry["status"] == "undone" and not entry["location"]["on_target"]
        assert (Path(entry["location"]["record_dir"]) / "record.json").is_file()
        assert journal[0].action == "dedupe:begin"
        assert journal[-1].action == "dedupe:undo" and journal[-1].detail["record"] == record_id

    # and a fresh apply completes cleanly
    again = run_cli("--batch", "dedupe", "--apply", "--format", "json", str(d))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["plans"][0]["applied"] is True
    assert applied_view(d) == reference, tree_diff(reference, applied_view(d))
    no_leftovers(d)


FINISH_POINTS = ["locked", "recorded", "step:1", "step:3:backup", "write:result.json",
                 "verified", "applied"]


@pytest.mark.parametrize("point", FINISH_POINTS)
def test_kill_then_finish_reaches_what_an_uninterrupted_apply_leaves(tmp_path: Path, point: str,
                                                                     reference: dict[str, Any]) -> None:
    d = job_to_dedupe(tmp_path)
    before = full_tree(d)
    killed_at(d, point)
    ids = record_ids(d)
    f = run_cli("--batch", "finish", "--format", "json", ids[0] if ids else str(d))
    assert f.returncode == 0, f.stderr
    result = json.loads(f.stdout)
    if point == "locked":
        # the write never began: nothing to finish, and its lock goes
        assert result["record"] is None and "removed the lock" in result["notes"][0]
        assert full_tree(d) == before
        return
    if point == "applied":
        # it had ended: nothing to finish; the dead writer's lock goes
        assert result["record"] is None and "removed the lock" in result["notes"][0]
    else:
        assert result["status"] == "applied" and result["record"] == ids[0]
        assert [e.action for e in Journal().entries()][-1] == "dedupe:finish"
    assert applied_view(d) == reference, tree_diff(reference, applied_view(d))
    no_leftovers(d)
    entry = RecordIndex().get(ids[0])
    assert entry is not None and entry["status"] == "applied"
    # a second dedupe has nothing left to do, and undo still puts everything back
    assert run_cli("--batch", "dedupe", "--format", "json", str(d)).returncode == 0
    u = run_cli("--batch", "undo", "--format", "json", str(d))
    assert u.returncode == 0, u.stderr
    assert full_tree(d) == before, tree_diff(before, full_tree(d))


@pytest.mark.parametrize("point", ["undo:step:4", "undo:step:1", "write:result.json"])
def test_an_interrupted_undo_is_carried_on_by_the_next(tmp_path: Path, point: str) -> None:
    d = job_to_dedupe(tmp_path)
    before = full_tree(d)
    assert run_cli("--batch", "dedupe", "--apply", str(d)).returncode == 0
    u = run_cli("--batch", "undo", str(d), env={"EVALDESK_CRASH_AT": point})
    assert u.returncode == -signal.SIGKILL, u.stderr
    u = run_cli("--batch", "undo", "--format", "json", str(d))
    assert u.returncode == 0, u.stderr
    assert full_tree(d) == before, tree_diff(before, full_tree(d))


def test_every_batch_command_names_an_unfinished_write_on_stderr(tmp_path: Path) -> None:
    d = job_to_dedupe(tmp_path)
    killed_at(d, "step:1")
    [record_id] = record_ids(d)
    for argv in (["list"], ["audit"], ["trials"], ["dedupe"]):
        p = run_cli("--batch", *argv, "--format", "json", str(d))
        lines = [ln for ln in p.stderr.splitlines() if "unfinished" in ln]
        assert len(lines) == 1, p.stderr
        assert f"unfinished dedupe {record_id} on {d} (this machine): 2 of 5 steps done" in lines[0]
        assert f"evaldesk --batch finish {record_id}" in lines[0] and f"evaldesk --batch undo {record_id}" in lines[0]
        json.loads(p.stdout)  # stdout keeps only the result
    # a record made on another machine is found in the job's quarantine alone
    for entry in Path(os.environ["XDG_STATE_HOME"], "evaldesk", "records").glob("*.json"):
        entry.unlink()
    p = run_cli("--batch", "list", "--format", "json", str(d))
    assert f"unfinished dedupe {record_id}" in p.stderr
    # a new dedupe over a half-done one is refused until it is finished or rolled back: its
    # stale lock is not offered for breaking, the record is
    p = run_cli("--batch", "dedupe", "--apply", "--break-lock", str(d))
    assert p.returncode == 1 and f"unfinished dedupe {record_id} whose writer is gone" in p.stderr, p.stderr
    assert "--break-lock" not in p.stderr and f"evaldesk --batch undo {record_id}" in p.stderr
    # with the lock removed by hand, the record alone still stops it
    (d / ".evaldesk-lock" / "owner.json").unlink()
    (d / ".evaldesk-lock").rmdir()
    p = run_cli("--batch", "dedupe", "--apply", str(d))
    assert p.returncode == 1 and "has an unfinished write" in p.stderr, p.stderr


# -- a second writer -------------------------------------------------------------------------

def _stopped(pid: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} never reached its stop point")


def test_two_concurrent_applies_exactly_one_applies(tmp_path: Path, reference: dict[str, Any]) -> None:
    d = job_to_dedupe(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALDESK_STOP_AT": "recorded"}
    first = subprocess.Popen([*evaldesk_cmd(), "--batch", "dedupe", "--apply", "--format", "json", str(d)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        _stopped(first.pid)  # it holds the lock, its record is written, nothing has moved yet
        second = run_cli("--batch", "dedupe", "--apply", "--format", "json", str(d))
        assert second.returncode == 2 and second.stdout == ""
        [line] = second.stderr.strip().splitlines()
        assert f"is locked by {os.environ.get('USER') or 'root'}@{socket.gethostname()} pid {first.pid}" in line \
            or f"@{socket.gethostname()} pid {first.pid}" in line
        assert "since" in line and "try again when it is done" in line
        # with --break-lock too: a live holder's lock is never broken
        third = run_cli("--batch", "dedupe", "--apply", "--break-lock", str(d))
        assert third.returncode == 2 and f"pid {first.pid}" in third.stderr
    finally:
        os.kill(first.pid, signal.SIGCONT)
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert json.loads(out)["plans"][0]["applied"] is True
    assert len(record_ids(d)) == 1
    assert applied_view(d) == reference
    no_leftovers(d)


def _lock(d: Path, **owner: Any) -> None:
    (d / ".evaldesk-lock").mkdir()
    (d / ".evaldesk-lock" / "owner.json").write_text(json.dumps(owner, default=str))


def test_a_lock_of_a_dead_process_is_reported_and_broken_only_with_break_lock(tmp_path: Path) -> None:
    d = job_to_dedupe(tmp_path)
    dead = subprocess.Popen(["true"])
    dead.wait()
    _lock(d, host=socket.gethostname(), pid=dead.pid, user="alice", started_at=datetime.now(UTC),
          action="dedupe", record="20260101T000000000000Z-dedupe-abcdef")
    before = full_tree(d)
    p = run_cli("--batch", "dedupe", "--apply", str(d))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert f"alice@{socket.gethostname()} pid {dead.pid}" in p.stderr
    assert f"pid {dead.pid} is not running" in p.stderr and "--break-lock" in p.stderr
    assert full_tree(d) == before
    p = run_cli("--batch", "dedupe", "--apply", "--format", "json", "--break-lock", str(d))
    assert p.returncode == 0, p.stderr
    assert f"broke the stale lock on {d} held by alice@{socket.gethostname()} pid {dead.pid}" in p.stderr
    assert json.loads(p.stdout)["plans"][0]["applied"] is True
    broken = [e for e in Journal().entries() if e.action == "lock:break"]
    assert len(broken) == 1 and broken[0].before["lock"]["user"] == "alice"
    no_leftovers(d)


def test_an_old_lock_from_another_host_is_stale(tmp_path: Path) -> None:
    d = job_to_dedupe(tmp_path)
    _lock(d, host="login-b", pid=4242, user="bob", started_at=datetime.now(UTC) - timedelta(hours=7))
    p = run_cli("--batch", "dedupe", "--apply", str(d))
    assert p.returncode == 2 and "bob@login-b pid 4242" in p.stderr and "over the 6 h limit" in p.stderr
    p = run_cli("--batch", "dedupe", "--apply", "--break-lock", str(d))
    assert p.returncode == 0 and "broke the stale lock" in p.stderr and "bob@login-b" in p.stderr


def test_a_recent_lock_from_another_host_is_never_broken(tmp_path: Path) -> None:
    d = job_to_dedupe(tmp_path)
    _lock(d, host="login-b", pid=4242, user="bob", started_at=datetime.now(UTC) - timedelta(minutes=3))
    before = full_tree(d)
    for argv in (["dedupe", "--apply"], ["dedupe", "--apply", "--break-lock"], ["undo", "--break-lock"]):
        p = run_cli("--batch", *argv, str(d))
        assert p.returncode in (0, 2), p.stderr
        if argv[0] == "dedupe":
            assert p.returncode == 2 and "bob@login-b pid 4242" in p.stderr and "3 min ago" in p.stderr
    assert full_tree(d) == before


def test_a_lock_without_an_owner_is_stale_after_a_minute(tmp_path: Path) -> None:
    d = job_to_dedupe(tmp_path)
    (d / ".evaldesk-lock").mkdir()
    p = run_cli("--batch", "dedupe", "--apply", str(d))
    assert p.returncode == 2 and "has not said who it is" in p.stderr and "--break-lock" not in p.stderr
    old = time.time() - 120
    os.utime(d / ".evaldesk-lock", (old, old))
    p = run_cli("--batch", "dedupe", "--apply", str(d))
    assert p.returncode == 2 and "no owner for 2 min" in p.stderr and "--break-lock" in p.stderr
    p = run_cli("--batch", "dedupe", "--apply", "--break-lock", str(d))
    assert p.returncode == 0, p.stderr
    no_leftovers(d)


def test_one_locked_job_does_not_hide_what_was_applied_to_the_others(tmp_path: Path) -> None:
    locked = job_to_dedupe(tmp_path, "dev_set_v2_org-A_2026-03-02__09-00-00")
    free = job_to_dedupe(tmp_path, "dev_set_v2_org-B_2026-03-02__09-00-00")
    _lock(locked, host=socket.gethostname(), pid=os.getpid(), user="alice", started_at=datetime.now(UTC))
    before = full_tree(locked)
    p = run_cli("--batch", "dedupe", "--apply", "--format", "json", str(tmp_path))
    assert p.returncode == 2
    assert [ln for ln in p.stderr.splitlines() if "locked by" in ln] == [p.stderr.strip()]
    by_id = {x["id"]: x for x in json.loads(p.stdout)["plans"]}
    assert by_id[free.name]["applied"] is True and by_id[locked.name]["applied"] is False
    assert full_tree(locked) == before
    assert len(record_ids(free)) == 1
