"""AISBench tasks in the console, as a person uses it: beside the Harbor jobs in the list, the
results view (v), trials per dataset with their logs, the audit, the needs_input dialog and
a launch that runs to the end (a stand-in ais_bench, the fake model server on loopback)."""

from __future__ import annotations

import asyncio
import html
import os
import re
import time
from datetime import timedelta
from pathlib import Path

import pytest
from textual.widgets import Button, DataTable, Input, Static

from services.aisbench.demo import write_demo as write_aisbench_demo
from services.aisbench.formats import TaskRow
from services.aisbench.table import LOCAL, LOCAL_TABLE, TaskTable
from services.core.config import Config
from services.core.registry import open_sources
from services.core.times import DEMO_NOW
from services.harbor.source import HarborSource
from tests.support.ais_bench_standin import install
from tests.support.openai_server import FakeOpenAI
from tui.app import EvaldeskApp
from tui.screens.audit import AuditScreen
from tui.screens.confirm import ConfirmScreen
from tui.screens.experiments import ExperimentsScreen
from tui.screens.inputs import InputsScreen
from tui.screens.results import ResultsScreen
from tui.screens.trials import TrialsScreen
from widgets.checklist import Checklist
from widgets.plots import SeriesPlot

try:
    from ui_demo import FIXED_NOW, settle, shared_demo, use_utc
except ImportError:  # collected as a package
    from tests.support.ui_demo import FIXED_NOW, settle, shared_demo, use_utc

SIZE = (120, 40)
KEY = "sk-console-test-0a1b2c3d4e5f"
PERF = "demo/aisbench::perf-gsm8k"
DOWN = "demo/aisbench::gsm8k-server-down"
NEEDS = "demo/aisbench::gsm8k-qwen3-32b"
BLOCKED = "demo/aisbench::ceval-qwen3-32b"


def aisbench_root(factory: pytest.TempPathFactory) -> Path:
    root = factory.mktemp("aisbench-demo")
    write_aisbench_demo(root, DEMO_NOW)
    return root / "aisbench-eval-a"


def make_app(harbor: Path | None, task_root: Path, state: Path) -> EvaldeskApp:
    use_utc()
    config = Config(journal_path=str(state / "journal.jsonl"))
    [src] = open_sources(str(task_root), config)
    src.label = "demo/aisbench"
    sources = [src] if harbor is None else [HarborSource(harbor, config.policy, label="demo"), src]
    return EvaldeskApp(sources, config, False, now=FIXED_NOW, poll=False, cursor_blink=False)


def select(app: EvaldeskApp, key: str) -> None:
    screen = app.screen
    assert isinstance(screen, ExperimentsScreen)
    index = [r.key for r in screen.shown].index(key)
    screen.query_one(DataTable).move_cursor(row=index, animate=False)


def text_of(app: EvaldeskApp) -> str:
    """What the terminal shows, as text (from the SVG a screenshot is made of)."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg.split("</style>")[-1])).replace("\xa0", " ")


async def test_tasks_sit_beside_harbor_jobs_and_v_opens_their_results(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    app = make_app(shared_demo(tmp_path_factory), aisbench_root(tmp_path_factory), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ExperimentsScreen)
        rows = {r.key: r.exp for r in screen.shown}
        assert {"demo::dev_set_v2_gpt-5-mini_2026-11-19__08-30-00", PERF, DOWN, NEEDS, BLOCKED} <= set(rows)
        states = {k.split("::")[1]: e.state.value for k, e in rows.items() if k.startswith("demo/aisbench")}
        assert states == {"gsm8k-accuracy": "finished", "perf-gsm8k": "finished", "gsm8k-server-down": "failed",
                          "swe-bench-verified-mini": "finished", "gsm8k-qwen3-32b": "needs_input",
                          "ceval-qwen3-32b": "blocked", "mmlu-qwen3-8b": "removed"}
        select(app, PERF)
        await pilot.press("v")
        await settle(pilot)
        results = app.screen
        assert isinstance(results, ResultsScreen)
        body = text_of(app)
        assert "Latency percentiles" in str(results.query_one(SeriesPlot).title)
        assert "Request Throughput" in body and "TTFT (ms)" in body
        plot = results.query_one(SeriesPlot)
        assert [ln.label for ln in plot.data.lines] == ["TTFT ms", "TPOT ms", "ITL ms"]
        assert list(plot.data.xs) == [50.0, 75.0, 90.0, 99.0]
        await pilot.press("t")
        await settle(pilot)
        assert isinstance(app.screen, TrialsScreen)
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, ResultsScreen)
        await pilot.press("a")
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, ResultsScreen)
        await pilot.press("q")  # back from the results the trials screen opened
        await settle(pilot)
        assert isinstance(app.screen, TrialsScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, ResultsScreen)
        await pilot.press("escape")
        await settle(pilot)
        select(app, "demo::dev_set_v2_gpt-5-mini_2026-11-19__08-30-00")  # a Harbor job: nothing beyond trials
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, ResultsScreen)
        assert "lays out nothing beyond its trials" in text_of(app)


async def test_a_failed_task_shows_why_per_dataset(tmp_path_factory: pytest.TempPathFactory,
                                                   tmp_path: Path) -> None:
    app = make_app(None, aisbench_root(tmp_path_factory), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        select(app, DOWN)
        await pilot.press("enter")
        await settle(pilot)
        trials = app.screen
        assert isinstance(trials, TrialsScreen)
        [t] = trials.trials
        assert (t.trial_name, t.status.value, t.exception_type) == ("fake-model/gsm8k", "errored",
                                                                    "TINFER-RUNTIME-001")
        await asyncio.sleep(0.2)
        await settle(pilot)
        assert "warmup failed" in "\n".join(trials.log_tail.lines)
        await pilot.press("d")
        await settle(pilot)
        info = trials.diagnose.info
        assert info is not None and info.traceback and "AISBenchRuntimeError" in info.traceback
        await pilot.press("5")  # the task's run.log
        await settle(pilot)
        assert any("evaldesk: start" in ln for ln in trials.log_tail.lines)
        await pilot.press("escape")
        await settle(pilot)
        select(app, DOWN)
        await pilot.press("a")
        await settle(pilot)
        audit = app.screen
        assert isinstance(audit, AuditScreen)
        items = {i.id: i for i in audit.query_one(Checklist).items}
        assert items["finished"].status == "fail" and "without a results file" in items["finished"].evidence
        assert items["results_file"].runnable == "aisbench_resume"


async def test_blocked_launch_previews_with_the_missing_piece_and_cannot_apply(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no ais_bench on this "host"
    app = make_app(None, aisbench_root(tmp_path_factory), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_audit(BLOCKED)
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot, 10)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert dialog.refusal and "image/environment present" in dialog.refusal
        # a plan that cannot apply offers no apply key at all
        assert not dialog.query("#confirm") and all("Apply" not in str(b.label) for b in dialog.query(Button))
        preview = "\n".join(dialog.lines)
        assert "FAIL  image/environment present: ais_bench not found" in preview
        assert "setsid -f nohup bash" in preview and "/ceval-qwen3-32b/run.sh" in preview
        await pilot.press("n")
        await settle(pilot)
        assert not (Path(app.source_for(BLOCKED).root) / "ceval-qwen3-32b").exists()  # type: ignore[attr-defined]


@pytest.fixture
def launchable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A local task root with one task asked for without max-out-len and batch size, a model
    server on loopback that wants a key, and a stand-in ais_bench on PATH."""
    root = tmp_path / "tasks"
    root.mkdir()
    install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AISBENCH_API_KEY", KEY)
    server = FakeOpenAI(api_key=KEY, models_need_key=False, max_model_len=40000).start()
    TaskTable(root / LOCAL_TABLE, LOCAL, str(root)).put(TaskRow(
        id="gsm8k-new", where=LOCAL, task_root=str(root), suite="gsm8k", model="fake-model",
        api_base=server.base_url, api_key_env="AISBENCH_API_KEY", created_at=DEMO_NOW - timedelta(minutes=1)))
    yield root
    server.stop()


async def test_needs_input_dialog_then_launch_runs_to_finished(launchable: Path, tmp_path: Path) -> None:
    root = launchable
    app = make_app(None, root, tmp_path)
    key = "demo/aisbench::gsm8k-new"
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.experiment(key).state.value == "needs_input"  # type: ignore[union-attr]
        app.open_audit(key)
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot, 8)
        dialog = app.screen
        assert isinstance(dialog, InputsScreen)
        shown = text_of(app)
        assert "max-model-len 40000: at most 31808 (40000 − 8K)" in shown
        assert "max-num-seqs" in shown and "512 → 25%" in shown
        assert dialog.answers() == {"max_out_len": "31808", "batch_size": "16"}
        # a bad value is refused where it was typed
        dialog.query_one("#input-batch_size", Input).value = "0"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.screen is dialog and "at least 1" in str(dialog.query_one("#inputs-error", Static).render())
        dialog.query_one("#input-max_out_len", Input).value = "2048"
        dialog.query_one("#input-batch_size", Input).value = "4"
        dialog.query_one("#input-max_out_len", Input).focus()
        await pilot.press("enter")  # next field
        await pilot.press("enter")  # the last field: go on
        await settle(pilot, 10)
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen), app.screen
        preview = "\n".join(confirm.lines)
        assert f"task dir:  {root}/gsm8k-new" in preview
        assert f"setsid -f nohup bash {root}/gsm8k-new/run.sh" in preview
        assert "max-out-len 2048, batch size 4" in preview and confirm.refusal is None
        assert KEY not in app.export_screenshot()
        await pilot.press("y")
        await settle(pilot, 10)
        deadline = time.monotonic() + 40
        while not (root / "gsm8k-new" / "exit_code").exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert (root / "gsm8k-new" / "exit_code").read_text().strip() == "0"
        app.refresh_sources()
        await settle(pilot)
        exp = app.experiment(key)
        assert exp is not None and exp.state.value == "finished" and exp.score == 0.5
        assert KEY in (root / "gsm8k-new" / "cfg" / "models" / "api_model.py").read_text()
        assert KEY not in app.export_screenshot()
        assert all(KEY not in e.message + e.detail for e in app.event_log)
        assert KEY.encode() not in (tmp_path / "journal.jsonl").read_bytes()
        assert KEY.encode() not in (root / LOCAL_TABLE).read_bytes()


async def test_inputs_dialog_cancels_with_escape(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    root = aisbench_root(tmp_path_factory)
    app = make_app(None, root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_audit(NEEDS)
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        assert isinstance(app.screen, InputsScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        row = TaskTable(root / LOCAL_TABLE, LOCAL, str(root)).get("gsm8k-qwen3-32b")
        assert row is not None and row.max_out_len is None and row.batch_size is None
