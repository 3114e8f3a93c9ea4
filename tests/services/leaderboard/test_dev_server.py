"""scripts/leaderboard_dev.py speaks PostgREST as supabase-py 2.34 uses it, over a real
PostgreSQL: filters, order, limit, insert/update/delete with representation, error bodies,
a foreign key violation as 409/23503 — and `--init` starts its own cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.leaderboard import ME, OTHER, ROOT, Leaderboard, cluster


def client(lb: Leaderboard) -> Any:
    from supabase import create_client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_client(lb.url, "any-key")


def test_filters_order_limit_and_count(lb: Leaderboard) -> None:
    c = client(lb)
    mine = c.table("sandbox_jobs").select("*").eq("username", ME).order("created_at", desc=True).execute().data
    assert {r["username"] for r in mine} == {ME} and len(mine) == 3
    assert [r["created_at"] for r in mine] == sorted((r["created_at"] for r in mine), reverse=True)
    others = c.table("sandbox_jobs").select("id,username").neq("username", ME).execute().data
    assert {r["username"] for r in others} == {OTHER, "harvest-bot"} and set(others[0]) == {"id", "username"}
    assert len(c.table("sandbox_jobs").select("id").in_("username", [ME, "nobody"]).execute().data) == 3
    assert len(c.table("sandbox_jobs").select("id").is_("trace_url", "null").execute().data) == 5
    assert len(c.table("sandbox_jobs").select("id").gt("score", 0.3).lte("score", 0.41).execute().data) == 3
    assert len(c.table("sandbox_jobs").select("id").gte("n_trials", 267).lt("n_trials", 268).execute().data) == 2
    assert len(c.table("sandbox_jobs").select("id").like("job_name", "*Qwen3*").execute().data) == 1
    limited = c.table("sandbox_jobs").select("id", count="exact").order("id").limit(2).execute()
    assert len(limited.data) == 2 and limited.count == 6
    page2 = c.table("sandbox_jobs").select("id").order("id").range(2, 3).execute().data
    assert page2[0]["id"] not in {r["id"] for r in limited.data}


def test_insert_update_delete_with_representation(lb: Leaderboard) -> None:
    c = client(lb)
    made = c.table("models").insert({"name": "org/new-model"}).execute().data
    assert made[0]["name"] == "org/new-model" and made[0]["id"] and made[0]["created_at"]
    changed = c.table("models").update({"name": "org/renamed"}).eq("id", made[0]["id"]).execute().data
    assert changed == [{**made[0], "name": "org/renamed"}]
    gone = c.table("models").delete().eq("id", made[0]["id"]).execute().data
    assert gone[0]["id"] == made[0]["id"]
    assert lb.sql("SELECT * FROM models WHERE id = %s", (made[0]["id"],)) == []
    many = c.table("benchmarks").insert([{"name": "b1"}, {"name": "b2"}]).execute().data
    assert {r["name"] for r in many} == {"b1", "b2"}


def test_errors_are_postgrest_bodies(lb: Leaderboard) -> None:
    from postgrest.exceptions import APIError

    c = client(lb)
    with pytest.raises(APIError) as fk:
        c.table("benchmarks").delete().eq("id", lb.ids["bench_hash"]).execute()
    assert fk.value.code == "23503" and "foreign key" in (fk.value.message or "")
    with pytest.raises(APIError) as single:
        c.table("models").select("*").eq("name", "nope").single().execute()
    assert single.value.code == "PGRST116"
    with pytest.raises(APIError) as missing:
        c.table("no_such_table").select("*").execute()
    assert missing.value.code == "PGRST205"
    raw = httpx.delete(f"{lb.url}/rest/v1/benchmarks?id=eq.{lb.ids['bench_hash']}", headers={"apikey": "k"})
    assert raw.status_code == 409 and set(raw.json()) == {"code", "message", "details", "hint"}
    assert httpx.get(f"{lb.url}/rest/v1/models").status_code == 401  # no key: refused
    # the FK held: nothing was deleted
    assert lb.sql("SELECT count(*) AS n FROM benchmarks WHERE id = %s", (lb.ids["bench_hash"],))[0]["n"] == 1


def test_injected_faults(lb: Leaderboard) -> None:
    lb.fault(method="GET", table="models", status=500, times=1)
    assert httpx.get(f"{lb.url}/rest/v1/models", headers={"apikey": "k"}).status_code == 500
    assert httpx.get(f"{lb.url}/rest/v1/models", headers={"apikey": "k"}).status_code == 200


def test_init_starts_a_cluster_and_serves_it(tmp_path: Path) -> None:
    cluster()  # skips (or fails under CI) without PostgreSQL
    import tempfile

    root = tempfile.mkdtemp(prefix="evaldesk-init-")
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "leaderboard_dev.py"), "--init", root, "--port",
                             "0", "--me", ME], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert "serving http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        url = line.split("serving ", 1)[1].split(" ", 1)[0]
        rows = httpx.get(f"{url}/rest/v1/sandbox_jobs?select=username&username=eq.{ME}", headers={"apikey": "k"})
        assert rows.status_code == 200 and len(rows.json()) == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    assert proc.returncode == 0
