"""The one matcher (services/leaderboard/match.py) as a table, against a real PostgreSQL: each
case inserts its rows — yours and another user's — beside the demo rows, reads the view
through supabase-py, and asserts which row is the run's, which rows of yours are candidates,
and which other users' rows are listed beside it. The row tables are read back by SQL before
and after: matching writes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.core.models import Experiment, State
from services.core.policy import Policy
from services.leaderboard.client import LeaderboardClient
from services.leaderboard.match import match
from services.leaderboard.view import load_view
from tests.support.leaderboard import ME, OTHER, SECRET_KEY, Leaderboard, config_for, start_leaderboard
from tests.support.leaderboard_fixtures import SEEDED_AT

RUN = "terminal_bench_2_laion-OpenThinker-Agent-8B_2026-11-25__08-00-00"
START = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)
END = START + timedelta(hours=6)
H = timedelta(hours=1)
D = timedelta(days=1)
EIGHT_B = "laion/OpenThinker-Agent-8B"
QWEN = "qwen3-coder-30b"


@dataclass
class Case:
    rows: list[tuple[str, str | None, timedelta]]  # (user, job name, created after the run's start)
    how: str
    chosen: int | None = None  # index into rows of the run's row
    candidates: list[int] = field(default_factory=list)
    others: list[int] = field(default_factory=list)
    model: str = f"hosted_vllm/{EIGHT_B}"
    model_hf_name: str | None = None
    registers_as: str = EIGHT_B
    live: bool = False
    started: bool = True


CASES = {
    "a row of yours carrying the job name": Case([(ME, RUN, H)], "job_name", chosen=0, candidates=[0]),
    "the job name wins over a row in the window, however late it was made": Case(
        [(ME, RUN, 30 * D), (ME, None, H)], "job_name", chosen=0, candidates=[0]),
    "another user's row carrying the job name is listed, never chosen": Case(
        [(OTHER, RUN, H)], "none", others=[0]),
    "another user's row in the window never blocks yours": Case([(OTHER, None, 4 * H)], "none", others=[0]),
    "a row of yours in the window": Case([(ME, None, 3 * H)], "created_at", chosen=0, candidates=[0]),
    "a row of yours made within the slack before the start": Case([(ME, None, -H)], "created_at", chosen=0,
                                                                  candidates=[0]),
    "a row of yours made before the window": Case([(ME, None, -3 * H)], "none"),
    "a row of yours made 3 days after the run finished is a later run's": Case(
        [(ME, None, END - START + 3 * D)], "none"),
    "a row of yours naming another run is that run's": Case([(ME, "another_run", H)], "none"),
    "two rows of yours carrying the job name: unclear": Case(
        [(ME, RUN, H), (ME, RUN, 2 * H), (OTHER, None, H)], "job_name", candidates=[0, 1], others=[2]),
    "two rows of yours in the window: unclear": Case([(ME, None, H), (ME, None, 5 * H)], "created_at",
                                                     candidates=[0, 1]),
    "a live run's window runs to now": Case([(ME, None, 3 * D)], "created_at", chosen=0, candidates=[0], live=True),
    "a run whose start is unknown is matched by its job name only": Case([(ME, None, H)], "none", started=False),
    "hosted_vllm/ is stripped as the harvest strips it": Case(
        [(ME, None, H), (OTHER, None, 2 * H)], "created_at", chosen=0, candidates=[0], others=[1],
        model=f"hosted_vllm/{QWEN}", registers_as=QWEN),
    "model_hf_name wins over a served id": Case([(ME, None, H)], "created_at", chosen=0, candidates=[0],
                                               model="hosted_vllm/1774950145766573", model_hf_name=EIGHT_B),
}


@pytest.fixture(scope="module")
def board() -> Iterator[Leaderboard]:
    yield from start_leaderboard(SEEDED_AT)


def tables(lb: Leaderboard) -> list[list[dict[str, object]]]:
    return [lb.sql(f"SELECT * FROM {t} ORDER BY id") for t in ("sandbox_jobs", "models", "benchmarks")]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_which_row_is_the_runs(board: Leaderboard, case: Case, tmp_path: Path) -> None:
    lb = board
    model_id = lb.ids["model_8b"]
    if case.registers_as == QWEN:
        model_id = str(uuid.uuid4())
        lb.execute("INSERT INTO models (id, name) VALUES (%s, %s)", (model_id, QWEN))
    ids = [str(uuid.uuid4()) for _ in case.rows]
    for rid, (user, job, after) in zip(ids, case.rows, strict=True):
        lb.execute("INSERT INTO sandbox_jobs (id, username, model_id, benchmark_id, status, job_name, created_at, "
                   "updated_at) VALUES (%s, %s, %s, %s, 'Finished', %s, %s, %s)",
                   (rid, user, model_id, lb.ids["bench_tb2"], job, START + after, START + after))
    try:
        before = tables(lb)
        now = END + 4 * D
        exp = Experiment(id=RUN, source="harbor", model=case.model, model_hf_name=case.model_hf_name,
                         benchmark="terminal_bench_2", benchmark_from_dir="terminal_bench_2",
                         state=State.running if case.live else State.finished,
                         started_at=START if case.started else None, updated_at=now - H if case.live else END,
                         finished_at=None if case.live else END)
        config = config_for(lb, "http://127.0.0.1:9", tmp_path, traces={"org": None})
        view = await load_view(config, [exp], client=LeaderboardClient(config.leaderboard, SECRET_KEY))
        assert view.error is None
        m = match(exp, view, Policy(), now)
        assert tables(lb) == before
    finally:
        lb.execute("DELETE FROM sandbox_jobs WHERE id = ANY(%s::uuid[])", (ids,))
        if case.registers_as == QWEN:
            lb.execute("DELETE FROM models WHERE id = %s", (model_id,))

    assert m.how == case.how
    assert sorted(r.id for r in m.candidates) == sorted(ids[i] for i in case.candidates)
    assert (m.row.id if m.row else None) == (ids[case.chosen] if case.chosen is not None else None)
    assert sorted(r.id for r in m.others) == sorted(ids[i] for i in case.others)
    assert all(r.username == ME for r in m.candidates)
    assert m.names.model == case.registers_as
    # every row of the pair is listed, both users' (the demo's row of another user included)
    assert set(ids) <= {r.id for r in m.pair_rows}
    if case.registers_as == EIGHT_B:
        assert lb.ids["job_other_8b"] in {r.id for r in m.pair_rows}
    if len(case.candidates) > 1:
        assert m.ambiguous and "unclear which row is this run's" in m.ambiguous
        for i in case.candidates:
            assert ids[i][:8] in m.ambiguous
    else:
        assert m.ambiguous is None
