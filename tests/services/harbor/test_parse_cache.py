"""The persistent parse cache is keyed by every file a record was built from and never keeps a record
whose file changed within the racy window; it only ever costs speed: a corrupt file, a read-only dir,
a full disk and two processes sharing it give the same figures."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.core.policy import Policy
from services.core.xdg import cache_dir
from services.harbor import walk
from services.harbor.cache import ParseCache, keys_digest
from services.harbor.parse import decode, encode, parse_trial
from services.harbor.source import HarborSource
from tests.services.harbor.test_bad_input import GARBAGE
from tests.support.harbor_factory import JobBuilder
from tests.support.no_dac import run_without_dac

T0 = datetime(2026, 11, 1, tzinfo=UTC)

SHAPES: list[bytes] = [
    *[g for g in GARBAGE if g is not None],
    json.dumps({"task_name": "t", "trial_name": "t__A", "verifier_result": {"rewards": {"reward": 1}},
                "started_at": "2026-11-01T00:00:00Z", "finished_at": "2026-11-01T00:10:00.5+02:00",
                "agent_result": {"n_input_tokens": 5, "cost_usd": 1},
                "agent_info": {"name": "a", "model_info": {"name": "m"}}}).encode(),
    json.dumps({"verifier_result": {"rewards": {"score": 0.5}}, "agent_info": {"name": ""}}).encode(),
    json.dumps({"verifier_result": {"rewards": {"reward": "1"}}, "exception_info": {"exception_type": "X"}}).encode(),
    json.dumps({"verifier_result": {"rewards": {"reward": True}}}).encode(),
    json.dumps({"verifier_result": {"rewards": {"reward": 1.0}}, "started_at": "2026-13-01T00:00:00"}).encode(),
    json.dumps({"verifier_result": {"rewards": {"reward": 1.0}}, "started_at": "2026-11-01 00:00:00"}).encode(),
    json.dumps({"verifier_result": {"rewards": {"reward": 1.0}}, "agent_result": {"n_input_tokens": 5.0}}).encode(),
    json.dumps({"verifier_result": {"rewards": {"reward": 1.0}}, "schema_version": "2"}).encode(),
    json.dumps({"verifier_result": {"rewards": {"reward": 1.0}}, "reward_valid": 1}).encode(),
    json.dumps({"verifier_result": {"rewards": {"reward": -0.0}}, "task_name": ""}).encode(),
    json.dumps({"step_results": [{"verifier_result": {"rewards": {"reward": 1.0}}}]}).encode(),
    json.dumps({"exception_info": {"exception_type": "AgentTimeoutError", "occurred_at": "bad"}}).encode(),
    json.dumps({"agent_info": {"model_info": {"name": ""}}, "verifier_result": None}).encode(),
]


@pytest.mark.parametrize("data", SHAPES, ids=range(len(SHAPES)))
def test_a_record_round_trips_the_parsers_trial(data: bytes) -> None:
    t = parse_trial("x__AAAAAAA", "x__AAAAAAA", data, None, 12.5)
    rec = encode(t)
    assert rec is not None and decode("x__AAAAAAA", rec) == t


def _job(tmp_path: Path, n: int = 12) -> Path:
    job = JobBuilder(tmp_path / "jobs", "terminal_bench_2_cache_2026-01-01__00-00-00", n_attempts=1)
    for i in range(n):
        job.add(f"task-{i}", float(i % 2) if i % 5 else None, "DaytonaError" if i % 5 == 0 else None,
                started=T0 + timedelta(minutes=i))
    job.add("live", running=True)
    return job.write()


def _figures(root: Path, **kw: object) -> tuple:
    snap = HarborSource(root, **kw).scan_sync()  # type: ignore[arg-type]
    exp = snap.experiments[0]
    return (exp.counts, exp.score, exp.problems,
            sorted((t.path, t.status, t.reward, t.exception_type, t.attempt, t.parse_error, t.started_at,
                    t.n_input_tokens, t.mtime) for t in exp.trials))


def test_a_second_process_reads_nothing_and_sees_the_same(tmp_path: Path) -> None:
    d = _job(tmp_path)
    truth = _figures(d, cache=False)
    first = HarborSource(d).scan_sync()
    assert first.stats["files_read"] == 13 and first.stats["cache_hits"] == 0
    again = HarborSource(d).scan_sync()
    assert again.stats["files_read"] == 0
    assert _figures(d) == truth
    assert any(cache_dir().glob("scan-*.sqlite"))


class _CountingFS(walk.LocalWalkFS):
    def __init__(self) -> None:
        self.stats = 0

    def stat(self, paths):  # type: ignore[no-untyped-def]
        self.stats += len(paths)
        return super().stat(paths)


def test_the_trials_behind_a_census_answer_are_its_own_records_with_no_second_stat(tmp_path: Path) -> None:
    d = _job(tmp_path)
    truth = _figures(d, cache=False)
    HarborSource(d).scan_sync()  # fills the cache, and the job's summary
    src = HarborSource(d)
    fs = src.walk_fs = _CountingFS()
    exp = src.scan_sync().experiments[0]
    assert "trials" not in exp.__dict__  # the summary's census answered
    before = fs.stats
    figures = (exp.counts, exp.score, exp.problems,
               sorted((t.path, t.status, t.reward, t.exception_type, t.attempt, t.parse_error, t.started_at,
                       t.n_input_tokens, t.mtime) for t in exp.trials))
    assert fs.stats == before  # the trials come from the keys the census was checked under
    assert figures == truth


def test_the_cache_is_never_trusted_over_the_files(tmp_path: Path) -> None:
    d = _job(tmp_path)
    HarborSource(d).scan_sync()
    # same size, same mtime, new content: only the ctime (which cannot be set back) tells
    f = next(p for p in sorted(d.iterdir()) if (p / "result.json").exists()) / "result.json"
    st = os.stat(f)
    data = f.read_bytes()
    new = data.replace(b'"DaytonaError"', b'"DaytonaErrox"') if b"DaytonaError" in data else data.replace(
        b'"reward": 0.0', b'"reward": 9.0')
    assert new != data and len(new) == len(data)
    f.write_bytes(new)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _figures(d) == _figures(d, cache=False)
    # a trial dir that goes, and one that comes
    (d / "task-new__NEW0001").mkdir()
    (d / "task-new__NEW0001" / "result.json").write_text('{"verifier_result": {"rewards": {"reward": 1}}}')
    assert _figures(d) == _figures(d, cache=False)


def test_a_record_built_from_config_json_too_is_keyed_by_it(tmp_path: Path) -> None:
    # an older Harbor left task_name out of result.json: the task and model come from config.json
    d = _job(tmp_path)
    old = d / "legacy__AAAAAAA"
    old.mkdir()
    (old / "result.json").write_text('{"verifier_result": {"rewards": {"reward": 1.0}}}')
    (old / "config.json").write_text(json.dumps({"task": {"name": "beta"}, "agent": {"model_name": "m1"}}))
    first = HarborSource(d).scan_sync().experiments[0]
    assert next((t.task_name, t.model_name) for t in first.trials if t.path == old.name) == ("beta", "m1")
    (old / "config.json").write_text(json.dumps({"task": {"name": "alpha"}, "agent": {"model_name": "m2"}}))
    warm = HarborSource(d).scan_sync()
    assert next((t.task_name, t.model_name) for t in warm.experiments[0].trials if t.path == old.name) == \
        ("alpha", "m2")
    assert warm.stats["files_read"] == 1
    assert _figures(d) == _figures(d, cache=False)
    assert HarborSource(d).scan_sync().stats["files_read"] == 0


class _NoCtimeFS(walk.LocalWalkFS):
    """A store whose keys are mtime and size alone (SFTP; coarse-timestamp NFS)."""

    def stat(self, paths):  # type: ignore[no-untyped-def]
        mask = ~(((1 << 64) - 1) << 128 | ((1 << 64) - 1))
        return [k if k is None or k < 0 else k & mask for k in super().stat(paths)]


def test_a_file_rewritten_within_the_racy_window_is_read_again(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walk, "RACY_S", 2.0)
    d = _job(tmp_path, n=3)
    f = next(p / "result.json" for p in sorted(d.iterdir())
             if (p / "result.json").exists() and b'"reward": 1.0' in (p / "result.json").read_bytes())
    src = HarborSource(d)
    src.walk_fs = _NoCtimeFS()
    before = {t.path: t.reward for t in src.scan_sync().experiments[0].trials}
    st = os.stat(f)
    data = f.read_bytes()
    new = data.replace(b'"reward": 1.0', b'"reward": 7.0')
    assert new != data and len(new) == len(data)
    f.write_bytes(new)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: the same key here
    after = {t.path: t.reward for t in src.scan_sync().experiments[0].trials}
    assert before[f.parent.name] == 1.0 and after[f.parent.name] == 7.0
    # nor did the first read leave a record another process would trust
    fresh = HarborSource(d)
    fresh.walk_fs = _NoCtimeFS()
    assert {t.path: t.reward for t in fresh.scan_sync().experiments[0].trials} == after


def test_a_corrupt_cache_file_is_replaced(tmp_path: Path) -> None:
    d = _job(tmp_path)
    truth = _figures(d, cache=False)
    HarborSource(d).scan_sync()
    for path in cache_dir().glob("scan-*.sqlite"):
        path.write_bytes(b"this is not a database" * 100)
    src = HarborSource(d)
    assert _figures(d) == truth
    snap = src.scan_sync()
    assert snap.stats["files_read"] == 0  # rebuilt by the scan before, used now


def test_garbage_records_are_read_again(tmp_path: Path) -> None:
    d = _job(tmp_path)
    truth = _figures(d, cache=False)
    HarborSource(d).scan_sync()
    path = next(cache_dir().glob("scan-*.sqlite"))
    db = sqlite3.connect(path)
    db.execute("UPDATE packs SET data = x'00'")  # not a pack
    db.execute("UPDATE jobs SET census = x'00'")  # the job's summary
    db.commit()
    db.close()
    assert _figures(d) == truth


def test_a_new_version_drops_the_old_records(tmp_path: Path) -> None:
    d = _job(tmp_path)
    HarborSource(d).scan_sync()
    path = next(cache_dir().glob("scan-*.sqlite"))
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET v = 'an older evaldesk' WHERE k = 'version'")
    db.commit()
    db.close()
    assert HarborSource(d).scan_sync().stats["files_read"] == 13
    assert len({rel for rel, _, _ in ParseCache(str(d)).rows(str(d))}) == 13


def test_no_cache_reads_every_file(tmp_path: Path) -> None:
    d = _job(tmp_path)
    HarborSource(d).scan_sync()
    assert HarborSource(d, cache=False).scan_sync().stats["files_read"] == 13
    out = subprocess.run([sys.executable, "-m", "tui.cli", "--batch", "list", "--no-cache", str(d), "--format",
                          "json"], capture_output=True, text=True, env=os.environ | {"PYTHONPATH": os.getcwd()})
    assert out.returncode in (0, 1), out.stderr
    assert json.loads(out.stdout)["experiments"][0]["valid"] == 9


def test_a_read_only_cache_dir_only_costs_speed(tmp_path: Path) -> None:
    d = _job(tmp_path)
    truth = _figures(d, cache=False)
    ro = tmp_path / "ro-cache"
    (ro / "evaldesk").mkdir(parents=True)
    os.chmod(ro / "evaldesk", 0o555)
    code = f"""
import os, sys
os.environ["XDG_CACHE_HOME"] = {str(ro)!r}
from tests.services.harbor.test_parse_cache import _figures
from services.harbor.source import HarborSource
from pathlib import Path
snap = HarborSource({str(d)!r}).scan_sync()
print(repr(_figures(Path({str(d)!r}))))
print(" | ".join(e.message for e in snap.errors))
"""
    out = run_without_dac(code)
    assert out.returncode == 0, out.stderr
    figures, problem = out.stdout.splitlines()[:2]
    assert figures == repr(truth)
    assert "cannot" in problem and "the parse cache is off, so every file is read" in problem


def test_a_full_disk_only_costs_speed(tmp_path: Path) -> None:
    d = _job(tmp_path, n=60)
    truth = _figures(d, cache=False)

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    code = f"""
from pathlib import Path
from tests.services.harbor.test_parse_cache import _figures
print(repr(_figures(Path({str(d)!r}))))
print(repr(_figures(Path({str(d)!r}))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=small_files,
                         env=os.environ | {"PYTHONPATH": os.getcwd()}, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [repr(truth)] * 2


def test_two_processes_sharing_the_cache(tmp_path: Path) -> None:
    d = _job(tmp_path, n=200)
    truth = repr(_figures(d, cache=False))
    code = f"""
from pathlib import Path
from tests.services.harbor.test_parse_cache import _figures
for _ in range(4):
    print(repr(_figures(Path({str(d)!r}))))
"""
    env = os.environ | {"PYTHONPATH": os.getcwd()}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.splitlines() == [truth] * 4


def test_the_cache_is_bounded_and_forgets_gone_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import services.harbor.cache as cache_mod

    d = _job(tmp_path)
    cache = ParseCache(str(d))
    HarborSource(d, cache=cache).scan_sync()
    cache.forget_jobs_except(set())
    assert list(cache.rows(str(d))) == []
    monkeypatch.setattr(cache_mod, "MAX_BYTES", 5)
    HarborSource(d, cache=cache).scan_sync()
    db = sqlite3.connect(cache.path)
    assert db.execute("SELECT count(*) FROM packs").fetchone()[0] == 0
    db.close()


def test_the_policy_used_by_the_audit_is_not_cached(tmp_path: Path) -> None:
    from services.audit.verdict import audit_experiment

    d = _job(tmp_path)
    HarborSource(d).scan_sync()
    strict = Policy(benign_exceptions=["DaytonaError"])
    exp = HarborSource(d, policy=strict).scan_sync().experiments[0]
    fresh = HarborSource(d, policy=strict, cache=False).scan_sync().experiments[0]
    assert audit_experiment(exp, strict).error_fraction == audit_experiment(fresh, strict).error_fraction


def test_a_job_dir_gone_from_the_root_leaves_the_cache(tmp_path: Path) -> None:
    import shutil

    d = _job(tmp_path)
    other = JobBuilder(tmp_path / "jobs", "dev_set_v2_other_2026-01-01__00-00-00")
    other.add("x", 1.0)
    o = other.write()
    root = tmp_path / "jobs"
    HarborSource(root).scan_sync()
    cache = ParseCache(str(root))
    assert list(cache.rows(str(o))) and list(cache.rows(str(d)))
    shutil.rmtree(o)
    HarborSource(root).scan_sync()
    assert list(cache.rows(str(o))) == [] and list(cache.rows(str(d)))


def test_a_half_written_and_a_foreign_name_are_read_again_and_the_rest_kept(tmp_path: Path) -> None:
    d = _job(tmp_path, n=30)
    (d / "half__AAAAAAA").mkdir()
    (d / "half__AAAAAAA" / "result.json").write_text('{"task_name": "half", "verifier_res')
    foreign = os.fsencode(str(d)) + b"/caf\xe9__FFFFFFF"
    os.mkdir(foreign)
    with open(foreign + b"/result.json", "wb") as fh:
        fh.write(b'{"verifier_result": {"rewards": {"reward": 1.0}}}')
    serial = _figures(d, cache=False)
    first = HarborSource(d).scan_sync()
    assert first.stats["files_read"] == 33
    assert HarborSource(d).scan_sync().stats["files_read"] == 1  # only the foreign name is read again
    assert _figures(d) == serial


def _packs(cache: ParseCache) -> int:
    db = sqlite3.connect(cache.path)
    try:
        return int(db.execute("SELECT count(*) FROM packs").fetchone()[0])
    finally:
        db.close()


def test_a_first_read_is_kept_a_batch_to_a_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import services.harbor.scan as scan_mod

    monkeypatch.setattr(scan_mod, "READ_BATCH", 4)
    d = _job(tmp_path, n=11)  # 11 finished trials and a running one
    cache = ParseCache(str(d))
    HarborSource(d, cache=cache).scan_sync()
    names = sorted(os.listdir(d))  # (a first read takes the job dir's entries 4 at a time)
    batches = [names[i: i + 4] for i in range(0, len(names), 4)]
    assert _packs(cache) == sum(any((d / n).is_dir() for n in b) for b in batches) >= 3
    assert len(list(cache.rows(str(d)))) == 12


def test_packs_are_merged_and_the_latest_record_of_each_trial_kept(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import services.harbor.cache as cache_mod

    monkeypatch.setattr(cache_mod, "MERGE_AT", 1)
    d = _job(tmp_path, n=6)
    cache = ParseCache(str(d))
    HarborSource(d, cache=cache).scan_sync()
    names = sorted(p.name for p in d.iterdir() if (p / "result.json").exists())
    old = datetime(2026, 1, 1).timestamp()
    for i, name in enumerate(names[:4]):  # each rewritten, read by its own process, kept as its own pack
        f = d / name / "result.json"
        f.write_text(f.read_text().replace('"reward": 1.0', '"reward": 0.25'))
        os.utime(f, (old + i, old + i))
        HarborSource(d, cache=cache).scan_sync()
    shutil.rmtree(d / names[5])
    HarborSource(d, cache=cache).scan_sync()
    assert _packs(cache) == 1
    rels = [rel for rel, _, _ in cache.rows(str(d))]
    assert sorted(set(rels)) == sorted(rels)  # merged: one record of each, the gone one forgotten
    assert names[5] not in rels
    assert _figures(d) == _figures(d, cache=False)


def test_the_summary_digest_tells_apart_every_trial_dir_and_key_it_covers() -> None:
    big = walk.pack_key(1_800_000_000 * 10**9, 1_800_000_000 * 10**9, 1 << 40, 1 << 62)
    same = {"a": big, "b": -1}
    assert keys_digest(same, {}) == keys_digest(dict(same), {})
    others = [
        keys_digest({"a": big, "b": -2}, {}),  # a key changed
        keys_digest({"b": -1, "a": big}, {}),  # the same trial dirs in another order
        keys_digest({"a\x01": big, "b": -1}, {}),  # a name with a control byte
        keys_digest({"a": big}, {"b": -1}),  # a key moved to the config.json keys
        keys_digest(same, {"a": 7}),  # a record built from config.json too
        keys_digest({"a": walk.running_key(big), "b": -1}, {}),  # a running trial's key
    ]
    assert len({keys_digest(same, {}), *others}) == 1 + len(others)
