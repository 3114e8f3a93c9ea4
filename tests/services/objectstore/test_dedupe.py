"""Dedupe and aggregate rebuild in a bucket through the one write path: moves into a
quarantine prefix of the same bucket with the store's preconditions, undo restoring every
object byte for byte, a concurrent writer refused, a listing taken before the write never
bringing a removed result back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.core.config import Config
from services.core.journal import Journal
from services.core.models import Experiment
from services.objectstore.fs import MOVED, StoreFS
from services.objectstore.source import StoreSource
from services.objectstore.store import Conflict
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.errors import StepFailed, WriteRefused
from services.remediations.records import Record
from services.remediations.steps import StepContext
from tests.services.objectstore.conftest import Emulator
from tests.services.remediations.test_dedupe import duplicated_job
from tests.support.harbor_factory import scan_one

PREFIX = "iris/eval_jobs"
JOB = "dev_set_v2_org-M_2026-03-02__09-00-00"


def _setup(store: Emulator, tmp: Path) -> tuple[StoreSource, Path]:
    d = duplicated_job(tmp / "local").write()
    store.upload(d.parent, PREFIX)
    from services.core.registry import open_source

    src = open_source(store.url(PREFIX), Config(scan_cache=False))
    assert isinstance(src, StoreSource)
    return src, d


def _exp(src: StoreSource) -> Experiment:
    [exp] = src.scan_sync().experiments
    return exp


async def _apply(src: StoreSource, tmp: Path) -> Record:
    exp = _exp(src)
    plan = await registry.plan("dedupe", exp, src, Config())
    return await registry.apply("dedupe", plan, exp.id, src, Config(), WritePath(Journal(tmp / "journal.jsonl")))


async def test_apply_matches_the_local_dedupe_and_undo_restores_every_object(store: Emulator, tmp_path: Path) -> None:
    src, d = _setup(store, tmp_path)
    before = store.objects(PREFIX)
    local = scan_one(d)
    record = await _apply(src, tmp_path)
    assert record.status == "applied"
    after = store.objects(PREFIX)
    job = f"{PREFIX}/{JOB}"
    quarantined = {k for k in after if "/.evaldesk-quarantine/" in k}
    # every removed trial's objects are in the quarantine prefix, byte for byte, and gone from the job
    moved = [s for s in record.plan.steps if s.kind == "move"]
    assert len(moved) == 6  # four surplus attempts, two staged copies
    for step in moved:
        rel = step.label
        originals = {k: v for k, v in before.items() if k.startswith(f"{job}/{rel}/")}
        assert originals
        for k, v in originals.items():
            assert k not in after
            assert after[k.replace(f"{job}/", f"{job}/.evaldesk-quarantine/{record.id}/trials/", 1)] == v
    assert not [k for k in after if k.rpartition("/")[2].startswith(".evaldesk-") and "quarantine" not in k]
    assert f"{job}/.evaldesk-quarantine/{record.id}/record.json" in quarantined
    # the rebuilt job audits as the local dedupe of the same files does
    exp = _exp(src)
    local_plan = await registry.plan("dedupe", local, _local_source(d), Config())
    assert sorted(t.path for t in exp.trials) == sorted(local_plan.meta["keep"])
    lsrc = _local_source(d)
    await registry.apply("dedupe", local_plan, local.id, lsrc, Config(), WritePath(Journal(tmp_path / "l.jsonl")))
    for name in ("result.json", "harbor_result.json"):
        if (d / name).exists():
            assert after[f"{job}/{name}"] == (d / name).read_bytes()
    # a second dedupe has nothing to do
    again = await registry.plan("dedupe", exp, src, Config())
    assert again.nothing_to_do

    undone = await WritePath(Journal(tmp_path / "journal.jsonl")).undo(record, registry.context("dedupe", src,
                                                                                                 Config()))
    assert undone.status == "undone"
    assert store.objects(PREFIX) == before


def _local_source(d: Path) -> Any:
    from services.harbor.source import HarborSource

    return HarborSource(d, cache=False)


async def test_a_writer_between_plan_and_apply_is_refused(store: Emulator, tmp_path: Path) -> None:
    src, _ = _setup(store, tmp_path)
    before = store.objects(PREFIX)
    exp = _exp(src)
    plan = await registry.plan("dedupe", exp, src, Config())
    key = f"{PREFIX}/{JOB}/result.json"
    store.bucket.put(key, before[key] + b"\n", None)  # another writer rewrites the aggregate
    with pytest.raises(WriteRefused):
        await registry.apply("dedupe", plan, exp.id, src, Config(), WritePath(Journal(tmp_path / "j.jsonl")))
    now = store.objects(PREFIX)
    assert now == {**before, key: before[key] + b"\n"}


async def test_the_precondition_refuses_a_writer_inside_the_window(store: Emulator, tmp_path: Path) -> None:
    """Between evaldesk's read of result.json and its write, another writer rewrites it: the
    store refuses evaldesk's write (its generation / ETag no longer matches), the write path
    rolls back, and the other writer's bytes stay."""
    src, _ = _setup(store, tmp_path)
    before = store.objects(PREFIX)
    key = f"{PREFIX}/{JOB}/result.json"
    theirs = before[key].replace(b'"n_total_trials"', b'"n_total_trials" ', 1)
    fs = src.fs()
    real_put = fs._put

    def put(path: str, data: bytes, match: str | None = None) -> None:
        if path.endswith(f"{JOB}/result.json") and data != theirs:
            store.bucket.put(key, theirs, None)  # the other writer, on the server, just before
        real_put(path, data, match)

    fs._put = put  # type: ignore[method-assign]
    with pytest.raises(StepFailed) as failed:
        await _apply(src, tmp_path)
    assert "precondition" in str(failed.value)
    now = store.objects(PREFIX)
    assert now[key] == theirs
    outside = {k: v for k, v in now.items() if k != key and "/.evaldesk-quarantine/" not in k}
    assert outside == {k: v for k, v in before.items() if k != key}
    # what is left in the quarantine is the original aggregate evaldesk read, kept because
    # what is there now is not it
    left = {k.rpartition("/")[2] for k in now if "/.evaldesk-quarantine/" in k}
    assert "result.json.orig" in left, left


async def test_a_listing_taken_before_the_write_never_brings_a_removed_result_back(store: Emulator,
                                                                                  tmp_path: Path) -> None:
    src, _ = _setup(store, tmp_path)
    exp = _exp(src)  # the walk's listing is taken here, before the write
    record = await _apply(src, tmp_path)
    removed = {s.label for s in record.plan.steps if s.kind == "move"}
    root = f"/{store.bucket_name}/{PREFIX}/{JOB}"
    walk_fs = src.walk_fs  # not refreshed: the listing from before the dedupe
    names = {n for n, _ in walk_fs.list([root])[0]}  # type: ignore[union-attr]
    assert not {r for r in removed if "/" not in r} & names
    staged = walk_fs.list([root + "/restored"])[0]
    assert isinstance(staged, str) or not {r.split("/")[1] for r in removed if "/" in r} & {n for n, _ in staged}
    assert all(k is None for k in walk_fs.stat([f"{root}/{r}/result.json" for r in removed]))
    # nor does moving the folder that held a removed staged copy carry it along, though a
    # kill left its objects behind under a commit marker
    leftover = next(r for r in removed if r.startswith("restored/"))
    store.bucket.put(f"{PREFIX}/{JOB}/{leftover}/result.json", b"{}", None)
    store.bucket.put(f"{PREFIX}/{JOB}/{leftover}/{MOVED}", json.dumps({"dst": "elsewhere"}).encode(), None)
    store.bucket.put(f"{PREFIX}/{JOB}/restored/README", b"staged by hand", None)
    fs = src.fs()
    await fs.rename(f"{root}/restored", f"{root}/.evaldesk-quarantine/{record.id}/kept/restored")
    moved = store.objects(f"{PREFIX}/{JOB}/.evaldesk-quarantine/{record.id}/kept/")
    assert not [k for k in moved if leftover.split("/")[1] in k]
    assert [k.rpartition("/")[2] for k in moved] == ["README"]
    assert len(exp.trials) == 14


async def test_a_move_never_overwrites_and_a_conflicting_copy_is_left(store: Emulator, tmp_path: Path) -> None:
    src, _ = _setup(store, tmp_path)
    fs: StoreFS = src.fs()
    root = f"/{store.bucket_name}/{PREFIX}/{JOB}"
    exp = _exp(src)
    a, b = exp.trials[0].path, exp.trials[1].path
    with pytest.raises(FileExistsError):
        await fs.rename(f"{root}/{a}", f"{root}/{b}")
    with pytest.raises(Conflict):  # an overwrite naming a version that is not the current one
        await fs._io(fs._put, f"{root}/{a}/result.json", b"x", "1")
    ctx = StepContext(fs)
    assert (await ctx.fs.stat(f"{root}/{a}")) is not None


async def test_a_multipart_artifact_moves_and_comes_back_whole(s3_store: Emulator, tmp_path: Path) -> None:
    """An artifact uploaded in parts (S3's ETag is then not its MD5, and its copy's differs)
    goes into the quarantine and back whole."""
    store = s3_store
    src, _ = _setup(store, tmp_path)
    exp = _exp(src)
    from services.remediations.dedupe import plan_dedupe

    surplus = plan_dedupe(exp).remove[0]
    key = f"{PREFIX}/{JOB}/{surplus}/agent/trajectory.bin"
    c = store.bucket.client
    up = c.create_multipart_upload(Bucket=store.bucket_name, Key=key)
    parts = []
    for n, chunk in enumerate((b"a" * (5 << 20), b"b" * 1024), start=1):
        r = c.upload_part(Bucket=store.bucket_name, Key=key, UploadId=up["UploadId"], PartNumber=n, Body=chunk)
        parts.append({"ETag": r["ETag"], "PartNumber": n})
    c.complete_multipart_upload(Bucket=store.bucket_name, Key=key, UploadId=up["UploadId"],
                                MultipartUpload={"Parts": parts})
    assert "-" in c.head_object(Bucket=store.bucket_name, Key=key)["ETag"]
    before = store.objects(PREFIX)
    record = await _apply(src, tmp_path)
    after = store.objects(PREFIX)
    assert key not in after
    moved = key.replace(f"{JOB}/", f"{JOB}/.evaldesk-quarantine/{record.id}/trials/", 1)
    assert after[moved] == before[key]
    await WritePath(Journal(tmp_path / "journal.jsonl")).undo(record, registry.context("dedupe", src, Config()))
    assert store.objects(PREFIX) == before


async def test_a_move_back_cut_short_after_its_commit_counts_the_trial_once(store: Emulator,
                                                                             tmp_path: Path) -> None:
    """An undo killed after a move's commit, before its deletions: the trial is in the job
    (once), not in the quarantine; the next write under the lock finishes the deletions."""
    from services.objectstore.fs import INCOMING

    src, _ = _setup(store, tmp_path)
    record = await _apply(src, tmp_path)
    step = next(s for s in record.plan.steps if s.kind == "move" and "/" not in s.label)
    q, j = src.fs().paths.key(step.dst), src.fs().paths.key(step.src)
    copied = store.bucket.objects(q + "/")
    for o in copied:
        store.bucket.copy(o, j + o.key[len(q):])
    store.bucket.put(f"{j}/{INCOMING}", json.dumps({"src": q}).encode(), None)
    store.bucket.put(f"{q}/{MOVED}", json.dumps({"dst": j, "objects": {o.key: o.version for o in copied}}).encode(),
                     None)
    exp = _exp(src)
    assert [t.path for t in exp.trials].count(step.label) == 1 and len(exp.trials) == 9
    fs = src.fs()
    assert await fs.stat(step.src) is not None and await fs.stat(step.dst) is None
    await fs.mkdir_exclusive(f"{record.plan.lock_dir}/.evaldesk-lock")
    assert not [k for k in store.objects(PREFIX) if k.endswith((INCOMING, MOVED))]
    assert not store.bucket.objects(q + "/") and store.bucket.objects(j + "/")


async def test_an_object_over_the_single_copy_limit_is_copied_in_parts(s3_store: Emulator, tmp_path: Path) -> None:
    """S3's CopyObject copies at most 5 GiB; a larger object is copied in parts (UploadPartCopy
    naming the source's ETag, CompleteMultipartUpload only if the destination is absent). The
    limit is the bucket's setting: lowered here so an 11 MiB artifact takes that path."""
    from services.objectstore.s3 import S3Bucket
    from services.objectstore.store import ABSENT

    store = s3_store
    d = duplicated_job(tmp_path / "local").write()
    store.upload(d.parent, PREFIX)
    bucket = S3Bucket(store.bucket_name, copy_max=8 << 20, part_size=5 << 20)
    src = StoreSource(bucket, PREFIX, cache=False)
    from services.remediations.dedupe import plan_dedupe

    surplus = plan_dedupe(_exp(src)).remove[0]
    key = f"{PREFIX}/{JOB}/{surplus}/agent/trajectory.bin"
    big = bytes(range(256)) * (11 << 12)  # 11 MiB: three parts
    store.bucket.client.put_object(Bucket=store.bucket_name, Key=key, Body=big, ContentType="application/x-traj",
                                   Metadata={"written-by": "harbor"})
    before = store.objects(PREFIX)
    record = await _apply(src, tmp_path)
    moved = key.replace(f"{JOB}/", f"{JOB}/.evaldesk-quarantine/{record.id}/trials/", 1)
    after = store.objects(PREFIX)
    assert key not in after and after[moved] == big
    head = store.bucket.client.head_object(Bucket=store.bucket_name, Key=moved)
    assert head["ETag"].strip('"').endswith("-3")  # made of three copied parts
    assert head["ContentType"] == "application/x-traj" and head["Metadata"] == {"written-by": "harbor"}
    await WritePath(Journal(tmp_path / "journal.jsonl")).undo(record, registry.context("dedupe", src, Config()))
    assert store.objects(PREFIX) == before

    # the same preconditions as one copy: a destination that exists is never overwritten, a
    # source rewritten since it was listed is refused, and no part is left behind
    [obj] = [o for o in bucket.objects(key) if o.key == key]
    taken = bucket.put(f"{PREFIX}/elsewhere.bin", b"theirs", ABSENT)
    with pytest.raises(Conflict):
        bucket.copy(obj, taken.key)
    assert store.objects(f"{PREFIX}/elsewhere.bin")[taken.key] == b"theirs"
    store.bucket.put(key, big[::-1], None)
    with pytest.raises(Conflict):
        bucket.copy(obj, f"{PREFIX}/other.bin")
    assert not store.objects(f"{PREFIX}/other.bin")
    assert not store.bucket.client.list_multipart_uploads(Bucket=store.bucket_name).get("Uploads")
