"""Ownership, the names a run registers under, the view when the leaderboard is down,
renamed tables/columns, and secrets kept out of messages. Which row is a run's: test_match.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.core.config import Config, ConfigError, load_config
from services.core.models import Experiment
from services.core.plain import validate
from services.leaderboard.client import LeaderboardClient, LeaderboardError, redact, remember_secret
from services.leaderboard.match import run_names
from services.leaderboard.rows import JobRow, repo_id_from_url
from services.leaderboard.safety import why_not
from services.leaderboard.view import load_view
from tests.support.hub_server import HubServer
from tests.support.leaderboard import ME, SECRET_KEY, Leaderboard, config_for

T0 = datetime(2026, 11, 19, 12, 0, tzinfo=UTC)
MODELS = {"m1": "laion/X-8B", "m2": "1774950145766573"}
BENCHES = {"b1": "terminal_bench_2", "b2": "34ab93c4e1d2f0a9b8c7d6e5f4a3b2c1d0e9f8a7"}


def exp(**kw: object) -> Experiment:
    base: dict[str, object] = {"id": "terminal_bench_2_laion-X-8B_2026-11-19__12-00-00", "source": "harbor",
                               "model": "hosted_vllm/laion/X-8B", "benchmark": "terminal_bench_2",
                               "benchmark_from_dir": "terminal_bench_2", "started_at": T0}
    base.update(kw)
    return validate(Experiment, base)


def row(rid: str, user: str, *, job: str | None = None, model: str = "m1", bench: str = "b1",
        created: datetime = T0 + timedelta(hours=1), status: str = "Finished") -> JobRow:
    return JobRow(id=rid, username=user, model_id=model, benchmark_id=bench, status=status, job_name=job,
                  created_at=created, model_name=MODELS[model], benchmark_name=BENCHES[bench])


def test_run_names_are_the_harvests() -> None:
    assert run_names(exp()).model == "laion/X-8B"
    # hosted_vllm/ is stripped unless the models table has the name as reported
    assert run_names(exp(model="hosted_vllm/qwen3-coder-30b")).model == "qwen3-coder-30b"
    assert run_names(exp(model="hosted_vllm/qwen3-coder-30b"), ["hosted_vllm/qwen3-coder-30b"]).model == (
        "hosted_vllm/qwen3-coder-30b")
    assert run_names(exp(model="openai/gpt-5-mini")).model == "openai/gpt-5-mini"
    numeric = run_names(exp(model="hosted_vllm//1774950145766573", model_hf_name="laion/X-32B",
                            benchmark=BENCHES["b2"]))
    assert (numeric.model, numeric.benchmark) == ("laion/X-32B", "terminal_bench_2")
    assert "1774950145766573" in numeric.model_aliases and BENCHES["b2"] in numeric.benchmark_aliases
    assert run_names(exp(model="hosted_vllm/1774950145766573")).model is None


def test_ownership() -> None:
    mine, theirs = row("a", ME), row("b", "colleague")
    assert why_not(mine, [ME]) is None
    assert "belongs to colleague" in (why_not(theirs, [ME]) or "")
    assert "no usernames" in (why_not(mine, []) or "")
    assert why_not(None, [ME]) == "the row is gone"


def test_trace_urls_name_datasets() -> None:
    assert repo_id_from_url("https://huggingface.co/datasets/org/run-traces") == "org/run-traces"
    assert repo_id_from_url("http://127.0.0.1:9/datasets/org/run-traces/tree/main") == "org/run-traces"
    assert repo_id_from_url("hf://datasets/org/x") == "org/x"
    assert repo_id_from_url("org/x") == "org/x"
    assert repo_id_from_url("not a url") is None and repo_id_from_url(None) is None


def test_config_names_the_key_variable_never_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[leaderboard]\nurl = "http://x"\nkey_env = "eyJhbGciOiJIUzI1NiJ9.e30.abc"\n')
    with pytest.raises(ConfigError, match="key_env"):
        load_config(cfg, environ={})
    cfg.write_text('usernames = ["a"]\n[leaderboard]\nurl = "http://x"\nusernames = ["b"]\n')
    assert load_config(cfg, environ={}).leaderboard_usernames() == ["b"]
    cfg.write_text('usernames = ["a"]\n[leaderboard]\nurl = "http://x"\n')
    assert load_config(cfg, environ={}).leaderboard_usernames() == ["a"]
    with pytest.raises(LeaderboardError, match="export LB_KEY"):
        LeaderboardClient.from_config(validate(Config, {"leaderboard": {"url": "http://x", "key_env": "LB_KEY"}}),
                                      environ={})


def test_secrets_are_redacted_from_every_error() -> None:
    remember_secret(SECRET_KEY)
    assert SECRET_KEY not in str(LeaderboardError(f"bad key {SECRET_KEY}"))
    assert redact(f"Bearer {SECRET_KEY}") == "Bearer ***"


async def test_a_down_leaderboard_keeps_the_last_view_marked_stale(lb: Leaderboard, hub: HubServer,
                                                                    tmp_path: Path, secrets: None) -> None:
    config = config_for(lb, hub.url, tmp_path)
    first = await load_view(config, [])
    assert first.error is None and len(first.jobs) == 6
    lb.fault(table="sandbox_jobs", status=503, times=5)
    lb.fault(table="models", status=503, times=5)
    second = await load_view(config, [], previous=first)
    assert second.error and "reading models" in second.error and "injected server error" in second.error
    assert second.jobs == first.jobs and second.fetched_at == first.fetched_at
    assert SECRET_KEY not in second.error


async def test_renamed_tables_and_columns(lb: Leaderboard, hub: HubServer, tmp_path: Path, secrets: None) -> None:
    lb.execute("ALTER TABLE sandbox_jobs RENAME COLUMN trace_url TO hf_traces")
    lb.execute("ALTER TABLE models RENAME TO llms")
    lb.server.reload_tables()
    config = config_for(lb, hub.url, tmp_path, leaderboard={"columns": {"trace_url": "hf_traces"},
                                                            "tables": {"models": "llms"}})
    lb.execute("UPDATE sandbox_jobs SET hf_traces = 'https://h/datasets/o/r' WHERE id = %s", (lb.ids["job_partial"],))
    view = await load_view(config, [])
    assert view.error is None
    partial = next(r for r in view.jobs if r.id == lb.ids["job_partial"])
    assert partial.trace_url == "https://h/datasets/o/r" and partial.model_name == "laion/Qwen3-32B-agentic"
