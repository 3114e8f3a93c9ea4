"""What a new user meets in the first minute: ids that tell rows apart, where-am-I lines, one
census wording, warnings that do not pile up, terminals that cannot draw, the log wrap, and the
batch contract's edges."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable

from services.core.census import census_words
from services.core.models import Experiment, TrialCounts
from services.core.plain import copy_with
from tests.support.ui_demo import DEV_SET, make_demo_app, settle, shared_demo
from tui.screens.experiments import ExperimentsScreen, id_labels
from tui.screens.trials import TrialsScreen
from widgets.ids import distinguishing
from widgets.log_tail import LogTail, regex_problem

ROOT = Path(__file__).resolve().parents[2]
SERA_KEY = "demo::terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00"


def test_ids_keep_the_part_that_tells_rows_apart() -> None:
    names = ["scikit-learn__scikit-learn-26104__xiruUEG", "scikit-learn__scikit-learn-25500__abcdEFG",
             "scikit-learn__scikit-learn-14141__zzzzzzz"]
    assert distinguishing(names, 14) == ["26104__xiruUEG", "25500__abcdEFG", "14141__zzzzzzz"]
    shown = distinguishing(names, 8)
    assert len(set(shown)) == 3 and all(len(s) <= 8 for s in shown)
    # one id alone is only cut at the end
    assert distinguishing(["terminal_bench_2_laion-SERA-14B"], 12) == ["terminal_be…"]
    # whole tokens only: -14B is never cut to 4B
    assert distinguishing(["x_laion-SERA-14B", "x_laion-SERA-4B"], 20) == ["14B", "4B"]


def test_experiment_ids_keep_benchmark_model_and_date_and_the_time_when_two_runs_share_a_day() -> None:
    a = Experiment(id="terminal_bench_2_laion-M_2026-11-19__10-45-00", source="harbor",
                   benchmark_from_dir="terminal_bench_2")
    b = copy_with(a, **{"id": "terminal_bench_2_laion-M_2026-11-20__09-00-00"})
    c = copy_with(a, **{"id": "terminal_bench_2_laion-Other_2026-11-19__10-45-00"})
    labels = id_labels([a, b, c], 24)
    assert labels == ["tb2 laion-M 11-19", "tb2 laion-M 11-20", "tb2 laion-Other 11-19"]
    d = copy_with(a, **{"id": "terminal_bench_2_laion-M_2026-11-19__18-00-00"})
    assert id_labels([a, d], 24) == ["tb2 laion-M 11-19 10:45", "tb2 laion-M 11-19 18:00"]


def test_one_census_wording() -> None:
    c = TrialCounts(total=315, valid=294, errored=21, running=0, expected=300, copies=6, invalid_errors=21)
    assert census_words(c, valid_after_dedupe=283) == (
        "294 valid of 300 expected · 315 attempts (21 errored) · 21 invalid errors · 6 staged copies · "
        "283 valid after dedupe")
    assert census_words(c) == ("294 valid of 300 expected · 315 attempts (21 errored) · 21 invalid errors · "
                               "6 staged copies")
    assert census_words(c, score=0.3231, with_score=True).startswith("score 0.323 · 294 valid of 300 expected")


async def test_trials_breadcrumb_and_counts_of_the_filtered_set(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.open_trials(SERA_KEY)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TrialsScreen)
        title = str(screen.query_one("#trials-title").render())
        assert "› trials" in title and "255 valid of 267 expected" in title
        await pilot.press("s", "s")
        await settle(pilot, 2)
        title = str(screen.query_one("#trials-title").render())
        lines = title.splitlines()
        assert lines[0].endswith("trials › status errored") and len(lines[0]) <= 80
        assert lines[1].startswith("12 of 267 rows: 0 valid · 12 errored")


async def test_the_same_run_reads_the_same_everywhere(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    key = f"demo::{DEV_SET}"
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        home = app.screen
        assert isinstance(home, ExperimentsScreen)
        home.query_one(DataTable).move_cursor(row=[r.key for r in home.shown].index(key), animate=False)
        await pilot.pause()
        words = ("294 valid of 300 expected · 315 attempts (21 errored) · 21 invalid errors · 6 staged copies · "
                 "283 valid after dedupe")
        assert words in str(home.query_one("#detail").render())
        await pilot.press("a")
        await settle(pilot, 2)
        assert words in str(app.screen.query_one("#audit-title").render())
        assert "after dedupe" in str(app.screen.query_one("#audit-title").render())


async def test_a_warning_toasts_once_and_stays_in_the_log(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(pilot)
        app.refresh_sources()
        await settle(pilot)
        toasts = [n for n in app.notices if "rule d" in n.message]
        assert len(toasts) == 1 and len(toasts[0].message) < 100
        assert any("rule d" in e.message for e in app.event_log)


async def test_sixteen_colour_terminals_mark_the_cursor_in_reverse(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "standard")
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.has_class("-few-colors")
        style = app.screen.query_one(DataTable).get_component_rich_style("datatable--cursor")
        assert style.reverse


def test_a_dumb_terminal_is_pointed_to_batch(tmp_path: Path) -> None:
    env = {**os.environ, "TERM": "dumb", "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(tmp_path)}
    env.pop("TEXTUAL_DRIVER", None)
    p = subprocess.run([sys.executable, "-m", "tui.cli", str(tmp_path)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and "--batch" in p.stderr and "Traceback" not in p.stderr


async def test_wrapped_log_lines_lose_no_character_when_the_scrollbar_shows(tmp_path: Path) -> None:
    from textual.app import App, ComposeResult

    from services.transport.fs import LocalFS
    from widgets.log_tail import FSReader

    line = "".join(chr(ord("a") + i % 26) for i in range(200))
    log = tmp_path / "trial.log"
    log.write_text("\n".join(f"{n:03d} {line}" for n in range(60)) + "\n")

    class TailApp(App[None]):
        def compose(self) -> ComposeResult:
            yield LogTail()

    app = TailApp()
    async with app.run_test(size=(60, 20)) as pilot:
        tail = app.query_one(LogTail)
        tail.open(FSReader(LocalFS(), str(log)), "trial.log")
        for _ in range(50):
            await pilot.pause(0.05)
            if len(tail.lines) >= 60:
                break
        await pilot.press("w")
        await pilot.pause(0.2)
        shown = tail.visible_lines()
        joined = "".join(x.rstrip() for x in shown)
        # what is on screen, put back together, is a run of the original text
        assert joined and "".join(joined.split()) in "".join(("\n".join(tail.lines)).split())


def test_invalid_regex_is_reported() -> None:
    assert regex_problem("gpt-5(") and regex_problem("gpt-5") is None


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_monitor_refuses_formats_it_cannot_stream(tmp_path_factory: pytest.TempPathFactory) -> None:
    jobs = shared_demo(tmp_path_factory)
    for fmt in ("json", "table"):
        p = run_cli("--batch", "monitor", "--format", fmt, "--until", "1", str(jobs))
        assert p.returncode == 2 and "JSON lines" in p.stderr and p.stdout == ""


def test_exception_filter_ignores_case_and_says_when_nothing_matches(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    job = shared_demo(tmp_path_factory) / "terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00"
    p = run_cli("--batch", "trials", "--format", "json", "--exception", "nonzeroagentexitcodeerror", str(job))
    trials = json.loads(p.stdout)["trials"]
    assert trials and {t["exception_type"] for t in trials} == {"NonZeroAgentExitCodeError"}
    p = run_cli("--batch", "trials", "--format", "json", "--exception", "NoSuchError", str(job))
    assert json.loads(p.stdout)["trials"] == [] and "no trial has exception type 'NoSuchError'" in p.stderr
    assert "VerifierOutputParseError" in p.stderr


@pytest.mark.parametrize(("size", "palette_hint"), [((80, 24), False), ((120, 40), True)])
async def test_a_narrow_footer_keeps_help_and_drops_the_palette_hint(
        size: tuple[int, int], palette_hint: bool, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    from textual.widgets import Footer

    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        for keys in ([], ["enter"]):  # the list, then the trials screen, which has the most keys
            for key in keys:
                await pilot.press(key)
                await settle(pilot, 4)
            footer = app.screen.query_one(Footer)
            assert footer.show_command_palette is palette_hint
            # `? Help` is drawn whole, inside the screen's width (app-wide keys after it may be cut)
            help_key = [k for k in footer.query("FooterKey") if k.key_display == "?"]  # type: ignore[attr-defined]
            assert help_key and help_key[0].region.right <= size[0], type(app.screen).__name__
