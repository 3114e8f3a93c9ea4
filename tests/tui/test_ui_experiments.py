"""Pilot tests of the home screen: drill in and back, filter, sort, help, palette, errors."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable, Input
from textual.widgets.data_table import ColumnKey

from services.core.models import Snapshot
from services.core.source import ProgressFn
from tui.palette import EvaldeskCommands
from tui.screens.audit import AuditScreen
from tui.screens.experiments import ExperimentsScreen, RowFilter
from tui.screens.help import HelpScreen
from tui.screens.log import LogScreen

try:
    from ui_demo import DEV_KEY, make_demo_app, settle, shared_demo
except ImportError:  # collected as a package
    from tests.support.ui_demo import DEV_KEY, make_demo_app, settle, shared_demo

SIZE = (120, 40)


@pytest.fixture
def app(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path):  # type: ignore[no-untyped-def]
    return make_demo_app(shared_demo(tmp_path_factory), tmp_path)


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


async def test_lists_every_experiment_and_drills_into_audit_and_back(app) -> None:  # type: ignore[no-untyped-def]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = home(app)
        assert len(screen.shown) == 6, [(e.message, e.detail[-300:]) for e in app.event_log]
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


async def test_enter_opens_trials_or_says_why(app) -> None:  # type: ignore[no-untyped-def]
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


async def test_filter_regex_invert_and_recall(app) -> None:  # type: ignore[no-untyped-def]
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
        assert any(str(span.style) == "reverse" for cell in table.get_row_at(0) for span in cell.spans)
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


async def test_sort_toggles_direction_with_the_same_key(app) -> None:  # type: ignore[no-untyped-def]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = home(app)
        await pilot.press("7")  # score
        scores = [r.exp.score or 0.0 for r in screen.shown]
        assert scores == sorted(scores)
        table = screen.query_one(DataTable)
        assert str(table.columns[ColumnKey("score")].label).endswith("▲")
        await pilot.press("7")
        scores = [r.exp.score or 0.0 for r in screen.shown]
        assert scores == sorted(scores, reverse=True)
        assert str(table.columns[ColumnKey("score")].label).endswith("▼")
        await pilot.press("s")  # next column: error %
        assert screen.sort_col == "errors" and not screen.sort_reverse
        await pilot.press("S")
        assert screen.sort_reverse


async def test_compact_columns_at_80x24(app) -> None:  # type: ignore[no-untyped-def]
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = home(app).query_one(DataTable)
        keys = [str(k.value) for k in table.columns]
        assert "model" not in keys and "source" not in keys
        assert keys[:2] == ["id", "state"]
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= 80


async def test_help_lists_this_screens_keys_and_filters(app) -> None:  # type: ignore[no-untyped-def]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one(DataTable)
        texts = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert any("Filter rows" in t for t in texts)
        assert not any("Undo the last dedupe or resume of this job" in t for t in texts)  # the audit's key
        await pilot.press(*"sort")
        texts = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert texts and all("sort" in t.lower() for t in texts)
        await pilot.press("escape")
        assert isinstance(app.screen, ExperimentsScreen)


async def test_palette_commands_follow_the_screen(app) -> None:  # type: ignore[no-untyped-def]
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
        # ctrl+p opens the palette (`:` the command line); a command from it runs
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"audit dev_set")
        results = app.screen.query_one(CommandList)
        for _ in range(50):  # the palette searches in the background
            if results.option_count:
                break
            await pilot.pause(0.05)
        await pilot.press("down", "enter")
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


async def test_a_failing_scan_is_a_notice_and_a_log_entry(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    from services.harbor.source import HarborSource

    good = HarborSource(shared_demo(tmp_path_factory), label="demo")
    app = make_demo_app(tmp_path, tmp_path, sources=[BrokenSource(), good])  # type: ignore[list-item]
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


def test_one_registry_feeds_every_binding() -> None:
    from collections import Counter

    from textual.binding import Binding

    from tui.actions import ACTIONS, GLOBAL, bindings_for
    from tui.app import EvaldeskApp
    from tui.screens.audit import AuditScreen as Audit
    from tui.screens.confirm import ConfirmScreen
    from tui.screens.help import HelpScreen as Help
    from tui.screens.log import LogScreen as Log

    global_keys = {a.key for a in ACTIONS if a.screen == GLOBAL}
    for scope in {a.screen for a in ACTIONS}:
        keys = [a.key for a in ACTIONS if a.screen == scope]
        assert not [k for k, n in Counter(keys).items() if n > 1], f"{scope}: a key bound twice"
        if scope != GLOBAL:
            assert not set(keys) & global_keys, f"{scope} hides a key that works everywhere"
    owners: list[tuple[Any, str]] = [
        (EvaldeskApp, GLOBAL), (ExperimentsScreen, "experiments"), (Audit, "audit"),
        (ConfirmScreen, "confirm"), (Help, "help"), (Log, "log"),
    ]
    for owner, scope in owners:
        bindings = [b for b in owner.BINDINGS if isinstance(b, Binding)]
        assert bindings == bindings_for(scope)
        # ids let a keymap remap any key; descriptions feed the footer, help and palette
        assert all(b.id and b.description for b in bindings)


async def test_header_shows_sources_refresh_time_and_read_only(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    from tui.chrome import ConsoleHeader

    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = app.screen.query_one(ConsoleHeader).render().plain
        assert "demo" in text and "read 18:05:00" in text and "READ-ONLY" in text


class GatedSource:
    """A source whose scan reports progress from a thread, then waits to be released."""

    kind = "harbor"
    label = "gated"

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.release = threading.Event()

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        def work() -> None:
            assert progress is not None
            progress(0, 100_000, "listing trial dirs")
            time.sleep(0.15)  # past the throttle
            progress(50_000, 100_000, "reading trials")
            self.release.wait(10)

        await asyncio.to_thread(work)
        snap: Snapshot = await self.inner.scan(None)  # type: ignore[attr-defined]
        return snap

    def fs(self) -> object:
        return self.inner.fs()  # type: ignore[attr-defined]

    async def close(self) -> None:
        return None


async def test_scan_progress_shows_in_the_header_and_the_table_stays_usable(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    from services.harbor.source import HarborSource
    from tui.chrome import ConsoleHeader

    gated = GatedSource(HarborSource(shared_demo(tmp_path_factory), label="gated"))
    app = make_demo_app(tmp_path, tmp_path, sources=[gated])  # type: ignore[list-item]
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            header = app.screen.query_one(ConsoleHeader)
            for _ in range(40):
                await pilot.pause(0.05)
                if "50,000/100,000" in header.render().plain:
                    break
            assert "scanning gated 50,000/100,000 50%" in header.render().plain
            await pilot.press("s", "S", "slash")  # keys still work while the scan runs
            screen = home(app)
            assert screen.sort_col == "source" and screen.sort_reverse  # age wraps round to source
            await pilot.press("escape")
            gated.release.set()
            await settle(pilot)
            assert len(screen.shown) == 6
            assert "scanning" not in header.render().plain and "read 18:05:00" in header.render().plain
    finally:
        gated.release.set()


async def test_keys_from_the_config_remap_a_binding(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    from services.core.config import Config
    from services.harbor.source import HarborSource
    from tests.support.ui_demo import FIXED_NOW, shared_demo
    from tui.app import EvaldeskApp

    config = Config(keys={"experiments.audit": "A", "no.such.binding": "z"})
    src = HarborSource(shared_demo(tmp_path_factory), config.policy, label="demo")
    app = EvaldeskApp([src], config, now=FIXED_NOW, poll=False, cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("a")  # the old key no longer audits
        await settle(pilot)
        assert type(app.screen).__name__ == "ExperimentsScreen"
        await pilot.press("A")
        await settle(pilot)
        assert type(app.screen).__name__ == "AuditScreen"
        assert any("no.such.binding" in e.message for e in app.event_log)
