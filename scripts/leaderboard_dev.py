#!/usr/bin/env python3
"""A local leaderboard: a PostgREST-compatible HTTP server over a real PostgreSQL.

supabase-py (`supabase.create_client(url, key)`) talks to it as it talks to Supabase: the
PostgREST grammar of `/rest/v1/<table>` (select, eq/neq/in/is/gt/gte/lt/lte/like/ilike and
`not.` filters, order, limit/offset, insert with `Prefer: return=representation`, upsert,
update, delete, `count=exact`, single-object responses) is translated to SQL on PostgreSQL,
and PostgreSQL's errors come back as PostgREST's error bodies (`{code, message, details,
hint}`; a foreign-key violation is 409 with code 23503).

    python scripts/leaderboard_dev.py --dsn postgresql://user@host/db --port 54321
    python scripts/leaderboard_dev.py --init /tmp/evaldesk-lb --port 54321 [--seed demo --me alice]

`--dsn` serves an existing database and creates the leaderboard schema evaldesk expects
(DESIGN 8) when it is missing; `--init DIR` first starts a throwaway PostgreSQL cluster in DIR
(`initdb` + `pg_ctl`, as the `postgres` user when run as root, which PostgreSQL refuses) and
stops it on exit. `--seed demo` inserts rows that match evaldesk's demo experiments, so the
audit's leaderboard findings appear. Any non-empty API key is accepted; none is logged.
`--faults` opens `POST /__faults` (tests only): fail or delay the next requests to a table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import psycopg
from psycopg import sql

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS models (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text UNIQUE NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS benchmarks (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text UNIQUE NOT NULL
);
CREATE TABLE IF NOT EXISTS sandbox_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    username text NOT NULL,
    model_id uuid REFERENCES models(id),
    benchmark_id uuid REFERENCES benchmarks(id),
    status text NOT NULL DEFAULT 'Pending',
    score double precision,
    n_trials integer,
    n_errors integer,
    trace_url text,
    job_name text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS sandbox_trial_model_usage (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    job_id uuid NOT NULL REFERENCES sandbox_jobs(id) ON DELETE CASCADE,
    model_id uuid REFERENCES models(id),
    n_input_tokens bigint,
    n_output_tokens bigint
);
CREATE TABLE IF NOT EXISTS sandbox_benchmark_tasks (
    benchmark_id uuid NOT NULL REFERENCES benchmarks(id),
    task_name text NOT NULL
);
"""

OPS = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<=", "like": "LIKE", "ilike": "ILIKE"}
RESERVED = {"select", "order", "limit", "offset", "columns", "on_conflict"}
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SQLSTATE_HTTP = {"23503": 409, "23505": 409, "23502": 400, "23514": 400, "22P02": 400, "42703": 400,
                 "42P01": 404, "22007": 400, "22008": 400, "42883": 400, "25006": 405, "40001": 503}


class PgrstError(Exception):
    def __init__(self, status: int, code: str, message: str, details: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"code": code, "message": message, "details": details, "hint": hint}


# ---- the PostgREST grammar ---------------------------------------------------------------------


def _ident(name: str) -> str:
    if not IDENT.match(name):
        raise PgrstError(400, "PGRST100", f'"failed to parse" {name!r}', "column and table names are identifiers")
    return name


def _split_list(body: str) -> list[str]:
    """`a,"b,c",d` → ['a', 'b,c', 'd'] (PostgREST's quoting in in.(…))."""
    out: list[str] = []
    cur: list[str] = []
    quoted = False
    i = 0
    while i < len(body):
        ch = body[i]
        if quoted:
            if ch == "\\" and i + 1 < len(body):
                cur.append(body[i + 1])
                i += 2
                continue
            if ch == '"':
                quoted = False
            else:
                cur.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == ",":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


class Table:
    def __init__(self, name: str, columns: dict[str, str], pk: list[str]) -> None:
        self.name = name
        self.columns = columns  # name → udt name (uuid, text, float8, int4, timestamptz …)
        self.pk = pk

    def col(self, name: str) -> sql.Identifier:
        if name not in self.columns:
            raise PgrstError(400, "42703", f"column {self.name}.{name} does not exist")
        return sql.Identifier(self.name, name)

    def cast(self, name: str) -> sql.SQL:
        return sql.SQL(self.columns[name])


def _filter(table: Table, column: str, expr: str) -> tuple[sql.Composable, list[Any]]:
    negate = False
    if expr.startswith("not."):
        negate, expr = True, expr[4:]
    op, _, value = expr.partition(".")
    col = table.col(_ident(column))
    clause: sql.Composable
    params: list[Any] = []
    if op in ("eq", "neq", "gt", "gte", "lt", "lte"):
        clause = sql.SQL("{} {} %s::{}").format(col, sql.SQL(OPS[op]), table.cast(column))
        params = [value]
    elif op in ("like", "ilike"):
        clause = sql.SQL("{}::text {} %s").format(col, sql.SQL(OPS[op]))
        params = [value.replace("*", "%")]
    elif op == "in":
        if not (value.startswith("(") and value.endswith(")")):
            raise PgrstError(400, "PGRST100", f'"failed to parse filter ({expr})"', "in. takes (a,b,…)")
        items = _split_list(value[1:-1]) if value[1:-1] else []
        clause = sql.SQL("{} = ANY(%s::{}[])").format(col, table.cast(column))
        params = [items]
    elif op == "is":
        word = {"null": "NULL", "true": "TRUE", "false": "FALSE", "unknown": "UNKNOWN", "not_null": "NOT NULL"}.get(
            value.lower())
        if word is None:
            raise PgrstError(400, "PGRST100", f'"failed to parse filter ({expr})"', "is. takes null, true or false")
        clause = sql.SQL("{} IS {}").format(col, sql.SQL(word))
    else:
        raise PgrstError(400, "PGRST100", f'"failed to parse filter ({expr})"', f"unknown operator {op!r}")
    if negate:
        clause = sql.SQL("NOT ({})").format(clause)
    return clause, params


class Query:
    """One request's parameters, parsed."""

    def __init__(self, table: Table, pairs: list[tuple[str, str]]) -> None:
        self.table = table
        self.select = "*"
        self.order: list[sql.Composable] = []
        self.limit: int | None = None
        self.offset: int | None = None
        self.columns: list[str] | None = None
        self.on_conflict: list[str] | None = None
        self.where: list[sql.Composable] = []
        self.params: list[Any] = []
        for key, value in pairs:
            if key == "select":
                self.select = value
            elif key == "order":
                self.order += [self._order(part) for part in value.split(",") if part]
            elif key == "limit":
                self.limit = self._int(key, value)
            elif key == "offset":
                self.offset = self._int(key, value)
            elif key == "columns":
                self.columns = [_ident(c.strip().strip('"')) for c in value.split(",") if c.strip()]
            elif key == "on_conflict":
                self.on_conflict = [_ident(c.strip()) for c in value.split(",") if c.strip()]
            elif key in ("or", "and"):
                raise PgrstError(400, "PGRST100", f"{key}= filters are not supported by this server")
            else:
                clause, params = _filter(table, key, value)
                self.where.append(clause)
                self.params += params

    @staticmethod
    def _int(key: str, value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise PgrstError(400, "PGRST100", f'"failed to parse {key}" ({value})') from None
        if n < 0:
            raise PgrstError(400, "PGRST100", f"{key} must not be negative")
        return n

    def _order(self, part: str) -> sql.Composable:
        bits = part.split(".")
        col = self.table.col(_ident(bits[0]))
        out: sql.Composable = col
        for b in bits[1:]:
            word = {"asc": "ASC", "desc": "DESC", "nullsfirst": "NULLS FIRST", "nullslast": "NULLS LAST"}.get(b)
            if word is None:
                raise PgrstError(400, "PGRST100", f'"failed to parse order ({part})"')
            out = sql.SQL("{} {}").format(out, sql.SQL(word))
        return out

    def projection(self) -> sql.Composable:
        if self.select in ("", "*"):
            return sql.SQL("*")
        if "(" in self.select:
            raise PgrstError(400, "PGRST100", "embedded resources are not supported by this server")
        names = [c.strip() for c in self.select.split(",") if c.strip()]
        return sql.SQL(", ").join(self.table.col(_ident(n)) for n in names)

    def where_sql(self) -> sql.Composable:
        if not self.where:
            return sql.SQL("")
        return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(self.where)


# ---- the HTTP side ------------------------------------------------------------------------------


class Faults:
    """Test-only: fail (status) or hold the reply (delay_after_s, after the change is committed)
    for the next `times` requests of `method` on `table`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rules: list[dict[str, Any]] = []

    def take(self, method: str, table: str) -> dict[str, Any] | None:
        with self.lock:
            for rule in self.rules:
                if rule.get("method", method) == method and rule.get("table", table) == table and rule["times"] > 0:
                    rule["times"] -= 1
                    return dict(rule)
        return None


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], dsn: str, *, faults: bool = False, verbose: bool = False) -> None:
        super().__init__(addr, Handler)
        self.dsn = dsn
        self.faults = Faults() if faults else None
        self.verbose = verbose
        self.tables: dict[str, Table] = {}
        self.reload_tables()

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn, autocommit=False, connect_timeout=10)

    def reload_tables(self) -> None:
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT table_name, column_name, udt_name FROM information_schema.columns "
                "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position").fetchall()
            pks = conn.execute(
                "SELECT tc.table_name, kcu.column_name FROM information_schema.table_constraints tc "
                "JOIN information_schema.key_column_usage kcu ON tc.constraint_name = kcu.constraint_name "
                "AND tc.table_schema = kcu.table_schema "
                "WHERE tc.table_schema = 'public' AND tc.constraint_type = 'PRIMARY KEY'").fetchall()
        tables: dict[str, Table] = {}
        for tname, cname, udt in rows:
            tables.setdefault(tname, Table(tname, {}, [])).columns[cname] = udt
        for tname, cname in pks:
            if tname in tables:
                tables[tname].pk.append(cname)
        self.tables = tables

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"
    _raw: bytes = b""

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:  # the request line only: never a header, so never a key
            sys.stderr.write(f"leaderboard_dev: {self.address_string()} {format % args}\n")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # -- plumbing

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, err: PgrstError) -> None:
        self._send(err.status, json.dumps(err.body).encode())

    def _read_body(self) -> None:
        # always drain the body: a keep-alive connection must not see it as the next request
        n = int(self.headers.get("Content-Length") or 0)
        self._raw = self.rfile.read(n) if n > 0 else b""

    def _body(self) -> Any:
        raw = self._raw
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise PgrstError(400, "PGRST102", "Empty or invalid json") from None

    def _prefer(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for part in (self.headers.get("Prefer") or "").split(","):
            k, _, v = part.strip().partition("=")
            if k:
                out[k] = v
        return out

    def _handle(self, method: str) -> None:
        try:
            self._read_body()
            url = urlsplit(self.path)
            if url.path.startswith("/__faults"):
                self._faults(method)
                return
            if not (self.headers.get("apikey") or self.headers.get("Authorization")):
                raise PgrstError(401, "PGRST301", "No API key found in request",
                                 hint="No `apikey` request header or url param was found.")
            if not url.path.startswith("/rest/v1/"):
                raise PgrstError(404, "PGRST125", f"Invalid path specified in request URL: {url.path}")
            name = url.path[len("/rest/v1/"):].strip("/")
            table = self.server.tables.get(name)
            if table is None:
                self.server.reload_tables()
                table = self.server.tables.get(name)
            if table is None:
                raise PgrstError(404, "PGRST205", f"Could not find the table 'public.{name}' in the schema cache")
            query = Query(table, parse_qsl(url.query, keep_blank_values=True))
            fault = self.server.faults.take(method, name) if self.server.faults else None
            if fault and fault.get("status"):
                raise PgrstError(int(fault["status"]), "XX000", fault.get("message") or "injected server error")
            status, payload, headers = self._run(method, table, query)
            if fault and fault.get("delay_after_s"):
                time.sleep(float(fault["delay_after_s"]))
            self._send(status, payload, headers)
        except PgrstError as err:
            self._error(err)
        except psycopg.Error as exc:
            diag = exc.diag
            state = exc.sqlstate or "XX000"
            self._error(PgrstError(SQLSTATE_HTTP.get(state, 400 if state[:2] in ("22", "23", "42") else 500),
                                   state, diag.message_primary or str(exc), diag.message_detail, diag.message_hint))
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _faults(self, method: str) -> None:
        faults = self.server.faults
        if faults is None:
            raise PgrstError(404, "PGRST125", "fault injection is off (start with --faults)")
        if method == "POST":
            rules = self._body() or []
            with faults.lock:
                for rule in rules if isinstance(rules, list) else [rules]:
                    rule.setdefault("times", 1)
                    faults.rules.append(rule)
        elif method == "DELETE":
            with faults.lock:
                faults.rules.clear()
        self._send(200, json.dumps({"rules": faults.rules}).encode())

    def _run(self, method: str, table: Table, q: Query) -> tuple[int, bytes, dict[str, str]]:
        prefer = self._prefer()
        representation = prefer.get("return") == "representation"
        t = sql.Identifier(table.name)
        with self.server.connect() as conn:
            if method in ("GET", "HEAD"):
                inner = sql.SQL("SELECT {} FROM {}{}").format(q.projection(), t, q.where_sql())
                if q.order:
                    inner += sql.SQL(" ORDER BY ") + sql.SQL(", ").join(q.order)
                if q.limit is not None:
                    inner += sql.SQL(" LIMIT {}").format(sql.Literal(q.limit))
                if q.offset is not None:
                    inner += sql.SQL(" OFFSET {}").format(sql.Literal(q.offset))
                rows = self._json_rows(conn, inner, q.params)
                headers = {}
                start = q.offset or 0
                n = len(rows)
                total = "*"
                if prefer.get("count") in ("exact", "planned", "estimated"):
                    count_sql = sql.SQL("SELECT count(*) FROM {}{}").format(t, q.where_sql())
                    total = str(conn.execute(count_sql, q.params).fetchone()[0])  # type: ignore[index]
                headers["Content-Range"] = f"{start}-{start + n - 1}/{total}" if n else f"*/{total}"
                return self._reply(200, rows, headers)
            if method == "POST":
                body = self._body()
                rows_in = body if isinstance(body, list) else [body] if isinstance(body, dict) else None
                if rows_in is None:
                    raise PgrstError(400, "PGRST102", "Empty or invalid json")
                cols = q.columns or list(rows_in[0].keys() if rows_in else [])
                for c in cols:
                    table.col(_ident(c))
                colsql = sql.SQL(", ").join(sql.Identifier(c) for c in cols)
                stmt = sql.SQL("INSERT INTO {} ({}) SELECT {} FROM json_populate_recordset(null::{}, %s::json)").format(
                    t, colsql, colsql, t)
                if q.on_conflict is not None or prefer.get("resolution"):
                    target = q.on_conflict or table.pk
                    if prefer.get("resolution") == "ignore-duplicates":
                        stmt += sql.SQL(" ON CONFLICT ({}) DO NOTHING").format(
                            sql.SQL(", ").join(sql.Identifier(c) for c in target))
                    else:
                        sets = sql.SQL(", ").join(
                            sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c)) for c in cols)
                        stmt += sql.SQL(" ON CONFLICT ({}) DO UPDATE SET {}").format(
                            sql.SQL(", ").join(sql.Identifier(c) for c in target), sets)
                rows = self._write(conn, table, stmt, [json.dumps(rows_in)])
                return self._reply(201, rows if representation else None, {})
            if method == "PATCH":
                body = self._body()
                if not isinstance(body, dict) or not body:
                    raise PgrstError(400, "PGRST102", "Empty or invalid json")
                for c in body:
                    table.col(_ident(c))
                sets = sql.SQL(", ").join(sql.SQL("{} = _body.{}").format(sql.Identifier(c), sql.Identifier(c))
                                          for c in body)
                stmt = sql.SQL("UPDATE {} SET {} FROM json_populate_record(null::{}, %s::json) AS _body{}").format(
                    t, sets, t, q.where_sql())
                rows = self._write(conn, table, stmt, [json.dumps(body), *q.params])
                return self._reply(200 if representation else 204, rows if representation else None, {})
            if method == "DELETE":
                stmt = sql.SQL("DELETE FROM {}{}").format(t, q.where_sql())
                rows = self._write(conn, table, stmt, q.params)
                return self._reply(200 if representation else 204, rows if representation else None, {})
        raise PgrstError(405, "PGRST117", f"Unsupported HTTP method: {method}")

    def _json_rows(self, conn: psycopg.Connection[Any], inner: sql.Composable, params: list[Any]) -> list[Any]:
        wrapped = sql.SQL("SELECT coalesce(json_agg(_r), '[]'::json)::text FROM ({}) AS _r").format(inner)
        row = conn.execute(wrapped, params).fetchone()
        return json.loads(row[0]) if row else []

    def _write(self, conn: psycopg.Connection[Any], table: Table, stmt: sql.Composable,
               params: list[Any]) -> list[Any]:
        wrapped = sql.SQL(
            "WITH _w AS ({} RETURNING {}.*) SELECT coalesce(json_agg(_w), '[]'::json)::text FROM _w").format(
            stmt, sql.Identifier(table.name))
        row = conn.execute(wrapped, params).fetchone()
        conn.commit()
        return json.loads(row[0]) if row else []

    def _reply(self, status: int, rows: list[Any] | None, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
        if rows is None:
            return (204 if status in (200, 204) else status), b"", headers
        if "vnd.pgrst.object" in (self.headers.get("Accept") or ""):
            if len(rows) != 1:
                raise PgrstError(406, "PGRST116", "JSON object requested, multiple (or no) rows returned",
                                 f"The result contains {len(rows)} rows")
            return status, json.dumps(rows[0]).encode(), headers
        return status, json.dumps(rows).encode(), headers


# ---- schema, seed, throwaway cluster --------------------------------------------------------------


def ensure_schema(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA_SQL)


DEMO_JOBS = {
    "healthy": "terminal_bench_2_laion-OpenThinker-Agent-8B_2026-11-19__12-00-00",
    "running": "swebench-verified-random-100_claude-sonnet-4-5_2026-11-20__16-00-00",
    "short": "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00",
    "gate": "terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00",
    "numeric": "terminal_bench_2_1774950145766573_2026-11-19__11-20-00",
}
DEMO_HASH = "34ab93c4e1d2f0a9b8c7d6e5f4a3b2c1d0e9f8a7"


def seed_demo(dsn: str, me: str, other: str = "colleague", now: datetime | None = None) -> dict[str, str]:
    """Rows that match the demo experiments (see README, "Leaderboard and traces"); returns
    the ids by role. Rows already there (by id) are left as they are."""
    now = now or datetime.now(UTC)
    ids: dict[str, str] = {}

    def uid(role: str) -> str:
        ids[role] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"evaldesk-demo/{role}"))
        return ids[role]

    models = {"8b": "laion/OpenThinker-Agent-8B", "qwen": "laion/Qwen3-32B-agentic", "sera": "laion/SERA-14B",
              "32b": "laion/OpenThinker-Agent-32B", "numeric": "1774950145766573",
              "claude": "anthropic/claude-sonnet-4-5"}
    benches = {"tb2": "terminal_bench_2", "hash": DEMO_HASH, "swe": "swebench-verified-random-100"}
    day = timedelta(days=1)
    jobs = [
        # another user's row for the healthy run's pair: it never blocks registering ours
        ("job_other_8b", other, "8b", "tb2", "Finished", 0.41, 267, 4,
         "https://huggingface.co/datasets/colleague/tb2-8b-traces", "terminal_bench_2_8b_other_run", now - 2 * day),
        # a stale row of ours (Started 30 h ago, never finished)
        ("job_stale", me, "claude", "swe", "Started", None, None, None, None,
         "swebench-verified-random-100_claude-sonnet-4-5_2026-11-19__10-00-00", now - timedelta(hours=30)),
        # a partial registered as Finished: < 90 % valid
        ("job_partial", me, "qwen", "tb2", "Finished", 0.33, 182, 85, None, DEMO_JOBS["short"], now - day),
        # a partial registered by someone else: not ours to de-register
        ("job_gate_other", "harvest-bot", "sera", "tb2", "Pending", 0.37, 267, 50, None, DEMO_JOBS["gate"],
         now - day),
        # the vLLM numeric id and the dataset hash
        ("job_numeric", me, "numeric", "hash", "Finished", 0.0, 40, 39, None, DEMO_JOBS["numeric"], now - day),
        # another user's row under the same hash benchmark: its delete must wait
        ("job_other_hash", other, "32b", "hash", "Finished", 0.12, 89, 3, None, "terminal_bench_2_32b_other_run",
         now - 3 * day),
    ]
    with psycopg.connect(dsn, autocommit=False) as conn:
        for role, name in models.items():
            conn.execute("INSERT INTO models (id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                         (uid(f"model_{role}"), name))
        for role, name in benches.items():
            conn.execute("INSERT INTO benchmarks (id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                         (uid(f"bench_{role}"), name))
        for task in ("fix-git-history", "build-cython-ext", "configure-nginx-proxy"):
            conn.execute("INSERT INTO sandbox_benchmark_tasks (benchmark_id, task_name) SELECT %s, %s "
                         "WHERE NOT EXISTS (SELECT 1 FROM sandbox_benchmark_tasks WHERE benchmark_id = %s "
                         "AND task_name = %s)", (ids["bench_hash"], task, ids["bench_hash"], task))
        for role, user, model, bench, status, score, n, errs, trace, job_name, created in jobs:
            conn.execute(
                "INSERT INTO sandbox_jobs (id, username, model_id, benchmark_id, status, score, n_trials, n_errors, "
                "trace_url, job_name, created_at, updated_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                "ON CONFLICT DO NOTHING",
                (uid(role), user, ids[f"model_{model}"], ids[f"bench_{bench}"], status, score, n, errs, trace,
                 job_name, created, created))
        for role, job, model in (("usage_partial", "job_partial", "qwen"), ("usage_numeric", "job_numeric", "numeric")):
            conn.execute("INSERT INTO sandbox_trial_model_usage (id, job_id, model_id, n_input_tokens, "
                         "n_output_tokens) VALUES (%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                         (uid(role), ids[job], ids[f"model_{model}"], 1_200_000, 45_000))
        conn.commit()
    return ids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A throwaway PostgreSQL cluster in `root` (initdb + pg_ctl), as `postgres` when root."""

    BIN_DIRS = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin")

    def __init__(self, root: str | Path, port: int | None = None) -> None:
        self.root = Path(root).resolve()
        self.data = self.root / "data"
        self.port = port or free_port()
        self.user: str | None = None

    @classmethod
    def bin(cls, name: str) -> str:
        for d in cls.BIN_DIRS:
            if os.path.exists(os.path.join(d, name)):
                return os.path.join(d, name)
        found = shutil.which(name)
        if found:
            return found
        raise SystemExit(f"leaderboard_dev: {name} not found: install PostgreSQL (apt-get install -y postgresql)")

    def _run(self, argv: list[str]) -> None:
        if self.user:
            argv = ["runuser", "-u", self.user, "--", *argv]
        res = subprocess.run(argv, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise SystemExit(f"leaderboard_dev: {' '.join(argv)} failed ({res.returncode}): "
                             f"{(res.stderr or res.stdout).strip()[-800:]}")

    def start(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            self.user = "postgres"
            try:
                pw = pwd.getpwnam(self.user)
            except KeyError:
                raise SystemExit("leaderboard_dev: running as root needs the 'postgres' user (apt-get install -y "
                                 "postgresql) — PostgreSQL refuses to run as root") from None
            for p in [self.root, *self.root.parents]:
                if p != self.root and not (p.stat().st_mode & 0o001):
                    raise SystemExit(f"leaderboard_dev: {p} is not searchable by the postgres user; "
                                     "choose a DIR under /tmp")
            for dirpath, _, files in os.walk(self.root):
                os.chown(dirpath, pw.pw_uid, pw.pw_gid)
                for f in files:
                    os.chown(os.path.join(dirpath, f), pw.pw_uid, pw.pw_gid)
        if not (self.data / "PG_VERSION").exists():
            self._run([self.bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "-N",
                       "--encoding=UTF8", "--locale=C"])
        self._run([self.bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "postgres.log"), "-w", "-t", "60",
                   "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off", "start"])
        return self.dsn

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        with contextlib.suppress(SystemExit):
            self._run([self.bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"])


@contextlib.contextmanager
def serving(dsn: str, port: int = 0, *, faults: bool = False, verbose: bool = False) -> Iterator[Server]:
    """The HTTP server in a thread (for tests and scripts); stops on exit."""
    ensure_schema(dsn)
    server = Server(("127.0.0.1", port), dsn, faults=faults, verbose=verbose)
    thread = threading.Thread(target=server.serve_forever, name="leaderboard-dev", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="leaderboard_dev.py", description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--dsn", help="serve this existing PostgreSQL database (schema created if missing)")
    where.add_argument("--init", metavar="DIR", help="start a throwaway PostgreSQL cluster in DIR first")
    p.add_argument("--port", type=int, default=54321, help="HTTP port on 127.0.0.1 (default 54321; 0 picks one)")
    p.add_argument("--pg-port", type=int, default=None, help="--init: PostgreSQL's port (default: a free one)")
    p.add_argument("--seed", choices=("none", "demo"), default=None,
                   help="insert rows matching the demo experiments (default: demo with --init, none with --dsn)")
    p.add_argument("--me", default=os.environ.get("USER") or "me", help="--seed: the username of 'your' rows")
    p.add_argument("--other", default="colleague", help="--seed: another user's name")
    p.add_argument("--faults", action="store_true", help="open POST /__faults (tests only)")
    p.add_argument("--verbose", action="store_true", help="log request lines to stderr")
    args = p.parse_args(argv)
    cluster = None
    dsn = args.dsn
    if args.init:
        cluster = Cluster(args.init, args.pg_port)
        dsn = cluster.start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        try:
            ensure_schema(dsn)
        except psycopg.Error as exc:
            sys.stderr.write(f"leaderboard_dev: cannot use the database: {exc}\n")
            return 2
        seed = args.seed or ("demo" if args.init else "none")
        if seed == "demo":
            seed_demo(dsn, args.me, args.other)
        with serving(dsn, args.port, faults=args.faults, verbose=args.verbose) as server:
            print(f"leaderboard_dev: serving {server.url} (PostgREST at {server.url}/rest/v1/) over "
                  f"{'a throwaway cluster in ' + str(cluster.root) if cluster else 'the given database'}"
                  f"{'; seeded the demo rows (yours: ' + args.me + ')' if seed == 'demo' else ''}", flush=True)
            print(f"leaderboard_dev: dsn {dsn}", flush=True)
            stop.wait()
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
