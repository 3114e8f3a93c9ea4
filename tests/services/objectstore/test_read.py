"""Harbor job dirs in GCS and S3 (real emulators) read through the one walk: the audit of a
bucket equals the audit of the same files on local disk; one paged listing per scan, and only
result.json / config.json (and the job's own files) are read, never an artifact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import Config, StoreConfig
from services.core.plain import dump, validate
from services.core.registry import open_source, open_sources
from services.harbor.source import HarborSource
from services.objectstore.source import StoreSource
from tests.services.objectstore.conftest import Emulator
from tests.services.remediations.test_dedupe import duplicated_job
from tests.support.harbor_factory import JobBuilder, healthy_job

PREFIX = "runs/eval_jobs"


def _view(exp: Any, root: str) -> dict[str, Any]:
    """An experiment and its audit, with where it was read from taken out."""
    report = dump(audit_experiment(exp), json=True)
    report.pop("source", None)  # (harbor, harbor+gs, harbor+s3: where it was read from)
    # (a file's mtime is when it was written, locally and in the bucket: not the same instant)
    trials = sorted(({k: v for k, v in t.to_json().items() if k != "mtime"} for t in exp.trials),
                    key=lambda t: str(t.get("path")))
    text = json.dumps({"report": report, "trials": trials, "state": exp.state.value, "n_rep": exp.n_rep,
                       "model": exp.model, "benchmark": exp.benchmark}, sort_keys=True, default=str)
    return json.loads(text.replace(root, "ROOT"))


def _jobs(tmp: Path) -> Path:
    root = tmp / "jobs"
    healthy_job(root, "terminal_bench_2_org-A-8B_2026-03-02__09-00-00", n_tasks=6).write()
    duplicated_job(root).write()
    errored = JobBuilder(root, "swebench_org-B_2026-03-02__10-00-00", dataset="swebench-verified", n_attempts=1)
    errored.add("t1", 1.0)
    errored.add("t2", None, "DaytonaError")
    errored.add("t3", None, "AgentTimeoutError")
    errored.write()
    # an artifact the audit must never download
    (root / "swebench_org-B_2026-03-02__10-00-00" / errored.trials[0].name / "agent").mkdir(exist_ok=True)
    (root / "swebench_org-B_2026-03-02__10-00-00" / errored.trials[0].name / "agent" / "trajectory.bin").write_bytes(
        b"\0" * 4096)
    return root


def _local(root: Path) -> dict[str, dict[str, Any]]:
    snap = HarborSource(root, cache=False).scan_sync()
    assert not [e for e in snap.errors if e.root_failed]
    return {e.id: _view(e, str(root)) for e in snap.experiments}


def _store_source(store: Emulator, prefix: str = PREFIX) -> StoreSource:
    src = open_source(store.url(prefix), Config(scan_cache=False))
    assert isinstance(src, StoreSource)
    return src


def test_audit_of_a_bucket_equals_the_local_audit(store: Emulator, tmp_path: Path) -> None:
    root = _jobs(tmp_path)
    store.upload(root, PREFIX)
    src = _store_source(store)
    snap = src.scan_sync()
    assert not snap.errors
    remote = {e.id: _view(e, f"/{store.bucket_name}/{PREFIX}") for e in snap.experiments}
    assert remote == _local(root)
    assert {e.source for e in snap.experiments} == {f"harbor+{store.scheme}"}


def test_one_listing_per_scan_and_no_artifact_is_read(store: Emulator, tmp_path: Path) -> None:
    root = _jobs(tmp_path)
    store.upload(root, PREFIX)
    src = _store_source(store)
    before = src.bucket.requests
    got: list[str] = []
    real_get = src.bucket.get

    def get(key: str, max_bytes: int) -> Any:
        got.append(key)
        return real_get(key, max_bytes)

    src.bucket.get = get  # type: ignore[method-assign]  (counts what evaldesk asks for; the server answers)
    src.scan_sync()
    names = {k.rpartition("/")[2] for k in got}
    assert names <= {"result.json", "config.json"}, names
    assert not any("agent/" in k or k.endswith("job.log") for k in got)
    listings = src.bucket.requests - before - len(got)
    assert listings == 1  # every object name under the prefix fits one page here


def test_one_job_by_its_own_prefix_and_a_config_entry(store: Emulator, tmp_path: Path) -> None:
    root = _jobs(tmp_path)
    store.upload(root, PREFIX)
    name = "swebench_org-B_2026-03-02__10-00-00"
    snap = _store_source(store, f"{PREFIX}/{name}").scan_sync()
    assert [e.id for e in snap.experiments] == [name]
    config = Config(scan_cache=False, stores=[StoreConfig(url=store.url(PREFIX), name="iris")])
    from services.core.registry import open_all

    sources, errors = open_all([], config)
    assert not errors
    assert [s.label for s in sources] == ["iris"]


def test_a_config_entrys_copy_part_size_reaches_the_s3_bucket(store: Emulator) -> None:
    from pydantic import ValidationError

    from services.core.registry import open_all

    if store.scheme != "s3":
        with pytest.raises(ValidationError, match="copy_part_mib is for s3://"):
            validate(StoreConfig, {"url": store.url(PREFIX), "copy_part_mib": 64})
        return
    config = Config(scan_cache=False, stores=[StoreConfig(url=store.url(PREFIX), copy_part_mib=64)])
    (source,), errors = open_all([], config)
    assert not errors and source.bucket.part_size == 64 << 20  # type: ignore[attr-defined]
    (default,), _ = open_all([], Config(scan_cache=False, stores=[StoreConfig(url=store.url(PREFIX))]))
    assert default.bucket.part_size == 512 << 20  # type: ignore[attr-defined]


def test_a_missing_prefix_or_bucket_is_a_clear_error(store: Emulator) -> None:
    from services.core.source import SourceUnavailable

    for url in (store.url("nothing/here"), f"{store.scheme}://no-such-bucket-{store.bucket_name}/x"):
        src = open_sources(url, Config(scan_cache=False))[0]
        try:
            src.scan_sync()  # type: ignore[attr-defined]
        except SourceUnavailable as exc:
            assert "no such" in str(exc) or "not found" in str(exc).lower(), str(exc)
        else:
            raise AssertionError(f"{url} read without error")


async def test_a_trials_evidence_is_read_from_the_bucket(store: Emulator, tmp_path: Path) -> None:
    root = _jobs(tmp_path)
    store.upload(root, PREFIX)
    src = _store_source(store)
    local = HarborSource(root, cache=False)
    remote_exp = next(e for e in src.scan_sync().experiments if e.id.startswith("swebench"))
    local_exp = next(e for e in local.scan_sync().experiments if e.id.startswith("swebench"))
    seen = []
    for r, lo in zip(sorted(remote_exp.trials, key=lambda t: t.path), sorted(local_exp.trials, key=lambda t: t.path),
                     strict=True):
        got, want = await src.evidence(remote_exp, r), await local.evidence(local_exp, lo)
        got_d, want_d = dump(got), dump(want)
        got_d.pop("problems")
        want_d.pop("problems")
        assert got_d == want_d
        seen.append(got)
    assert any(e.exception_type == "DaytonaError" and (e.traceback or e.exception_message) for e in seen)
