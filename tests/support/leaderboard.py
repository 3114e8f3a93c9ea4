"""A real leaderboard for tests: a throwaway PostgreSQL cluster (one per test run), a fresh
database per test with the DESIGN 8 schema and the demo rows, and `scripts/leaderboard_dev.py`
serving it over HTTP with fault injection on. Tests read PostgreSQL directly (psycopg) to
check what changed — never through the API under test.

Without PostgreSQL installed the tests skip, saying so; with CI=true they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ME = "alice"
OTHER = "colleague"
SECRET_KEY = "sk-lb-test-9f8e7d6c5b4a"
SECRET_TOKEN = "hf_test_token_1a2b3c4d5e"


def dev_module() -> ModuleType:
    name = "leaderboard_dev"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "leaderboard_dev.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and the leaderboard cannot start: {reason}")
    pytest.skip(reason)


_cluster: Any = None


def cluster() -> Any:
    """The test run's PostgreSQL cluster (started once, stopped at exit)."""
    global _cluster
    if _cluster is not None:
        return _cluster
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("psycopg is not installed (pip install -e '.[dev]')")
    dev = dev_module()
    try:
        dev.Cluster.bin("initdb")
    except SystemExit as exc:
        _missing(str(exc))
    root = tempfile.mkdtemp(prefix="evaldesk-pg-")
    c = dev.Cluster(root)
    try:
        c.start()
    except SystemExit as exc:
        shutil.rmtree(root, ignore_errors=True)
        _missing(str(exc))
    import atexit

    def stop() -> None:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)

    atexit.register(stop)
    _cluster = c
    return c


@dataclass
class Leaderboard:
    url: str
    dsn: str
    server: Any
    ids: dict[str, str]
    seeded_at: datetime
    extra: dict[str, Any] = field(default_factory=dict)

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Read PostgreSQL directly (not through the API under test)."""
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.dsn, row_factory=dict_row) as conn:
            return list(conn.execute(query, params).fetchall())  # type: ignore[arg-type]

    def execute(self, query: str, params: tuple[Any, ...] = ()) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(query, params)  # type: ignore[arg-type]

    def others_rows(self) -> list[dict[str, Any]]:
        """Every job row not of ME, and every usage row of such a job: what must never change."""
        jobs = self.sql("SELECT * FROM sandbox_jobs WHERE username <> %s ORDER BY id", (ME,))
        usage = self.sql("SELECT u.* FROM sandbox_trial_model_usage u JOIN sandbox_jobs j ON j.id = u.job_id "
                         "WHERE j.username <> %s ORDER BY u.id", (ME,))
        return [*jobs, *usage]

    def job(self, role: str) -> dict[str, Any] | None:
        rows = self.sql("SELECT * FROM sandbox_jobs WHERE id = %s", (self.ids[role],))
        return rows[0] if rows else None

    def fault(self, **rule: Any) -> None:
        req = urllib.request.Request(f"{self.url}/__faults", data=json.dumps(rule).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=5).read()

    def clear_faults(self) -> None:
        req = urllib.request.Request(f"{self.url}/__faults", method="DELETE")
        urllib.request.urlopen(req, timeout=5).read()


def start_leaderboard(seeded_at: datetime) -> Iterator[Leaderboard]:
    """A fresh database in the test run's cluster, seeded, served over HTTP."""
    import psycopg

    c = cluster()
    name = f"lb_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(c.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = c.dsn.rsplit("/", 1)[0] + f"/{name}"
    dev = dev_module()
    try:
        with dev.serving(dsn, 0, faults=True) as server:
            ids = dev.seed_demo(dsn, ME, OTHER, now=seeded_at)
            yield Leaderboard(server.url, dsn, server, ids, seeded_at)
    finally:
        with psycopg.connect(c.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def config_for(lb: Leaderboard, hub_url: str, tmp: Path, **over: Any) -> Any:
    from services.core.config import Config
    from services.core.plain import validate

    data: dict[str, Any] = {
        "usernames": [ME],
        "journal_path": str(tmp / "journal.jsonl"),
        "leaderboard": {"url": lb.url, "key_env": "LB_TEST_KEY", "timeout_s": 3},
        "traces": {"endpoint": hub_url, "org": "evals", "timeout_s": 5, "token_env": "HF_TEST_TOKEN"},
    }
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(data.get(k), dict):
            data[k] = {**data[k], **v}
        else:
            data[k] = v
    return validate(Config, data)


def secrets_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LB_TEST_KEY", SECRET_KEY)
    monkeypatch.setenv("HF_TEST_TOKEN", SECRET_TOKEN)
