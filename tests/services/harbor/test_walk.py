"""The walk of a job dir (services/harbor/walk.py): the stats split with a forked helper give
what one process gives, and the quick digest of a finished job is the scanner's own."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import services.harbor.walk as walk
from services.core.policy import Policy
from services.harbor.scan import HarborScanner
from services.harbor.walk import job_stamp, settled_stamp
from tests.support.harbor_factory import JobBuilder


@pytest.fixture(autouse=True)
def _no_reads_left_behind() -> Iterator[None]:
    yield
    walk.drop_early_reads()  # (these tests take early listings without a scan to take the reads)


def finished(root: Path, n: int = 12) -> Path:
    job = JobBuilder(root, lean=True)
    job.add_many([f"t{i:02d}" for i in range(n)], 1)
    return job.write()


def odd_job(root: Path) -> Path:
    job = JobBuilder(root)
    job.add_many(["a", "b", "c"], 2)
    job.add("d", running=True)
    d = job.write()
    (d / "e__AAAAAAA").mkdir()
    (d / "e__AAAAAAA" / "result.json").mkdir()  # a dir where the result should be
    staged = d / "restored"
    staged.mkdir()
    first = sorted(p for p in d.iterdir() if p.is_dir() and "__" in p.name)[0]
    shutil.copytree(first, staged / first.name)
    (d / "link").symlink_to(first)
    (d / ".git").mkdir()
    return d


@pytest.mark.parametrize("forked", [False, True])
def test_the_forked_stats_give_what_one_process_gives(tmp_path: Path, forked: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    d = odd_job(tmp_path)
    names = sorted(p.name for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
    serial = walk.batch_result_keys(str(d), names)
    monkeypatch.setattr(walk, "PARALLEL_STAT_MIN", 2 if forked else 10**9)
    pid = os.getpid()
    assert walk.batch_result_keys(str(d), names) == serial
    assert os.getpid() == pid  # (the helper never came back here)
    assert serial.count(-1) == 3  # the running trial, the odd result, the staging folder
    problems: list[str] = []
    listed = walk.list_job(str(d), problems)
    assert listed is not None and any("symlink" in p for p in problems)
    rels = [loc.rel for _, found in listed for loc in found]
    assert "restored/" + sorted(n for n in names if "__" in n)[0] in rels


def test_a_helper_that_cannot_start_leaves_the_stats_to_this_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = finished(tmp_path)
    names = sorted(p.name for p in d.iterdir() if p.is_dir())
    serial = walk.batch_result_keys(str(d), names)
    monkeypatch.setattr(walk, "PARALLEL_STAT_MIN", 2)

    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(walk.os, "fork", no_fork)
    assert walk.batch_result_keys(str(d), names) == serial


@pytest.mark.parametrize("forked", [False, True])
def test_the_quick_digest_of_a_finished_job_is_the_scanners(tmp_path: Path, forked: bool,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walk, "PARALLEL_STAT_MIN", 2 if forked else 10**9)
    d = finished(tmp_path)
    scanner = HarborScanner(str(d), Policy())
    scanner.scan()
    digest = scanner.settled_digest()
    assert digest is not None and walk.fast_settled_digest(str(d)) == digest
    assert job_stamp(str(d)) == settled_stamp(digest, str(d))
    # the slow way (a staging folder of copies) reaches the same stamp as the scanner
    staged = d / "restored"
    staged.mkdir()
    first = sorted(p for p in d.iterdir() if p.is_dir() and "__" in p.name)[0]
    shutil.copytree(first, staged / first.name)
    scanner.verify_all()
    scanner.scan()
    digest = scanner.settled_digest()
    assert digest is not None and walk.fast_settled_digest(str(d)) is None
    assert job_stamp(str(d)) == settled_stamp(digest, str(d))


def test_a_running_or_odd_job_is_never_settled(tmp_path: Path) -> None:
    d = odd_job(tmp_path)
    scanner = HarborScanner(str(d), Policy())
    scanner.scan()
    assert scanner.settled_digest() is None
    assert walk.fast_settled_digest(str(d)) is None and job_stamp(str(d)) == "unsettled"



def _shape(listed: list[tuple[walk.Entry, list[walk.TrialLoc]]] | None) -> list[tuple] | None:
    if listed is None:
        return None
    return [(e.name, e.path, e.is_dir(follow_symlinks=False), e.is_symlink(),
             [(loc.rel, loc.job, loc.name, loc.rkey, loc.error) for loc in found]) for e, found in listed]


def _early(listed: list[tuple[walk.Entry, list[walk.TrialLoc]]] | None) -> bool:
    # a listing of this process has os.DirEntry entries; the early one comes as ListedEntry
    assert listed
    return all(isinstance(e, walk.ListedEntry) for e, _ in listed)


def test_an_early_listing_is_the_listing_and_is_taken_once(tmp_path: Path) -> None:
    d = odd_job(tmp_path)
    (d / "notes.txt").write_text("a file beside the trials")
    (d / "outside").symlink_to(tmp_path)
    plain_problems: list[str] = []
    plain = walk.list_job(str(d), plain_problems)
    assert not _early(plain)
    walk.prelist([str(tmp_path / "absent"), str(d), str(tmp_path)])  # (the first dir only)
    pid = os.getpid()
    early_problems: list[str] = []
    early = walk.list_job(str(d), early_problems)
    assert os.getpid() == pid  # (the child never came back here)
    assert _early(early) and _shape(early) == _shape(plain)
    assert early_problems == plain_problems and any("outside the job dir" in p for p in early_problems)
    assert not _early(walk.list_job(str(d), []))  # once: the next scan lists the job itself
    assert not _early(walk.list_job(str(tmp_path), []))  # the second dir was not listed early


def test_an_early_listing_is_found_under_another_spelling_of_the_path(tmp_path: Path) -> None:
    d = finished(tmp_path)
    plain = walk.list_job(str(d), [])
    (tmp_path / "alias").symlink_to(d)
    walk.prelist([str(tmp_path / "alias")])
    listed = walk.list_job(str(d), [])  # the scanner's spelling, not the command line's
    assert _early(listed) and _shape(listed) == _shape(plain)


def test_an_early_listing_too_old_or_lost_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = finished(tmp_path)
    monkeypatch.setattr(walk, "PRELIST_FRESH_S", 0.0)
    walk.prelist([str(d)])
    assert not _early(walk.list_job(str(d), []))
    # a child that fails (here: it cannot write what it listed) leaves the listing to this process
    monkeypatch.setattr(walk, "PRELIST_FRESH_S", 60.0)
    monkeypatch.setattr(walk.marshal, "dumps", lambda _obj: (_ for _ in ()).throw(ValueError("no")))
    walk.prelist([str(d)])
    assert not _early(walk.list_job(str(d), []))


def test_a_slow_early_listing_the_scan_waited_for_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # freshness counts from when the child was done: a scan that waited for it gets a listing as
    # new as its own would be (listing again would only double the wait on a slow disk)
    d = finished(tmp_path)
    parent = os.getpid()
    real = walk.list_job

    def slow(*args: Any, **kwargs: Any) -> Any:
        if os.getpid() != parent:
            time.sleep(0.6)
        return real(*args, **kwargs)

    monkeypatch.setattr(walk, "list_job", slow)
    monkeypatch.setattr(walk, "PRELIST_FRESH_S", 0.3)
    walk.prelist([str(d)])
    assert _early(real(str(d), []))
