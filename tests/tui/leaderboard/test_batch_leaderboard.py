"""`--batch fix`, `--batch journal` and `--batch undo RECORD_ID` as a person runs them: the real
`evaldesk` process against a real leaderboard and the Hub test server; secrets never in its
output, the journal or the records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.support.hub_server import HubServer
from tests.support.leaderboard import ME, ROOT, SECRET_KEY, SECRET_TOKEN, Leaderboard
from tests.support.leaderboard_fixtures import Jobs

SHORT = "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00"
NUMERIC = "terminal_bench_2_1774950145766573_2026-11-19__11-20-00"
GATE = "terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00"


class Cli:
    def __init__(self, lb: Leaderboard, hub: HubServer, tmp: Path) -> None:
        self.tmp = tmp
        self.config = tmp / "config.toml"
        self.config.write_text(
            f'usernames = ["{ME}"]\njournal_path = "{tmp / "journal.jsonl"}"\n\n'
            f'[leaderboard]\nurl = "{lb.url}"\nkey_env = "LB_TEST_KEY"\ntimeout_s = 3\n\n'
            f'[traces]\nendpoint = "{hub.url}"\ntoken_env = "HF_TEST_TOKEN"\norg = "evals"\n')
        self.outputs: list[str] = []

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "LB_TEST_KEY": SECRET_KEY, "HF_TEST_TOKEN": SECRET_TOKEN,
               "XDG_STATE_HOME": str(self.tmp / "state"), "COLUMNS": "200"}
        res = subprocess.run([sys.executable, "-m", "tui.cli", "--config", str(self.config), *argv],
                             capture_output=True, text=True, timeout=120, env=env, cwd=str(ROOT))
        self.outputs += [res.stdout, res.stderr]
        return res

    def json(self, *argv: str) -> tuple[int, Any]:
        res = self.run(*argv, "--format", "json")
        assert res.stdout, res.stderr
        return res.returncode, json.loads(res.stdout)

    def no_secrets(self) -> None:
        texts = list(self.outputs)
        texts += [p.read_text(errors="replace") for p in self.tmp.rglob("*") if p.is_file() and p.suffix in (
            ".json", ".jsonl", ".log", ".toml")]
        for t in texts:
            assert SECRET_KEY not in t and SECRET_TOKEN not in t


def test_fix_previews_then_applies_then_journal_and_undo_by_record_id(
        lb: Leaderboard, hub: HubServer, demo: Jobs, tmp_path: Path) -> None:
    others = lb.others_rows()
    cli = Cli(lb, hub, tmp_path)
    job = str(demo.need(SHORT) / SHORT)
    code, preview = cli.json("--batch", "fix", "partial_registered", job)
    assert code == 1
    [plan] = preview["plans"]
    assert plan["action"] == "deregister" and not plan["applied"] and plan["blocked"] is None
    assert [(s["op"], s["table"]) for s in plan["steps"]] == [("delete", "usage"), ("delete", "jobs")]
    assert lb.job("job_partial") is not None  # a preview writes nothing

    code, done = cli.json("--batch", "fix", "partial_registered", "--apply", job)
    assert code == 0 and done["plans"][0]["applied"]
    record = done["plans"][0]["record"]
    assert lb.job("job_partial") is None
    code, again = cli.json("--batch", "fix", "partial_registered", "--apply", job)
    assert code == 0 and again["plans"][0]["steps"] == []  # a second run changes nothing

    code, journal = cli.json("--batch", "journal")
    writes = journal["writes"]
    assert [w["op"] for w in writes[:2]] == ["delete", "delete"] and writes[0]["record"] == record
    job_write = next(w for w in writes if w["target"].startswith("sandbox_jobs"))
    assert job_write["user"] and job_write["before"][0]["id"] == lb.ids["job_partial"] and job_write["after"] == []
    table = cli.run("--batch", "journal", "--format", "table")
    assert "deregister:apply delete" in table.stdout and record in table.stdout

    res = cli.run("--batch", "undo", record, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["status"] == "undone"
    assert lb.job("job_partial") is not None
    code, journal = cli.json("--batch", "journal", "--since", "2000-01-01T00:00:00")
    assert journal["writes"][0]["event"] == "undo"
    assert lb.others_rows() == others
    cli.no_secrets()


def test_fix_refuses_a_row_that_is_not_ours_and_read_only_refuses_apply(
        lb: Leaderboard, hub: HubServer, demo: Jobs, tmp_path: Path) -> None:
    cli = Cli(lb, hub, tmp_path)
    job = str(demo.need(GATE) / GATE)
    code, out = cli.json("--batch", "fix", "partial_registered", "--apply", job)
    [plan] = out["plans"]
    assert code == 1 and plan["action"] is None and "harvest-bot" in plan["message"]
    assert lb.ids["job_gate_other"][:8] in plan["evidence"] and f"ask {ME}" not in plan["message"]
    res = cli.run("--read-only", "--batch", "fix", "partial_registered", "--apply", str(demo.need(SHORT) / SHORT))
    assert res.returncode == 2 and "read-only" in res.stderr
    assert lb.job("job_partial") is not None and lb.job("job_gate_other") is not None
    res = cli.run("--batch", "fix", "no_such_check", job)
    assert res.returncode == 2 and "is not a check" in res.stderr and "partial_registered" in res.stderr
    res = cli.run("--batch", "journal", "--since", "yesterday")
    assert res.returncode == 2 and "--since" in res.stderr
    cli.no_secrets()


def test_a_refusal_prints_the_evidence_and_the_candidate_rows(
        lb: Leaderboard, hub: HubServer, demo: Jobs, tmp_path: Path) -> None:
    """Two rows of yours carry the run's job name: every fix writes nothing, and says why with
    both rows (id, user, status, created, job name) — in the table and in JSON."""
    cli = Cli(lb, hub, tmp_path)
    job = str(demo.need(SHORT) / SHORT)
    # another user's row whose job name would drive the terminal: listed, escaped
    hostile = "x\x1b]52;c;aGk=\x07"
    lb.execute("INSERT INTO sandbox_jobs (username, model_id, benchmark_id, status, job_name) VALUES "
               "('colleague', %s, %s, 'Started', %s)", (lb.ids["model_qwen"], lb.ids["bench_tb2"], hostile))
    listed = cli.run("--batch", "fix", "partial_registered", job, "--format", "table").stdout
    assert "not yours" in listed and "\x1b" not in listed and "x\\x1b]52;c;aGk=\\x07" in listed
    dup = str(uuid.uuid4())
    lb.execute("INSERT INTO sandbox_jobs (id, username, model_id, benchmark_id, status, score, job_name) "
               "VALUES (%s, %s, %s, %s, 'Finished', 0.31, %s)", (dup, ME, lb.ids["model_qwen"], lb.ids["bench_tb2"],
                                                                 SHORT))
    before = lb.sql("SELECT * FROM sandbox_jobs ORDER BY id")
    res = cli.run("--batch", "fix", "partial_registered", "--apply", job, "--format", "table")
    assert res.returncode == 1, res.stderr
    text = " ".join(res.stdout.split())
    assert "unclear which row is this run's: 2 rows of yours carry this run's job name" in text
    for rid in (lb.ids["job_partial"], dup):
        assert f"{rid[:8]} {ME} Finished" in text
    assert f"job {SHORT}" in text and "created " in text
    assert "ask me" not in text and f"ask {ME}" not in text
    for check in ("registered", "partial_registered", "traces"):
        code, out = cli.json("--batch", "fix", check, "--apply", job)
        [plan] = out["plans"]
        assert not plan["applied"] and plan["steps"] == [], check
        assert (plan["status"], code) == (("warn", 0) if check == "traces" else ("fail", 1)), check  # not complete
        assert dup[:8] in plan["evidence"] and dup[:8] in plan["message"], check
    assert lb.sql("SELECT * FROM sandbox_jobs ORDER BY id") == before
    cli.no_secrets()


def test_repoint_from_batch_and_undo(lb: Leaderboard, hub: HubServer, demo: Jobs, tmp_path: Path) -> None:
    cli = Cli(lb, hub, tmp_path)
    job = str(demo.need(NUMERIC) / NUMERIC)
    table = cli.run("--batch", "fix", "benchmark_name", job, "--format", "table")
    assert "keep benchmark 34ab93c4e1d2…: still referenced by 1 row(s) of colleague" in table.stdout
    assert "dry run" in table.stdout
    code, out = cli.json("--batch", "fix", "benchmark_name", "--apply", job)
    record = out["plans"][0]["record"]
    assert code == 0 and record
    assert str(lb.job("job_numeric")["benchmark_id"]) == lb.ids["bench_tb2"]  # type: ignore[index]
    assert cli.run("--batch", "undo", record).returncode == 0
    assert str(lb.job("job_numeric")["benchmark_id"]) == lb.ids["bench_hash"]  # type: ignore[index]


def test_audit_when_the_leaderboard_is_down_says_so_and_still_audits(
        lb: Leaderboard, hub: HubServer, demo: Jobs, tmp_path: Path) -> None:
    cli = Cli(lb, hub, tmp_path)
    cli.config.write_text(cli.config.read_text().replace(lb.url, "http://127.0.0.1:9"))
    res = cli.run("--batch", "audit", "--format", "json", str(demo.need(SHORT) / SHORT))
    assert res.returncode == 1
    assert "leaderboard" in res.stderr and "Traceback" not in res.stderr
    checks = {c["id"]: c for c in json.loads(res.stdout)["experiments"][0]["checks"]}
    assert checks["traces"]["status"] == "warn" and "unreachable" in checks["traces"]["evidence"]
    assert checks["valid_count"]["status"] == "fail"  # the files' own checks stand
    cli.no_secrets()


def test_a_missing_key_is_named_by_its_variable_never_shown(
        lb: Leaderboard, hub: HubServer, demo: Jobs, tmp_path: Path) -> None:
    cli = Cli(lb, hub, tmp_path)
    cli.config.write_text(cli.config.read_text().replace('key_env = "LB_TEST_KEY"', 'key_env = "LB_UNSET_KEY"'))
    res = cli.run("--batch", "audit", "--format", "json", str(demo.need(SHORT) / SHORT))
    assert "LB_UNSET_KEY" in res.stderr and "Traceback" not in res.stderr
    cli.no_secrets()
