"""One reading of a run: generated job dirs read cold, warm from the parse cache, over SSH (the
remote program) and over SFTP, before and after the mutations that trip caches (an older
Harbor trial's config.json changed, a result.json rewritten at the same size within the same
second with its mtime restored, a trial dir renamed, one deleted) — every path gives what an
oracle written plainly from DESIGN 3 and 3a gives."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import os
import shutil
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from services.core.models import Snapshot
from services.core.policy import DEFAULT_BENIGN
from services.harbor import scan, walk
from services.harbor.source import HarborSource
from services.harbor.ssh_source import SSHHarborSource
from services.transport.ssh import HostSpec, SSHPool
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server

# -- the oracle: DESIGN 3a's layout and 3's validity, written out without evaldesk -----------------


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _is_trial(p: Path) -> bool:
    return os.path.lexists(p / "config.json") or os.path.lexists(p / "result.json")


def oracle(job: Path) -> tuple[tuple[int, ...], list[tuple[Any, ...]]]:
    found: list[tuple[str, Path]] = []
    for name in sorted(os.listdir(job)):
        p = job / name
        if name == walk.QUARANTINE_DIR or p.is_symlink() or not p.is_dir():
            continue
        if _is_trial(p):
            found.append((name, p))
        elif not name.startswith("."):  # a folder of staged copies, one level deep
            for sub in sorted(os.listdir(p)):
                q = p / sub
                if not q.is_symlink() and q.is_dir() and _is_trial(q):
                    found.append((f"{name}/{sub}", q))
    rows = []
    for rel, p in found:
        cfg = _obj(_load(p / "config.json"))
        task_cfg = _obj(cfg.get("task"))
        dir_name = rel.rsplit("/", 1)[-1]
        if not os.path.lexists(p / "result.json"):
            status, reward, exc, data = "running", None, None, {}
        else:
            raw = _load(p / "result.json")
            data = _obj(raw)
            r = _obj(_obj(data.get("verifier_result")).get("rewards")).get("reward")
            finite = isinstance(r, int | float) and not isinstance(r, bool) and math.isfinite(r)
            reward = float(r) if finite else None
            status = "valid" if finite else "errored"
            exc = _obj(data.get("exception_info")).get("exception_type") if isinstance(raw, dict) else None
        name = data.get("trial_name") or cfg.get("trial_name") or dir_name
        cfg_task = (task_cfg.get("name") or "").rsplit("/", 1)[-1] or (task_cfg.get("path") or "").rstrip("/").rsplit(
            "/", 1)[-1]
        task = data.get("task_name") or cfg_task or (name.rpartition("__")[0] if "__" in name else name)
        rows.append([rel, name, status, reward, task, exc, False])
    first: dict[str, list[Any]] = {}
    for row in sorted(rows, key=lambda r: (r[0].count("/"), r[0])):  # the shallower path is the original
        if row[1] in first:
            row[6] = True
        else:
            first[row[1]] = row
    originals = [r for r in rows if not r[6]]
    done = [r for r in originals if r[2] != "running"]
    invalid = sum(1 for r in done if (r[5] and r[5] not in DEFAULT_BENIGN) or (r[3] is None and not r[5]))
    counts = (len(done), sum(r[2] == "valid" for r in done), sum(r[2] == "errored" for r in done),
              sum(r[2] == "running" for r in originals), invalid, len(rows) - len(originals))
    return counts, sorted((r[0], r[2], r[3], r[4], r[5], r[6]) for r in rows)


def figures(snap: Snapshot) -> tuple[tuple[int, ...], list[tuple[Any, ...]]]:
    (exp,) = snap.experiments
    c = exp.counts
    return ((c.total, c.valid, c.errored, c.running, c.invalid_errors, c.copies),
            sorted((t.path, t.status.value, t.reward, t.task_name, t.exception_type, t.copy_of is not None)
                   for t in exp.trials))


# -- generated job dirs ------------------------------------------------------------------------

KINDS = ("valid", "zero", "errored", "benign_scored", "benign_unscored", "neither", "nan", "bool", "text_reward",
         "half", "empty", "array", "running", "legacy")
NAMES = st.sampled_from(["task", "fix-bug", "t w o", "semi;colon", "$(whoami)", "quote'd", "esc\x1b[31m",
                         "new\nline", "caf\udce9"])


@dataclass
class Draft:
    kind: str
    task: str
    copy: bool = False


def _result(kind: str, task: str, name: str) -> bytes:
    reward: Any = {"valid": 1.0, "zero": 0.0, "benign_scored": 0.0, "nan": float("nan"), "bool": True,
                   "text_reward": "1"}.get(kind)
    exc = {"errored": "DaytonaError", "benign_scored": "AgentTimeoutError",
           "benign_unscored": "AgentTimeoutError"}.get(kind)
    doc: dict[str, Any] = {
        "task_name": task, "trial_name": name, "source": "terminal_bench_2",
        "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
        "exception_info": None if exc is None else {"exception_type": exc, "exception_message": "boom"},
        "started_at": "2026-03-02T09:00:00Z", "finished_at": "2026-03-02T09:05:00Z",
        "agent_result": {"n_input_tokens": 10, "n_output_tokens": 5, "cost_usd": 0.5},
    }
    if kind == "legacy":  # older Harbor: the task comes from config.json
        del doc["task_name"], doc["trial_name"]
        doc["verifier_result"] = {"rewards": {"reward": 1.0}}
    text = json.dumps(doc, indent=2)
    return {"half": text[: len(text) // 2], "empty": "", "array": "[1, 2]"}.get(kind, text).encode(
        "utf-8", "surrogateescape")


def write_job(root: Path, drafts: list[Draft]) -> Path:
    job = root / "terminal_bench_2_org-Model-8B_2026-03-02__09-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": job.name, "n_attempts": 1,
                                                 "datasets": [{"name": "terminal_bench_2"}]}))
    (job / "result.json").write_text(json.dumps({"id": "x", "started_at": "2026-03-02T09:00:00",
                                                 "finished_at": "2026-03-02T10:00:00",
                                                 "n_total_trials": len(drafts), "stats": {"evals": {}}}))
    (job / ".cache").mkdir()  # a hidden folder with no trial files: skipped
    made: list[tuple[str, Path]] = []
    for i, d in enumerate(drafts):
        if d.copy and made:  # a staged copy of an earlier trial, one level deeper
            name, src = made[i % len(made)]
            if (src / "result.json").exists():
                shutil.copytree(src, job / "restored" / name)
            continue
        name = f"{d.task[:32].rstrip('_-')}__{i:07d}"
        tdir = job / name
        tdir.mkdir()
        cfg = {"trial_name": name, "task": {"path": f"datasets/terminal_bench_2/{d.task}",
                                           "name": f"org/{d.task}-cfg" if d.kind == "legacy" else None},
               "agent": {"name": "terminus-2", "model_name": "org/Model-8B"}}
        (tdir / "config.json").write_bytes(json.dumps(cfg).encode("utf-8", "surrogateescape"))
        if d.kind != "running":
            (tdir / "result.json").write_bytes(_result(d.kind, d.task, name))
        made.append((name, tdir))
    os.symlink(job / made[0][0], job / "alias__LINKED0") if made else None
    return job


def mutate(job: Path, seed: int) -> None:
    """Every mutation that trips a cache, each where the job has what it needs."""
    trials = sorted(p for p in job.iterdir() if p.is_dir() and not p.is_symlink() and _is_trial(p))
    legacy = [p for p in trials if (p / "result.json").exists() and walk.needs_config(_bytes(p / "result.json"))]
    if legacy:  # the record came from config.json too: change what it says
        cfg = json.loads(legacy[0].joinpath("config.json").read_bytes())
        cfg["task"]["name"] = "org/renamed-in-config"
        legacy[0].joinpath("config.json").write_text(json.dumps(cfg))
    scored = [p for p in trials if b'"reward": 1.0' in _bytes(p / "result.json")]
    if scored:  # same size, same mtime, new content
        f = scored[seed % len(scored)] / "result.json"
        st_ = f.stat()
        f.write_bytes(f.read_bytes().replace(b'"reward": 1.0', b'"reward": 0.5', 1))
        os.utime(f, ns=(st_.st_atime_ns, st_.st_mtime_ns))
    rest = [p for p in trials if p not in scored[:1] and p not in legacy[:1]]
    if rest:
        rest[seed % len(rest)].rename(job / f"moved__{seed % 9999999:07d}")
    if len(rest) > 1:
        shutil.rmtree(rest[(seed + 1) % len(rest)] if rest[(seed + 1) % len(rest)].exists() else rest[0])


def _bytes(p: Path) -> bytes:
    try:
        return p.read_bytes()
    except OSError:
        return b""


drafts = st.lists(st.builds(Draft, kind=st.sampled_from(KINDS), task=NAMES, copy=st.booleans().map(lambda b: b and
                                                                                                        False)),
                  min_size=1, max_size=14).flatmap(
    lambda base: st.lists(st.builds(Draft, kind=st.just("valid"), task=NAMES, copy=st.just(True)), max_size=3).map(
        lambda copies: [Draft("legacy", "older"), Draft("valid", "scored"), Draft("zero", "other"), *base, *copies]))


def same(snap: Snapshot, truth: tuple[tuple[int, ...], list[tuple[Any, ...]]], where: str) -> None:
    got = figures(snap)
    if got != truth:
        extra = [r for r in got[1] if r not in truth[1]]
        missing = [r for r in truth[1] if r not in got[1]]
        raise AssertionError(f"{where}: counts {got[0]} (oracle {truth[0]}); evaldesk alone {extra}; "
                             f"oracle alone {missing}")


RACY_S = 30.0  # longer than the test takes: every read of it is within the racy window of the writes


class _Later(walk.LocalWalkFS):
    """This disk read as if the racy window had passed since the job was written: its files
    are settled, so the parse cache keeps their records."""

    def now(self) -> float:
        return super().now() + 2 * RACY_S


def _as_a_slow_disk(m: pytest.MonkeyPatch) -> None:
    """Every batch of stats and reads found slower than the page cache: all through the readers."""
    m.setattr(walk, "PROBE", 1)
    m.setattr(walk, "SLOW_S", -1.0)


def _cold_disk(root: Path, monkeypatch: pytest.MonkeyPatch) -> Snapshot:
    with monkeypatch.context() as m:
        _as_a_slow_disk(m)
        return HarborSource(root, cache=False).scan_sync()


def _cached(root: Path) -> HarborSource:
    src = HarborSource(root, verify_window_s=0)
    src.walk_fs = _Later()
    return src


@settings(max_examples=12, deadline=None, database=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(drafts=drafts, seed=st.integers(0, 10**6))
async def test_every_reading_of_a_run_is_the_oracles(ssh_server: InProcessSSHServer, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, drafts: list[Draft],
                                                     seed: int) -> None:
    monkeypatch.setattr(walk, "RACY_S", RACY_S)
    root = tmp_path / uuid.uuid4().hex
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / "cache"))
    job = write_job(root / "jobs", drafts)
    foreign = sum(1 for p in job.iterdir() if "\udce9" in p.name)
    pool = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
    remote = SSHHarborSource(ssh_server.spec(), [str(root / "jobs")], pool=pool, slurm=False)
    sftp = SSHHarborSource(ssh_server.spec(), [str(root / "jobs")], pool=pool, slurm=False, python="no-python-here")
    warm = _cached(root / "jobs")
    try:
        truth = oracle(job)
        same(HarborSource(root / "jobs", cache=False).scan_sync(), truth, "cold")
        same(_cold_disk(root / "jobs", monkeypatch), truth, "cold disk")
        same(warm.scan_sync(), truth, "first read, records kept")
        again = _cached(root / "jobs").scan_sync()
        same(again, truth, "warm, from the parse cache")
        assert again.stats["files_read"] == foreign  # (a name that is not UTF-8 is never kept)
        same(await remote.scan(), truth, "remote program")
        same(await sftp.scan(), truth, "SFTP")

        await asyncio.to_thread(mutate, job, seed)
        truth = oracle(job)
        same(HarborSource(root / "jobs", cache=False).scan_sync(), truth, "cold after")
        same(_cold_disk(root / "jobs", monkeypatch), truth, "cold disk after")
        same(warm.scan_sync(), truth, "the same source, polled")
        same(_cached(root / "jobs").scan_sync(), truth, "warm after")
        same(await remote.scan(), truth, "remote program after")
        same(await sftp.scan(), truth, "SFTP after")
    finally:
        await remote.close()
        await sftp.close()
        await pool.close()
        await warm.close()


def test_a_first_read_keys_each_result_from_the_open_file_and_stats_none(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(scan, "READ_BATCH", 3)
    job = write_job(tmp_path / "jobs", [Draft("valid", f"t{i}") for i in range(7)] + [Draft("running", "r")])
    stated: list[str] = []
    real = walk.stat_local

    def stat_local(path: str) -> walk.Key:
        stated.append(path)
        return real(path)

    with monkeypatch.context() as m:
        m.setattr(walk, "stat_local", stat_local)
        first = _cached(tmp_path / "jobs").scan_sync()
    assert first.experiments[0].counts.valid == 7 and first.stats["files_read"] == 8
    assert not [p for p in stated if p.endswith("/result.json") and Path(p).parent.parent == job and Path(p).is_file()]
    # the keys taken from the open files are the keys a stat gives: the next process reads nothing
    again = _cached(tmp_path / "jobs").scan_sync()
    assert again.stats["files_read"] == 0 and again.experiments[0].counts == first.experiments[0].counts


class _Hinted(walk.LocalWalkFS):
    """This disk, with the order of what the scanner hinted and read."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []

    def prefetch(self, paths: Sequence[str]) -> None:
        self.events += [("hint", p) for p in paths]
        super().prefetch(paths)

    def read(self, paths: Sequence[str]) -> list[walk.Read]:
        self.events += [("read", p) for p in paths]
        return super().read(paths)


@pytest.mark.parametrize("cold", [True, False], ids=["cold disk", "page cache"])
def test_on_a_cold_disk_each_batch_of_trial_files_is_hinted_to_the_kernel_before_it_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cold: bool) -> None:
    job = write_job(tmp_path / "jobs", [Draft("valid", f"t{i}") for i in range(7)] + [Draft("running", "r")])
    monkeypatch.setattr(scan, "READ_BATCH", 3)
    advised: list[int] = []
    real = os.posix_fadvise
    def fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        advised.append(fd)
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", fadvise)
    if cold:
        _as_a_slow_disk(monkeypatch)
    src = HarborSource(tmp_path / "jobs", cache=False)
    src.walk_fs = fs = _Hinted()
    snap = src.scan_sync()
    assert snap.experiments[0].counts.valid == 7 and snap.experiments[0].counts.running == 1
    own = {f"{job}/{n}" for n in walk.JOB_FILES}
    reads = [p for e, p in fs.events if e == "read" and p not in own]  # (the trials' files)
    if not cold:
        assert advised == [] and fs.cold is False
        return
    first_read = {p: fs.events.index(("read", p)) for p in reads}
    hinted = {p: fs.events.index(("hint", p)) for e, p in fs.events if e == "hint"}
    assert set(hinted) == set(reads) and len(hinted) == 8
    assert all(hinted[p] < first_read[p] for p in hinted)
    # the second batch was hinted before the first one was read, to come in while it is parsed
    assert hinted[reads[3]] < first_read[reads[0]]
    assert len(advised) == len(hinted)


def test_a_settled_dir_is_listed_afresh_whenever_its_entries_change(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walk, "RACY_S", RACY_S)
    monkeypatch.setattr(walk.LocalWalkFS, "_listed", {})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fs = _Later()
    first = fs.list([str(tmp_path)])[0]
    assert first == [("a", "dir"), ("b", "dir")] and fs.list([str(tmp_path)])[0] is first  # kept while unchanged
    (tmp_path / "c").mkdir()
    assert fs.list([str(tmp_path)])[0] == [("a", "dir"), ("b", "dir"), ("c", "dir")]
    (tmp_path / "c").rename(tmp_path / "d")
    (tmp_path / "b").rmdir()
    (tmp_path / "b").write_text("{}")
    assert fs.list([str(tmp_path)])[0] == [("a", "dir"), ("b", "file"), ("d", "dir")]
    # a dir that changed within the racy window is never kept: it could change again in the same tick
    monkeypatch.setattr(walk.LocalWalkFS, "_listed", {})
    now = walk.LocalWalkFS()
    assert now.list([str(tmp_path)])[0] is not now.list([str(tmp_path)])[0]


@contextlib.contextmanager
def _one_job_stalls(jobs: Path, monkeypatch: pytest.MonkeyPatch, call: str) -> Iterator[tuple[Path, Path]]:
    """Two jobs on a slow disk that stops answering (`call`, walk.stat_local or walk.read_local)
    for one trial file of the first: (that job, the other)."""
    _as_a_slow_disk(monkeypatch)
    monkeypatch.setattr(walk, "STUCK_S", 0.3)
    stuck = write_job(jobs, [Draft("valid", f"t{i}") for i in range(4)])
    fine = shutil.copytree(stuck, jobs / "another-job", symlinks=True)
    gate = threading.Event()
    answer = getattr(walk, call)

    def hung_nfs(path: str) -> Any:
        if path.startswith(f"{stuck}/") and path.endswith("t3__0000003/result.json"):
            gate.wait(30)
        return answer(path)

    monkeypatch.setattr(walk, call, hung_nfs)
    try:
        yield stuck, fine
    finally:
        gate.set()


def test_a_disk_that_stops_answering_is_an_error_of_its_job_not_a_hang(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with _one_job_stalls(tmp_path / "jobs", monkeypatch, "read_local") as (stuck, fine):
        snap = HarborSource(tmp_path / "jobs", cache=False).scan_sync()
    [error] = snap.errors
    assert error.where.endswith(stuck.name) and "did not answer for 0 s" in error.message
    assert [e.counts.valid for e in snap.experiments if e.path.endswith(fine.name)] == [4]


@pytest.mark.parametrize("call", ["stat_local", "read_local"], ids=["before its job line", "amid its trials"])
async def test_on_an_ssh_host_a_silent_disk_is_an_error_of_its_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   call: str) -> None:
    """The remote program, run here on the request the client builds: the job whose disk stops
    answering is an error of that job; the others arrive whole."""

    async def on_the_host(command: str, stdin: bytes = b"") -> tuple[int | None, bytes, bytes]:
        n, _, rest = stdin.partition(b"\n")
        out = io.BytesIO()
        await asyncio.to_thread(walk.serve, io.BytesIO(rest[int(n):]), out)
        return 0, out.getvalue(), b""

    src = SSHHarborSource(HostSpec(host="login1"), [str(tmp_path / "jobs")], slurm=False)
    monkeypatch.setattr(src, "_run", on_the_host)
    with _one_job_stalls(tmp_path / "jobs", monkeypatch, call) as (stuck, fine):
        snap = await src.scan()
    assert [(e.where, "did not answer for 0 s" in e.message) for e in snap.errors] == [(f"login1:{stuck}", True)]
    assert [(e.path, e.counts.valid) for e in snap.experiments] == [(str(fine), 4)]
