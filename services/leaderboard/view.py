"""One read of the leaderboard and of the trace datasets its rows link: a `LeaderboardView`,
and the `AuditContext` that carries it into the audit.

The console's poller calls `load_view` on its own interval (a failure keeps the last view,
marked stale); `--batch` calls it once before it audits.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from services.audit.context import AuditContext
from services.core.config import Config
from services.core.models import Experiment
from services.leaderboard.client import LeaderboardClient, LeaderboardError
from services.leaderboard.enrichment import LeaderboardEnrichment
from services.leaderboard.match import match
from services.leaderboard.rows import LeaderboardView, TraceStatus, job_rows, repo_id_from_url
from services.leaderboard.traces import HubClient, expected_repo


async def load_view(config: Config, exps: list[Experiment], *, client: LeaderboardClient | None = None,
                    hub: HubClient | None = None, previous: LeaderboardView | None = None) -> LeaderboardView:
    """The rows of every table, and the status of every dataset the run's row links (and the
    run's expected dataset). Never raises for an unreachable leaderboard: the view comes back
    with `error` set, holding the previous rows when there were any."""
    try:
        client = client or LeaderboardClient.from_config(config)
        models = {str(r["id"]): str(r.get("name")) for r in await client.select_all("models")}
        benches = {str(r["id"]): str(r.get("name")) for r in await client.select_all("benchmarks")}
        jobs = job_rows(await client.select_all("jobs"), models, benches)
    except LeaderboardError as exc:
        stale = (previous or LeaderboardView()).model_copy(update={"error": str(exc)})
        stale.usernames = config.leaderboard_usernames()
        return stale
    view = LeaderboardView(fetched_at=datetime.now(UTC), jobs=jobs, models=models, benchmarks=benches,
                           usernames=config.leaderboard_usernames())
    repos: set[str] = set()
    for exp in exps:
        row = match(exp, view, config.policy, view.fetched_at or datetime.now(UTC)).row
        if row is None:
            continue
        for rid in (repo_id_from_url(row.trace_url), expected_repo(exp, config)):
            if rid:
                repos.add(rid)
    if repos:
        hub = hub or HubClient.from_config(config)
        gate = asyncio.Semaphore(4)

        async def one(rid: str) -> TraceStatus:
            async with gate:
                return await hub.status(rid)

        for status in await asyncio.gather(*(one(r) for r in sorted(repos))):
            view.traces[status.repo_id] = status
    return view


def audit_context(view: LeaderboardView | None, config: Config) -> AuditContext | None:
    if view is None:
        return None
    return AuditContext(enrichments=[LeaderboardEnrichment(view, config)])
