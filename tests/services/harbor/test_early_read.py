"""The records the early child makes while evaldesk loads (services/harbor/early_read.py): a scan
that takes them is the scan that reads everything itself, whatever becomes of the child."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import services.harbor.early_read as early_read
import services.harbor.fast_record as fast_record
import services.harbor.walk as walk
from services.core.models import Trial
from services.core.policy import Policy
from services.harbor.cache import ParseCache
from services.harbor.records import encode
from services.harbor.scan import HarborScanner, _ckey, _load_trial
from tests.services.harbor.test_bad_input import GARBAGE
from tests.services.harbor.test_walk import odd_job
from tests.support.harbor_factory import JobBuilder


@pytest.fixture(autouse=True)
def _no_reads_left_behind() -> Iterator[None]:
    yield
    walk.drop_early_reads()


def varied_job(root: Path) -> Path:
    """Trials of every shape the fast path takes or refuses, among the odd entries of odd_job."""
    d = odd_job(root / "odd")
    job = JobBuilder(root / "varied")
    job.add_many([f"ok-{i}" for i in range(40)], 2)
    job.add("boom", reward=None, exception="DaytonaError")
    job.add("late", reward=None, exception="AgentTimeoutError")
    for i, raw in enumerate(GARBAGE[1:]):
        job.add(f"junk-{i}", raw_result=raw or b"", name=f"junk-{i}__AAAAAAA")
    # a result that does not name its task: the trial's config is read (the scanner's path)
    job.add("untold", raw_result=json.dumps({"verifier_result": {"rewards": {"reward": 1.0}}}).encode(),
            name="untold__AAAAAAA")
    varied = job.write()
    newer = next(p for p in sorted(varied.iterdir()) if p.name.startswith("ok-")) / "config.json"
    os.utime(newer, (time.time() + 60, time.time() + 60))  # its mtime is the trial's, not result.json's
    for p in d.iterdir():
        os.rename(p, varied / p.name)
    return varied


def figures(exp: Any) -> list[dict[str, Any]]:
    return sorted((t.model_dump(mode="json") for t in exp.trials), key=lambda t: t["path"])


def scan_with(job: Path, cache_dir: Path, early: bool, monkeypatch: pytest.MonkeyPatch,
              wait: float = 0.3) -> tuple[Any, dict[str, Any], int]:
    """A first scan of `job`, with or without the early child; also how many of its records
    the scan took."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_dir))
    taken = 0
    real = early_read.EarlyReads.records

    def counted(self: early_read.EarlyReads) -> Iterator[tuple[int, bytes | None]]:
        nonlocal taken
        for j, rec in real(self):
            taken += rec is not None
            yield j, rec

    monkeypatch.setattr(early_read.EarlyReads, "records", counted)
    if early:
        walk.prelist([str(job)])
        time.sleep(wait)  # what the imports leave the child
    scanner = HarborScanner(str(job), Policy(), ParseCache(str(job.parent)))
    exp, stats = scanner.scan()
    return exp, stats, taken


def test_a_scan_with_the_early_records_is_the_plain_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = varied_job(tmp_path)
    plain, plain_stats, _ = scan_with(job, tmp_path / "c1", False, monkeypatch)
    got, stats, taken = scan_with(job, tmp_path / "c2", True, monkeypatch)
    assert taken > 60  # the child read most of them
    assert figures(got) == figures(plain) and got.problems == plain.problems
    assert (stats["trial_dirs"], stats["files_read"]) == (plain_stats["trial_dirs"], plain_stats["files_read"])
    # what it cached is what a plain scan caches: a new process finds the same trials there
    # (all but the one whose result.json is a dir: nothing stable to key it by)
    again, again_stats, _ = scan_with(job, tmp_path / "c2", False, monkeypatch)
    _, plain_again, _ = scan_with(job, tmp_path / "c1", False, monkeypatch)
    assert again_stats["files_read"] == plain_again["files_read"] == 1 and figures(again) == figures(plain)


def test_the_scan_and_the_child_share_the_reading_where_they_meet(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = JobBuilder(tmp_path / "jobs", lean=True)
    job.add_many([f"t{i:03d}" for i in range(400)], 1)
    d = job.write()
    slow = fast_record.early_record

    def steady(*args: Any) -> bytes | None:
        time.sleep(0.002)  # the scan reads much faster than the child here: both take a share
        return slow(*args)

    monkeypatch.setattr(fast_record, "early_record", steady)
    plain, _, _ = scan_with(d, tmp_path / "c1", False, monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c2"))
    walk.prelist([str(d)])
    assert walk._early_reads is not None
    slots = walk._early_reads[1]._slots
    deadline = time.monotonic() + 10
    while slots[early_read._END] <= early_read._DATA and time.monotonic() < deadline:
        time.sleep(0.001)  # until the child has handed over its first record
    got, _, taken = scan_with(d, tmp_path / "c2", False, monkeypatch)  # (it takes that child's)
    assert 0 < taken < 400
    assert figures(got) == figures(plain)


def test_early_records_are_the_scanners_records_byte_for_byte(tmp_path: Path) -> None:
    job = varied_job(tmp_path)
    listed = walk.list_job(str(job), [])
    assert listed is not None
    made = refused = 0
    job_fd = os.open(job, os.O_RDONLY | os.O_DIRECTORY)
    for loc in early_read.parseable(listed):
        assert loc.rkey is not None
        rec = fast_record.early_record(job_fd, loc.rel, loc.name, loc.rkey)
        if rec is None:
            refused += 1
            continue
        assert rec == encode(_load_trial(loc, _ckey(loc, None))), loc.rel
        made += 1
    os.close(job_fd)
    assert made >= 82 and refused >= len(GARBAGE) - 4  # junk and the untold trial are left to the scan


def test_the_fast_records_fields_are_the_trials() -> None:
    assert tuple(Trial.model_fields) == fast_record.FIELDS


@pytest.mark.parametrize("trouble", ["dies", "out of room", "stale listing"])
def test_a_child_in_trouble_costs_only_the_saving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  trouble: str) -> None:
    job = varied_job(tmp_path)
    plain, _, _ = scan_with(job, tmp_path / "c1", False, monkeypatch)
    if trouble == "dies":
        made = 0
        real = fast_record.early_record

        def dying(*args: Any) -> bytes | None:
            nonlocal made
            made += 1
            if made > 10:
                os._exit(3)  # (in the child: it dies halfway through its share)
            return real(*args)

        monkeypatch.setattr(fast_record, "early_record", dying)
    elif trouble == "out of room":
        monkeypatch.setattr(early_read, "SHARED_BYTES", 4096)
    else:
        monkeypatch.setattr(walk, "PRELIST_FRESH_S", 0.0)
    got, _, taken = scan_with(job, tmp_path / "c2", True, monkeypatch)
    assert figures(got) == figures(plain) and got.problems == plain.problems
    if trouble == "stale listing":
        assert taken == 0
    else:
        assert 0 < taken <= (10 if trouble == "dies" else 20)  # (4 KiB hold a dozen records)


def test_a_child_nobody_comes_for_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = JobBuilder(tmp_path / "jobs", lean=True)
    job.add_many([f"t{i:03d}" for i in range(200)], 1)
    d = job.write()
    real = fast_record.early_record

    def slow(*args: Any) -> bytes | None:
        time.sleep(0.01)  # 2 s for them all
        return real(*args)

    monkeypatch.setattr(fast_record, "early_record", slow)
    monkeypatch.setattr(walk, "PRELIST_FRESH_S", 0.2)
    walk.prelist([str(d)])  # and the command goes another way: nothing takes the listing
    assert walk._early_reads is not None
    pid = walk._early_reads[1].pid
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.02)
    else:
        pytest.fail("the child went on reading for nobody")
    walk._early_reads[1]._reaped = True  # (reaped here)


def test_records_that_were_never_written_so_are_not_taken(tmp_path: Path) -> None:
    # what the child publishes is read only as far as it makes sense: an index outside its
    # listing or a record running past what was published stops the taking (the scan reads the rest)
    job = JobBuilder(tmp_path / "jobs", lean=True)
    job.add_many(["a", "b", "c"], 1)
    d = job.write()
    listed = walk.list_job(str(d), [])
    assert listed is not None
    shared = early_read.shared_memory()
    assert shared is not None
    reads = early_read.EarlyReads(os.getpid(), shared)  # (no child: stop() finds none to wait for)
    reads.listed(listed)
    slots = early_read._slots(shared)
    pos = early_read._DATA
    for j, size, rec in ((2, 3, b"abc"), (1, early_read._NONE, b""), (7, 3, b"xyz"), (0, 3, b"def")):
        shared[pos: pos + 8] = j.to_bytes(4, "little") + size.to_bytes(4, "little")
        shared[pos + 8: pos + 8 + len(rec)] = rec
        pos += 8 + len(rec)
    slots[early_read._END] = pos
    assert list(reads.records()) == [(2, b"abc"), (1, None)]
    assert list(reads.records()) == []  # and nothing after it either
    slots.release()
    reads.close()
