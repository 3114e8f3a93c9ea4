"""The leaderboard over supabase-py: `supabase.create_client(url, key)` from `[leaderboard]`.

Reads and writes by table role (`jobs`, `models`, `benchmarks`, `usage`, `benchmark_tasks`)
and evaldesk's column names; the config may rename both. The key is read from the env var
`key_env` names when the client is made and never leaves this object: every error that comes
out of here is re-worded without it (`redact`). supabase-py is synchronous; its calls run in
a thread so the console's event loop never waits on the network.

Cross-user safety does not live here but in `services.leaderboard.safety.Guard`, the only
caller of `update`/`delete` on the jobs table.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from services.core.config import Config, LeaderboardConfig

T = TypeVar("T")

ROLES = ("jobs", "models", "benchmarks", "usage", "benchmark_tasks")
PAGE = 1000

# values that must never be shown: every key and token read from the environment lands here
_SECRETS: set[str] = set()


def remember_secret(value: str) -> None:
    if value and len(value) >= 4:
        _SECRETS.add(value)


def redact(text: str) -> str:
    """`text` with every secret evaldesk has read replaced by `***`."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    return text


class LeaderboardError(Exception):
    """A leaderboard read or write failed; the message says which and why (never a key)."""

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(redact(message))
        self.code = code
        self.status = status


class LeaderboardUnavailable(LeaderboardError):
    """No leaderboard can be reached: not configured, no key, or the server does not answer."""


def describe(exc: BaseException, what: str, timeout_s: float) -> LeaderboardError:
    """One clear line for a failed call: the PostgREST code and message, a timeout, a refusal."""
    import httpx
    from postgrest.exceptions import APIError

    if isinstance(exc, LeaderboardError):
        return exc
    if isinstance(exc, APIError):
        code = exc.code or "?"
        detail = f" ({exc.details})" if exc.details and isinstance(exc.details, str) and len(exc.details) < 300 else ""
        msg = (exc.message or "").strip()
        if msg.startswith("<") or not msg:  # an HTML or empty body: a proxy or a crashed server
            msg = "the server answered with an error page"
        status: int | None = None
        try:
            status = int(code) if code.isdigit() and len(code) == 3 else None
        except ValueError:
            status = None
        return LeaderboardError(f"{what}: {code}: {msg}{detail}", code=code, status=status)
    if isinstance(exc, httpx.TimeoutException):
        return LeaderboardError(f"{what}: no answer within {timeout_s:g} s (timed out)", code="timeout")
    if isinstance(exc, httpx.HTTPError):
        return LeaderboardUnavailable(f"{what}: {type(exc).__name__}: {exc}", code="network")
    return LeaderboardError(f"{what}: {type(exc).__name__}: {exc}")


class LeaderboardClient:
    def __init__(self, settings: LeaderboardConfig, key: str) -> None:
        if not settings.url:
            raise LeaderboardUnavailable("no leaderboard configured ([leaderboard] url)")
        remember_secret(key)
        self.settings = settings
        self.url = settings.url.rstrip("/")
        self.timeout_s = settings.timeout_s
        self._to_db = {k: v for k, v in settings.columns.items()}
        self._from_db = {v: k for k, v in settings.columns.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from supabase import create_client
            from supabase.lib.client_options import SyncClientOptions

            try:
                self._client = create_client(self.url, key, options=SyncClientOptions(
                    postgrest_client_timeout=settings.timeout_s, postgrest_client_retry=False))
            except Exception as exc:  # SupabaseException: a malformed URL or key
                raise LeaderboardUnavailable(f"leaderboard {self.url}: {exc}") from None

    @classmethod
    def from_config(cls, config: Config, environ: dict[str, str] | None = None) -> LeaderboardClient:
        settings = config.leaderboard
        if not settings.url:
            raise LeaderboardUnavailable("no leaderboard configured: set [leaderboard] url in the config")
        env = os.environ if environ is None else environ
        key = env.get(settings.key_env)
        if not key:
            raise LeaderboardUnavailable(
                f"the leaderboard key is not set: export {settings.key_env}=… (the variable [leaderboard] key_env "
                "names)")
        return cls(settings, key)

    def table_name(self, role: str) -> str:
        return str(getattr(self.settings.tables, role))

    def _db(self, row: dict[str, Any]) -> dict[str, Any]:
        return {self._to_db.get(k, k): v for k, v in row.items()}

    def _canon(self, row: dict[str, Any]) -> dict[str, Any]:
        return {self._from_db.get(k, k): v for k, v in row.items()}

    def col(self, name: str) -> str:
        return self._to_db.get(name, name)

    async def _call(self, what: str, fn: Callable[[], T]) -> T:
        def run() -> T:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                return fn()

        try:
            return await asyncio.to_thread(run)
        except Exception as exc:
            raise describe(exc, what, self.timeout_s) from None

    async def select(self, role: str, *, eq: dict[str, Any] | None = None, in_: dict[str, Iterable[Any]] | None = None,
                     order: str | None = None, desc: bool = False, limit: int | None = None,
                     offset: int | None = None) -> list[dict[str, Any]]:
        table = self.table_name(role)

        def run() -> list[dict[str, Any]]:
            q = self._client.table(table).select("*")
            for k, v in (eq or {}).items():
                q = q.is_(self.col(k), "null") if v is None else q.eq(self.col(k), v)
            for k, vs in (in_ or {}).items():
                q = q.in_(self.col(k), list(vs))
            if order:
                q = q.order(self.col(order), desc=desc)
            if limit is not None:
                q = q.range(offset or 0, (offset or 0) + limit - 1)
            return cast(list[dict[str, Any]], list(q.execute().data or []))

        rows = await self._call(f"reading {table}", run)
        return [self._canon(r) for r in rows]

    async def select_all(self, role: str, order: str = "id") -> list[dict[str, Any]]:
        """Every row of a table, a page at a time (PostgREST servers cap a page)."""
        out: list[dict[str, Any]] = []
        while True:
            page = await self.select(role, order=order, limit=PAGE, offset=len(out))
            out += page
            if len(page) < PAGE:
                return out

    async def insert(self, role: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        table = self.table_name(role)
        data = [self._db(r) for r in rows]

        def run() -> list[dict[str, Any]]:
            return cast(list[dict[str, Any]], list(self._client.table(table).insert(data).execute().data or []))

        return [self._canon(r) for r in await self._call(f"inserting into {table}", run)]

    async def update(self, role: str, values: dict[str, Any], match: dict[str, Any]) -> list[dict[str, Any]]:
        table = self.table_name(role)
        if not match:
            raise LeaderboardError(f"refusing an update of {table} without a filter")
        data = self._db(values)

        def run() -> list[dict[str, Any]]:
            q = self._client.table(table).update(data)
            for k, v in match.items():
                q = q.eq(self.col(k), v)
            return cast(list[dict[str, Any]], list(q.execute().data or []))

        return [self._canon(r) for r in await self._call(f"updating {table}", run)]

    async def delete(self, role: str, match: dict[str, Any]) -> list[dict[str, Any]]:
        table = self.table_name(role)
        if not match:
            raise LeaderboardError(f"refusing a delete from {table} without a filter")

        def run() -> list[dict[str, Any]]:
            q = self._client.table(table).delete()
            for k, v in match.items():
                q = q.eq(self.col(k), v)
            return cast(list[dict[str, Any]], list(q.execute().data or []))

        return [self._canon(r) for r in await self._call(f"deleting from {table}", run)]
