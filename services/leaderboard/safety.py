"""Cross-user safety, in one place: every leaderboard update or delete goes through `Guard`.

Before a write to a job row: read the row and ALL rows of its (model × benchmark) pair, assert
the row is ours (its username is one of the configured ones), and scope the write by id AND
username. A models or benchmarks row (and a benchmark's task rows) is deleted only when no
job row of any user — and no usage row — references it. When any of this cannot be shown,
the write stops with the rows that make it unclear. Planning asks the same questions
(`why_not`), so a plan that would be refused says so before anything runs.
"""

from __future__ import annotations

from typing import Any

from services.leaderboard.client import LeaderboardClient, LeaderboardError
from services.leaderboard.rows import JobRow, job_rows


class NotOurs(LeaderboardError):
    """The write would touch a row that is not provably ours; nothing was changed."""


def why_not(row: JobRow | None, usernames: list[str], pair_rows: list[JobRow] | None = None) -> str | None:
    """None when `row` may be changed by us; else the reason, naming the rows."""
    if not usernames:
        return "no usernames are configured ([leaderboard] usernames): evaldesk cannot tell which rows are yours"
    if row is None:
        return "the row is gone"
    if row.username not in usernames:
        return (f"row {row.id[:8]} belongs to {row.username or 'nobody'}, not to one of yours "
                f"({', '.join(usernames)}): evaldesk never changes another user's row")
    same = [r for r in (pair_rows or []) if r.id == row.id]
    if len(same) > 1:
        return f"row id {row.id} appears {len(same)} times in the pair's rows: cannot tell them apart"
    return None


class Guard:
    def __init__(self, client: LeaderboardClient, usernames: list[str]) -> None:
        self.client = client
        self.usernames = list(usernames)

    async def _names(self) -> tuple[dict[str, str], dict[str, str]]:
        models = {str(r["id"]): str(r.get("name")) for r in await self.client.select_all("models")}
        benches = {str(r["id"]): str(r.get("name")) for r in await self.client.select_all("benchmarks")}
        return models, benches

    async def job(self, job_id: str) -> JobRow | None:
        rows = await self.client.select("jobs", eq={"id": job_id})
        if not rows:
            return None
        models, benches = await self._names()
        return job_rows(rows, models, benches)[0]

    async def pair_rows(self, row: JobRow) -> list[JobRow]:
        rows = await self.client.select("jobs", eq={"model_id": row.model_id, "benchmark_id": row.benchmark_id})
        models, benches = await self._names()
        return job_rows(rows, models, benches)

    async def own_job(self, job_id: str) -> JobRow:
        """The row, re-read with all rows of its pair, asserted ours; else NotOurs with the rows."""
        row = await self.job(job_id)
        pair = await self.pair_rows(row) if row is not None else []
        why = why_not(row, self.usernames, pair)
        if why:
            shown = "; ".join(r.brief() for r in pair) or "none"
            raise NotOurs(f"stopped before writing: {why}. Rows of the pair: {shown}")
        assert row is not None
        return row

    async def update_job(self, job_id: str, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        row = await self.own_job(job_id)
        before = row.db()
        after = await self.client.update("jobs", values, {"id": job_id, "username": row.username})
        if len(after) != 1:
            raise LeaderboardError(f"update of row {job_id[:8]} changed {len(after)} rows, expected 1")
        return before, after[0]

    async def delete_job(self, job_id: str) -> dict[str, Any]:
        row = await self.own_job(job_id)
        gone = await self.client.delete("jobs", {"id": job_id, "username": row.username})
        if len(gone) != 1:
            raise LeaderboardError(f"delete of row {job_id[:8]} removed {len(gone)} rows, expected 1")
        return gone[0]

    async def insert_job(self, row: dict[str, Any]) -> dict[str, Any]:
        if row.get("username") not in self.usernames:
            raise NotOurs(f"refusing to insert a row for {row.get('username')!r}: not one of yours")
        [made] = await self.client.insert("jobs", [row])
        return made

    async def usage_of_job(self, job_id: str) -> list[dict[str, Any]]:
        return await self.client.select("usage", eq={"job_id": job_id})

    async def delete_usage_of_own_job(self, job_id: str) -> list[dict[str, Any]]:
        await self.own_job(job_id)
        return await self.client.delete("usage", {"job_id": job_id})

    async def update_usage_of_own_job(self, job_id: str, model_from: str, model_to: str) -> list[dict[str, Any]]:
        await self.own_job(job_id)
        return await self.client.update("usage", {"model_id": model_to}, {"job_id": job_id, "model_id": model_from})

    async def references(self, role: str, ref_id: str) -> list[str]:
        """Who still references a models/benchmarks row: one line per referencing row, every user."""
        col = "model_id" if role == "models" else "benchmark_id"
        out = [f"job {r['id'][:8]} of {r.get('username')}" for r in await self.client.select("jobs", eq={col: ref_id})]
        if role == "models":
            out += [f"usage row {r['id'][:8]} of job {str(r.get('job_id'))[:8]}"
                    for r in await self.client.select("usage", eq={"model_id": ref_id})]
        return out

    async def _assert_unreferenced(self, role: str, ref_id: str) -> None:
        refs = await self.references(role, ref_id)
        if refs:
            raise NotOurs(f"{role} row {ref_id[:8]} is still referenced by {len(refs)} row(s) ({'; '.join(refs[:5])}):"
                          " left in place")

    async def delete_benchmark_tasks(self, bench_id: str) -> list[dict[str, Any]]:
        """A benchmark's task rows (they block its delete, and have no id), only when no job of
        any user references the benchmark."""
        await self._assert_unreferenced("benchmarks", bench_id)
        return await self.client.delete("benchmark_tasks", {"benchmark_id": bench_id})

    async def delete_unreferenced(self, role: str, ref_id: str) -> list[dict[str, Any]]:
        """Delete a models/benchmarks row only when nothing of any user references it."""
        await self._assert_unreferenced(role, ref_id)
        return await self.client.delete(role, {"id": ref_id})
