"""80x24 shows what matters and 120x40 uses the space: pressed and read as a person would."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
from textual.widgets import Button, DataTable, Footer

from services.core.models import Verdict
from services.core.plain import copy_with, dump
from services.remediations.inputs import InputField
from tests.support.ui_demo import make_demo_app, make_full_demo_app, settle, shared_demo, shared_full_demo
from tui.screens.experiments import ExperimentsScreen
from tui.screens.inputs import InputsScreen
from tui.screens.trials import TrialsScreen
from widgets.log_tail import LogView
from widgets.notice_line import NoticeLine


def screen_text(app: object) -> str:
    import io

    from rich.console import Console

    size = app.size  # type: ignore[attr-defined]
    c = Console(width=size.width, height=size.height, record=True, file=io.StringIO(), color_system=None)
    c.print(app.screen._compositor.render_update(full=True))  # type: ignore[attr-defined]
    return c.export_text()


async def test_80x24_list_labels_footer_cursor_and_notices(tmp_path: Path,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(pilot)
        text = screen_text(app)
        # benchmark, model and date in the run's label; the full id in the detail line
        assert "tb2 SERA-14B 11-19" in text and "tb2 Qwen3-32B-agentic 11-19" in text
        table = app.screen.query_one(DataTable)
        assert table.cursor_row == 0
        keys = list(app.screen.query_one(Footer).query("FooterKey"))
        assert keys[0].key_display == "enter"  # type: ignore[attr-defined]
        # a notice takes a line of its own: the table and the detail lines stay in view
        app.notify("a notice that must not cover anything", timeout=30)
        await settle(pilot, 2)
        line = app.screen.query_one(NoticeLine)
        assert line.display and "a notice that must not cover" in screen_text(app)
        for widget in (table, app.screen.query_one("#detail")):
            assert not widget.region.overlaps(line.region), widget
        assert "tb2 SERA-14B 11-19" in screen_text(app)


async def test_80x24_header_keeps_its_indicators_whole(tmp_path: Path,
                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.paused = True
        app.error_count = 3
        app.screen.query_one("ConsoleHeader").refresh()
        await settle(pilot, 2)
        first = screen_text(app).splitlines()[0]
        assert "READ-ONLY" in first and "PAUSED" in first and "3 err (L)" in first, first


async def test_120x40_gives_benchmark_and_model_their_width(tmp_path: Path,
                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        widths = {c.key.value: c.width for c in app.screen.query_one(DataTable).columns.values()}
        assert widths["benchmark"] > 14 and widths["model"] > 14 and widths["id"] >= 20, widths
        assert "terminal_bench_2" in screen_text(app)


async def test_describe_shows_every_field_of_the_row(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        home = app.screen
        assert isinstance(home, ExperimentsScreen)
        exp = home.shown[0].exp
        await pilot.press("d")
        await settle(pilot, 2)
        assert type(app.screen).__name__ == "DescribeScreen"
        fields = dict(app.screen.fields)  # type: ignore[attr-defined]
        for name, value in dump(exp, json=True).items():
            if name == "counts":
                assert all(f"counts.{k}" in fields for k in value)
            elif name != "verified_at":  # the reader's bookkeeping, said in the header
                assert name in fields, name
        assert fields["id"] == exp.id and fields["path"] == exp.path and "verdict" in fields
        await pilot.press("escape")
        await settle(pilot, 2)
        assert app.screen is home


async def test_trials_zoom_and_tab_and_the_task_in_running_names(tmp_path: Path,
                                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot, 4)
        screen = app.screen
        assert isinstance(screen, TrialsScreen)
        assert any(k.key_display == "tab" for k in screen.query_one(Footer).query("FooterKey"))  # type: ignore
        await pilot.press("tab")
        await settle(pilot, 2)
        assert isinstance(app.focused, LogView)
        await pilot.press("tab")
        await settle(pilot, 2)
        assert app.focused is screen.table
        await pilot.press("z")
        await settle(pilot, 2)
        assert not screen.table.display and screen.log_tail.region.height >= 18  # the log, whole screen
        await pilot.press("z")
        await settle(pilot, 2)
        assert screen.table.display
        await pilot.press("question_mark", "t", "a", "b")  # typing filters the keys
        await settle(pilot, 2)
        assert "Move between the table and the log" in screen_text(app)
        await pilot.press("escape", "escape")
        await settle(pilot, 2)
        await pilot.press("m")  # the live monitor of the running demo job
        await settle(pilot, 4)
        assert "scikit-learn-26104" in screen_text(app)


async def test_help_text_is_never_cut(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark", "c", "l", "i", "p")
        await settle(pilot, 2)
        inside = [ln[ln.find("█") + 1:ln.rfind("█")] for ln in screen_text(app).splitlines() if ln.count("█") >= 2]
        words = " ".join(" ".join(ln.split()) for ln in inside)
        assert "Copy the selected experiment's path to the clipboard (OSC 52: works over ssh)" in words


async def test_inputs_dialog_keeps_continue_in_view_at_80x24(tmp_path: Path,
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    fields = [InputField(name=f"f{i}", label=f"field {i}", guidance="a long guidance line " * 6, suggested=i)
              for i in range(4)]
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.push_screen(InputsScreen("Launch gsm8k on a host", fields))
        await settle(pilot, 2)
        button = app.screen.query_one("#inputs-continue", Button)
        assert button.region.height and app.screen.region.contains_region(button.region), button.region


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_every_verdict_word_shows_whole_with_a_gap(size: tuple[int, int], tmp_path: Path,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every verdict there is, in the audit column of every source's rows, at both sizes."""
    words = list(get_args(Verdict))
    app = make_full_demo_app(shared_full_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        home = app.screen
        assert isinstance(home, ExperimentsScreen)
        keys = [r.key for r in home.rows]
        # as many rounds as it takes for every word to sit in a row once
        for start in range(0, len(words), len(keys)):
            for key, word in zip(keys, words[start:start + len(keys)], strict=False):
                app.audits[key] = copy_with(app.audits[key], verdict=word)
            home.rebuild()
            await settle(pilot, 2)
            text = screen_text(app)
            for word in words[start:start + len(keys)]:
                # the word whole, a gap of at least two columns, then the row's age
                assert re.search(rf" {word}  +(\d+[smhd]|stale)\s*$", text, re.MULTILINE), (word, text)
            # the id column still says benchmark, model and date at 80 columns
            assert "tb2 SERA-14B 11-19" in text, text


async def test_a_notice_raised_on_another_screen_shows_on_the_way_back(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(pilot)
        app.clear_notifications()
        await pilot.press("question_mark")  # the help dialog: it has no notice line of its own
        await settle(pilot, 2)
        app.notify("raised while help was open", timeout=30)
        await settle(pilot, 2)
        await pilot.press("escape")
        await settle(pilot, 2)
        assert isinstance(app.screen, ExperimentsScreen)
        assert "raised while help was open" in screen_text(app)
        line = app.screen.query_one(NoticeLine)
        assert not line.region.overlaps(app.screen.query_one(DataTable).region)
        app.clear_notifications()
        await settle(pilot, 2)
        assert not line.display and "raised while help" not in screen_text(app)
