"""evaldesk's own state files: whole or not at all, and no update lost between processes."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from services.core import followed
from services.core.statefile import StateLockTimeout, locked, read_json, update_json, write_atomic


def _follow_many(start: int, n: int, barrier: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    for i in range(start, start + n):
        followed.follow(None, f"/jobs/job-{i}", str(1000 + i))


def test_two_processes_following_300_jobs_each_leave_all_600() -> None:
    ctx = multiprocessing.get_context("spawn")  # (a fresh interpreter each, with this test's XDG dirs)
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_follow_many, args=(k * 300, 300, barrier)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    on = followed.followed_on(None)
    assert len(on) == 600
    assert on["/jobs/job-599"] == "1599"


def test_an_atomic_write_keeps_the_mode_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    write_atomic(target, b"{}", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    os.chmod(target, 0o640)
    write_atomic(target, b'{"a": 1}')
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert read_json(target) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    write_atomic(target, b'{"old": true}')

    def boom() -> None:
        raise RuntimeError("killed before the rename")

    with pytest.raises(RuntimeError):
        write_atomic(target, b'{"new": true}', before_replace=boom)
    assert read_json(target) == {"old": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_an_update_waits_for_the_lock_and_says_who_held_it_too_long(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "state.json"
    update_json(target, lambda d: {**(d or {}), "n": 1}, {})
    monkeypatch.setattr("services.core.statefile.LOCK_TIMEOUT_S", 0.2)
    # (flock locks belong to the open file: a second open in this process waits like another process)
    with locked(target), pytest.raises(StateLockTimeout, match="held by another process"), \
            locked(target, timeout_s=0.2):
        pass
    assert read_json(target) == {"n": 1}
    assert read_json(tmp_path / "missing.json", {"d": 1}) == {"d": 1}
    (tmp_path / "junk.json").write_bytes(b"{half")
    assert read_json(tmp_path / "junk.json", []) == []
