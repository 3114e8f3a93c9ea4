"""With a leaderboard (real PostgreSQL behind the PostgREST stand-in, the Hub test server), the
verdict of every demo run keeps its promises: never finalize while a check fails, a named fix
plans at least one step (planned here, never applied), otherwise a person is asked."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.harbor.source import HarborSource
from services.leaderboard.view import audit_context, load_view
from tests.services.audit.test_verdict_invariants import assert_verdicts_hold
from tests.support.hub_server import HubServer
from tests.support.leaderboard import Leaderboard, config_for
from tests.support.leaderboard_fixtures import Jobs

pytestmark = pytest.mark.usefixtures("secrets")

JOBS = ("terminal_bench_2_laion-OpenThinker-Agent-8B_2026-11-19__12-00-00",
        "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00",
        "terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00",
        "terminal_bench_2_1774950145766573_2026-11-19__11-20-00",
        "swebench-verified-random-100_claude-sonnet-4-5_2026-11-20__16-00-00",
        "dev_set_v2_gpt-5-mini_2026-11-19__08-30-00")


async def test_every_demo_run_with_the_leaderboard(lb: Leaderboard, hub: HubServer, demo: Jobs,
                                                   tmp_path: Path) -> None:
    config = config_for(lb, hub.url, tmp_path)
    for job in JOBS:
        demo.need(job)
    source = HarborSource(demo.root, config.policy, label="demo")
    exps = (await source.scan()).experiments
    others = lb.others_rows()
    view = await load_view(config, exps)
    context = audit_context(view, config)
    found = [(source, e, audit_experiment(e, config.policy, datetime.now(UTC), context)) for e in exps]
    verdicts = {e.id.split("_2026")[0]: r.verdict for _, e, r in found}
    # the complete run is registered; the partial ones registered in the demo rows are de-registered first
    assert verdicts == {"terminal_bench_2_laion-OpenThinker-Agent-8B": "register",
                        "terminal_bench_2_laion-Qwen3-32B-agentic": "deregister",
                        "terminal_bench_2_1774950145766573": "deregister",
                        "terminal_bench_2_laion-SERA-14B": "investigate",
                        "swebench-verified-random-100_claude-sonnet-4-5": "wait",
                        "dev_set_v2_gpt-5-mini": "dedupe"}
    await assert_verdicts_hold(found, config)  # type: ignore[arg-type]
    assert lb.others_rows() == others
