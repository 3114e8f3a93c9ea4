"""`:` as k9s has it, pressed as a person does: views by name and alias, tab completion, the
history, a source by name, an action by name, and an unknown name said so."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.ui_demo import make_demo_app, settle, shared_demo
from tui.actions import ACTIONS, VIEWS
from tui.commandline import CommandLine, command_name, commands, complete
from tui.screens.experiments import ExperimentsScreen
from tui.screens.trials import TrialsScreen


async def test_views_aliases_completion_and_history(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        home = app.screen
        assert isinstance(home, ExperimentsScreen)
        await pilot.press("colon", "t", "r", "tab")  # completes to the one view it begins
        line = app.screen.query_one(CommandLine)
        assert line.value == "trials"
        await pilot.press("enter")
        await settle(pilot, 4)
        assert isinstance(app.screen, TrialsScreen) and not app.screen.query(CommandLine)
        await pilot.press("colon", *"ls", "enter")  # an alias of :list
        await settle(pilot, 2)
        assert app.screen is home
        await pilot.press("colon", "up")  # the history, newest first
        assert app.screen.query_one(CommandLine).value == "ls"
        await pilot.press("up")
        assert app.screen.query_one(CommandLine).value == "trials"  # what ran, completed
        await pilot.press("escape")
        await settle(pilot, 2)
        assert not app.screen.query(CommandLine) and isinstance(app.focused, type(home.query_one("DataTable")))
        kept = Path(os.environ["XDG_STATE_HOME"]) / "evaldesk" / "commands.json"
        assert json.loads(kept.read_text())[-2:] == ["trials", "ls"]

        await pilot.press("colon", *"demo", "enter")  # a source by name: only its rows
        await settle(pilot, 2)
        assert home.filter.text == "demo" and len(home.shown) == len(home.rows)
        await pilot.press("escape")
        await pilot.press("colon", *"sort-next", "enter")  # an action of the screen by its name
        await settle(pilot, 2)
        assert home.sort_col != "age"
        before = len(app.event_log)
        await pilot.press("colon", *"dedupx", "enter")
        await settle(pilot, 2)
        assert "no command 'dedupx'" in app.event_log[before].message and "dedupe" in app.event_log[before].message


def test_every_action_and_view_is_a_command() -> None:
    from textual.app import App
    from textual.screen import Screen

    class Bare(Screen[None]):
        SCREEN_ID = "experiments"

    names = {c.name for c in commands(App(), Bare())}
    assert {v[0] for v in VIEWS} <= names
    expected = {command_name(a) for a in ACTIONS if a.screen in ("experiments", "global") and a.palette
                and a.action != "command_palette"}
    assert expected <= names and {"dedupe", "resume", "undo", "report", "journal", "monitor"} <= names
    assert complete("jo", commands(App(), Bare())) == "journal"
