"""Pilot tests of the home screen: drill in and back, filter, sort, help, palette, errors."""

from __future__ import annotations

from pathlib import Path

from textual.command import CommandPalette
from textual.widgets import DataTable, Input

from services.models import Snapshot
from services.sources.base import ProgressFn
from tui.palette import EvaldeskCommands
from tui.screens.audit import AuditScreen
from tui.screens.experiments import ExperimentsScreen, RowFilter
from tui.screens.help import HelpScreen
from tui.screens.log import LogScreen

try:
    from ui_demo import DEV_KEY, make_demo_app, settle
except ImportError:  # collected as a package
    from tests.ui_demo import DEV_KEY, make_demo_app, settle

SIZE = (120, 40)


def home(app: object) -> ExperimentsScreen:
    screen = app.screen  # type: ignore[attr-defined]
    assert isinstance(screen, ExperimentsScreen)
    return screen


def ids(screen: ExperimentsScreen) -> list[str]:
    return [r.exp.id for r in screen.shown]


def select(screen: ExperimentsScreen, key: str) -> None:
    index = [r.key for r in screen.shown].index(key)
    screen.query_one(DataTable).move_cursor(row=index, animate=False)


def test_row_filter_rules() -> None:
    assert RowFilter.parse("dev|sera").matches(["terminal_bench_2_laion-SERA-14B"])
    assert not RowFilter.parse("!dev").matches(["dev_set_v2"])
    assert RowFilter.parse("!dev").matches(["terminal_bench_2"])
    # not a valid regex: taken literally
    assert RowFilter.parse("gpt-5(").matches(["openai/gpt-5(mini"])
    assert RowFilter.parse("").matches(["anything"])


async def test_lists_every_experiment_and_drills_into_audit_and_back(tmp_path: Path) -> None:
    app = make_demo_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = home(app)
        assert len(screen.shown) == 6
        assert len(app.audits) == 6
        verdicts = {r.exp.id.split("_20")[0]: r.report.verdict for r in screen.shown if r.report}
        assert verdicts["dev_set_v2_gpt-5-mini"] == "dedupe"
        select(screen, DEV_KEY)
        await pilot.press("a")
        assert isinstance(app.screen, AuditScreen)
        assert app.screen.key == DEV_KEY
        await pilot.press("escape")
        assert app.screen is screen
        # the cursor stays on the row it was on
        assert screen.selected_key() == DEV_KEY


async def test_enter_opens_trials_or_says_why(tmp_path: Path) -> None:
    app = make_demo_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        select(home(app), DEV_KEY)
        await pilot.press("enter")
        await pilot.pause()
        try:
            from tui.screens.trials import TrialsScreen  # type: ignore[import-not-found,unused-ignore]
        except ModuleNotFoundError:
            assert isinstance(app.screen, ExperimentsScreen)
            assert any("trials view" in e.message for e in app.event_log)
        else:
            assert isinstance(app.screen, TrialsScreen)


async def test_filter_regex_invert_and_recall(tmp_path: Path) -> None:
    app = make_demo_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = home(app)
        await pilot.press("slash")
        assert screen.query_one("#filter", Input).has_focus
        await pilot.press(*"v2|SERA")
        assert sorted(i.split("_20")[0] for i in ids(screen)) == [
            "dev_set_v2_gpt-5-mini", "terminal_bench_2_laion-SERA-14B"]
        # matches are highlighted in the cells
        table = screen.query_one(DataTable)
        cell = table.get_row_at(0)[1]
        assert any(str(span.style) == "reverse" for span in cell.spans)
        await pilot.press("enter")
        assert table.has_focus
        assert len(screen.shown) == 2
        # esc on the table clears the filter …
        await pilot.press("escape")
        assert len(screen.shown) == 6
        # … and / recalls it
        await pilot.press("slash")
        assert screen.query_one("#filter", Input).value == "v2|SERA"
        await pilot.press("escape")
        assert len(screen.shown) == 6
        # ! inverts
        screen.query_one("#filter", Input).value = ""
        await pilot.press("slash")
        screen.query_one("#filter", Input).value = "!terminal_bench"
        await pilot.press("enter")
        assert sorted(i.split("_")[0] for i in ids(screen)) == ["dev", "swebench-verified-random-100"]


async def test_sort_toggles_direction_with_the_same_key(tmp_path: Path) -> None:
    app = make_demo_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = home(app)
        await pilot.press("7")  # score
        scores = [r.exp.score for r in screen.shown]
        assert scores == sorted(scores)
        table = screen.query_one(DataTable)
        assert str(table.columns["score"].label).endswith("▲")
        await pilot.press("7")
        scores = [r.exp.score for r in screen.shown]
        assert scores == sorted(scores, reverse=True)
        assert str(table.columns["score"].label).endswith("▼")
        await pilot.press("s")  # next column: error %
        assert screen.sort_col == "errors" and not screen.sort_reverse
        await pilot.press("S")
        assert screen.sort_reverse


async def test_compact_columns_at_80x24(tmp_path: Path) -> None:
    app = make_demo_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = home(app).query_one(DataTable)
        keys = [str(k.value) for k in table.columns]
        assert "model" not in keys and "source" not in keys
        assert keys[:2] == ["id", "state"]
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= 80


async def test_help_lists_this_screens_keys_and_filters(tmp_path: Path) -> None:
    app = make_demo_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one(DataTable)
        texts = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert any("Filter rows" in t for t in texts)
        assert not any("Undo" in t for t in texts)  # an audit key, not this screen's
        await pilot.press(*"sort")
        texts = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert texts and all("sort" in t.lower() for t in texts)
        await pilot.press("escape")
        assert isinstance(app.screen, ExperimentsScreen)


async def test_palette_commands_follow_the_screen(tmp_path: Path) -> None:
    app = make_demo_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)

        async def names() -> list[str]:
            provider = EvaldeskCommands(app.screen)
            return [str(h.text) async for h in provider.discover()]

        home_cmds = await names()
        assert any(n.startswith("Filter rows") for n in home_cmds)
        assert any(n.startswith("audit dev_set_v2") for n in home_cmds)
        app.open_audit(DEV_KEY)
        await pilot.pause()
        audit_cmds = await names()
        assert any(n.startswith("Undo the last dedupe") for n in audit_cmds)
        assert not any(n.startswith("Filter rows") for n in audit_cmds)
        await pilot.press("escape")
        # `:` opens the palette; a command from it runs
        await pilot.press("colon")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"audit dev_set")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot, 2)
        assert isinstance(app.screen, AuditScreen)


class BrokenSource:
    kind = "harbor"
    label = "broken"

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        raise RuntimeError("disk on fire")

    def fs(self) -> object:
        raise NotImplementedError

    async def close(self) -> None:
        return None


async def test_a_failing_scan_is_a_notice_and_a_log_entry(tmp_path: Path) -> None:
    from services.sources.harbor import HarborSource

    (tmp_path / "jobs").mkdir()
    from services.demo import write_demo

    write_demo(tmp_path / "jobs")
    good = HarborSource(tmp_path / "jobs", label="demo")
    app = make_demo_app(tmp_path, sources=[BrokenSource(), good])  # type: ignore[list-item]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ExperimentsScreen)
        assert len(home(app).shown) == 6  # the healthy source still shows
        errors = [e for e in app.event_log if e.level == "error"]
        assert errors and "disk on fire" in errors[0].message
        assert "RuntimeError" in errors[0].detail  # the traceback is kept for the log screen
        await pilot.press("L")
        assert isinstance(app.screen, LogScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, ExperimentsScreen)
