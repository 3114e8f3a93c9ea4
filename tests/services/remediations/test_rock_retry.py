"""Retry of a Rock experiment's failed tasks: the exact regression.py command, previewed,
then run through the write path's command step against a stand-in regression.py (a real
executable that follows the runbook's retry semantics and writes a new experiment)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from services.core.config import Config, RockConfig
from services.core.journal import Journal
from services.core.registry import open_sources
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.errors import WriteRefused
from services.remediations.records import RecordIndex
from services.remediations.rock_retry import RetryFilter, build_plan
from services.rock.source import RockResultsSource
from tests.support.rock_factory import RegressionRun

# regression.py retry, as the runbook describes it: --from-config JSON is the base and explicit
# options override it; the chosen tasks run again as a new experiment (results/<new id>.json)
STANDIN = r'''#!PYTHON
import json, os, sys
args = sys.argv[1:]
assert args[0] == "retry", args
exp = args[1]
opts, i = {}, 2
while i < len(args):
    key = args[i][2:].replace("-", "_")
    if i + 1 < len(args) and not args[i + 1].startswith("--"):
        opts[key] = args[i + 1]; i += 2
    else:
        opts[key] = True; i += 1
base = json.load(open(opts.pop("from_config"))) if "from_config" in opts else {}
settings = {**base, **{k: v for k, v in opts.items() if k not in ("filter", "exception_type", "tasks")}}
old = json.load(open(f"results/{exp}.json"))
if "tasks" in opts:
    pick = [t for t in old["tasks"] if t["task_id"] in opts["tasks"].split(",")]
else:
    pick = [t for t in old["tasks"] if t["status"] == opts.get("filter")
            and (not opts.get("exception_type") or t.get("exception_type") == opts["exception_type"])]
new = exp + "-retry"
tasks = [{"task_id": t["task_id"], "status": "completed", "reward": 1.0} for t in pick]
json.dump({"experiment_id": new, "bench": old.get("bench"), "tasks": tasks}, open(f"results/{new}.json", "w"))
json.dump(settings, open(f"configs/{new}.json", "w"))
with open(os.environ["RETRY_LOG"], "a") as fh:
    fh.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd()}) + "\n")
print(f"experiment {new}: {len(tasks)} task(s) dispatched")
'''


def _work(tmp_path: Path, status: str | None = None) -> RegressionRun:
    run = RegressionRun(tmp_path / "work", status=status)
    run.task("a", "completed", 1.0).task("b", "completed", 0.0)
    run.task("c", "error", exception="RuntimeError", message="docker died")
    run.task("d", "error", exception="RewardFileNotFoundError", message="no reward")
    run.task("e", "error", exception="RuntimeError", message="docker died again")
    run.task("f", "timeout", exception="AgentTimeoutError")
    run.write()
    return run


def _regression(tmp_path: Path) -> Path:
    script = tmp_path / "skill" / "scripts" / "regression.py"
    script.parent.mkdir(parents=True)
    script.write_text(STANDIN.replace("PYTHON", sys.executable, 1))
    script.chmod(0o755)
    return script


def _setup(tmp_path: Path, **opts: object) -> tuple[Config, RockResultsSource]:
    run = _work(tmp_path)
    entry = RockConfig(name="regress", workdir=str(run.workdir), regression=str(_regression(tmp_path)),
                       python=sys.executable, **opts)  # type: ignore[arg-type]
    config = Config(rock=[entry], journal_path=str(tmp_path / "journal.jsonl"))
    (src,) = open_sources(str(run.workdir), config)
    assert isinstance(src, RockResultsSource) and src.settings is entry
    return config, src


async def test_preview_shows_the_exact_command_and_the_from_config_overrides(tmp_path: Path) -> None:
    config, src = _setup(tmp_path, retry_options={"concurrency": 4, "window_size": 10, "pre": False})
    exp = (await src.scan()).experiments[0]
    plan = await registry.plan("retry", exp, src, config)
    script = config.rock[0].regression
    argv = [sys.executable, script, "retry", "exp-0001", "--from-config", "configs/exp-0001.json", "--filter", "error",
            "--concurrency", "4", "--window-size", "10", "--no-pre"]
    assert plan.meta["command"] == argv and plan.blocked is None
    assert plan.preview[1] == f"  cd {shlex.quote(exp.path)} && {shlex.join(argv)}"
    assert plan.meta["tasks"] == ["c", "d", "e"]
    text = plan.preview_text()
    assert "Tasks (3; RewardFileNotFoundError, RuntimeError): c, d, e" in text
    assert "concurrency: 8 → 4 (explicit option)" in text
    assert 'window_size: 10 (explicit option, not in the saved config)' in text
    assert "results/exp-0001.json is not changed" in text


def test_filters_by_exception_and_by_task_list(tmp_path: Path) -> None:
    run = _work(tmp_path)
    exp = RockResultsSource(run.workdir).scan_sync().experiments[0]
    settings = RockConfig(name="r", regression="/x/regression.py")
    by_exc = build_plan(exp, settings, RetryFilter(exception_type="RuntimeError"))
    assert by_exc.meta["tasks"] == ["c", "e"]
    assert by_exc.meta["command"][-4:] == ["--filter", "error", "--exception-type", "RuntimeError"]
    by_name = build_plan(exp, settings, RetryFilter(tasks=["f", "b"]))
    assert by_name.meta["tasks"] == ["b", "f"] and by_name.meta["command"][-2:] == ["--tasks", "f,b"]
    timeouts = build_plan(exp, settings, RetryFilter(status="timeout"))
    assert timeouts.meta["tasks"] == ["f"]
    none = build_plan(exp, settings, RetryFilter(exception_type="NoSuchError"))
    assert none.nothing_to_do and "nothing to retry" in none.preview[0]


async def test_retry_runs_through_the_write_path_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, src = _setup(tmp_path, retry_options={"concurrency": 4})
    log = tmp_path / "retry.log"
    monkeypatch.setenv("RETRY_LOG", str(log))
    exp = (await src.scan()).experiments[0]
    plan = await registry.plan("retry", exp, src, config)
    write_path = WritePath(Journal(config.journal_path), index=RecordIndex(tmp_path / "records"))
    record = await registry.apply("retry", plan, exp.id, src, config, write_path)
    assert record.status == "applied"
    (ran,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert ran["argv"] == plan.meta["command"][2:] and ran["cwd"] == exp.path
    assert record.results[0]["exit_code"] == 0 and "3 task(s) dispatched" in record.results[0]["stdout_tail"]
    # the retry is a new experiment; the old results file is untouched
    snap = await src.scan()
    by_id = {e.id: e for e in snap.experiments}
    assert sorted(by_id) == ["exp-0001", "exp-0001-retry"]
    new = by_id["exp-0001-retry"]
    assert [t.task_name for t in new.trials] == ["c", "d", "e"]
    # --from-config semantics: the saved JSON is the base, the explicit option wins
    saved = json.loads((Path(exp.path) / "configs" / "exp-0001-retry.json").read_text())
    assert (saved["concurrency"], saved["agent"]) == ("4", "claude-code")
    # idempotent: the same retry planned again has nothing to do
    again = build_plan(by_id["exp-0001"], config.rock[0], index=RecordIndex(tmp_path / "records"))
    assert again.nothing_to_do and "already ran" in again.preview[0]
    entries = [json.loads(x) for x in Path(config.journal_path or "").read_text().splitlines()]
    assert [e["action"] for e in entries] == ["retry:begin", "retry:apply"]  # write-ahead, then done


async def test_blocked_without_regression_py_or_while_running_and_refused_read_only(tmp_path: Path) -> None:
    run = _work(tmp_path)
    src = RockResultsSource(run.workdir)  # no [[rock]] entry: no regression.py known
    config = Config(journal_path=str(tmp_path / "journal.jsonl"))
    exp = (await src.scan()).experiments[0]
    plan = await registry.plan("retry", exp, src, config)
    assert plan.meta["command"][:4] == ["python3", "regression.py", "retry", "exp-0001"]
    assert plan.blocked and 'set regression = "/path/to/regression.py"' in plan.blocked
    assert plan.preview[-1].startswith("Cannot run yet: regression.py is not configured")
    with pytest.raises(WriteRefused, match=r"regression\.py is not configured"):
        await registry.apply("retry", plan, exp.id, src, config, WritePath(Journal(config.journal_path)))
    live = RegressionRun(tmp_path / "live", status="running")
    live.task("a", "error", exception="RuntimeError").task("b", "dispatched").write()
    live_exp = RockResultsSource(live.workdir).scan_sync().experiments[0]
    blocked = build_plan(live_exp, RockConfig(name="r", regression=str(_regression(tmp_path))))
    assert blocked.blocked == "exp-0001 is still running: sync it and wait for it to end before retrying"
    config2, src2 = _setup(tmp_path / "ro")
    exp2 = (await src2.scan()).experiments[0]
    plan2 = await registry.plan("retry", exp2, src2, config2)
    with pytest.raises(WriteRefused, match="read-only"):
        await registry.apply("retry", plan2, exp2.id, src2, config2,
                             WritePath(Journal(config2.journal_path), read_only=True))


async def test_retry_is_refused_for_experiments_that_are_not_rock_work_dirs(tmp_path: Path) -> None:
    from services.harbor.demo import write_demo

    write_demo(tmp_path / "jobs")
    config = Config()
    (src,) = open_sources(str(tmp_path / "jobs"), config)
    exp = (await src.scan()).experiments[0]
    with pytest.raises(WriteRefused, match="not one"):
        await registry.plan("retry", exp, src, config)
