"""`R` writes the report of an experiment and shows where; `o` opens it with the system
opener; the audit shows the `alignment` row of a run with a baseline; baselines come from the
config dir, never the current directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from services.core.xdg import default_baselines_dir
from services.report.output import reports_dir
from tui.screens.audit import AuditScreen
from tui.screens.experiments import ExperimentsScreen
from tui.screens.report import ReportScreen
from widgets.checklist import Checklist

try:
    from ui_demo import (
        OPENTHINKER_KEY,
        make_demo_app,
        make_full_demo_app,
        settle,
        shared_demo,
        shared_full_demo,
        wait_for,
    )
except ImportError:  # collected as a package
    from tests.support.ui_demo import (
        OPENTHINKER_KEY,
        make_demo_app,
        make_full_demo_app,
        settle,
        shared_demo,
        shared_full_demo,
        wait_for,
    )

SIZE = (120, 40)
OPENER = """#!/bin/sh
printf '%s\\n' "$@" > "$OPENED_LOG"
"""


def fake_opener(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real `xdg-open` first on PATH that writes down what it was asked to open."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opener = bin_dir / "xdg-open"
    opener.write_text(OPENER)
    opener.chmod(0o755)
    log = tmp_path / "opened.txt"
    monkeypatch.setenv("OPENED_LOG", str(log))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return log


async def select_row(pilot: Any, key: str) -> ExperimentsScreen:
    screen = pilot.app.screen
    assert isinstance(screen, ExperimentsScreen)
    row = [r.key for r in screen.shown].index(key)
    screen.query_one("#experiments").move_cursor(row=row)
    await pilot.pause()
    return screen


async def test_R_writes_the_report_shows_its_path_and_o_opens_it(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    opened = fake_opener(tmp_path, monkeypatch)
    app = make_full_demo_app(shared_full_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_row(pilot, OPENTHINKER_KEY)
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen))
        screen = app.screen
        assert isinstance(screen, ReportScreen)
        path = Path(screen.path)
        assert path.parent == reports_dir() and path.suffix == ".html" and path.exists()
        assert str(screen.query_one("#report-path", Static).render()) == str(path)
        summary = str(screen.query_one("#report-summary", Static).render())
        # a failing alignment is never finalized: a person aligns the config
        assert "OpenThinker-Agent-8B_2026-11-19__12-00-00: score 0.420 · 264 valid of 267 expected · 3 errored · " \
               "3 invalid errors · error gate 1.1% · verdict INVESTIGATE" in summary
        assert "alignment (fail): actual 0.416" in summary
        assert "o opens it (xdg-open)" in str(screen.query_one("#report-hint", Static).render())
        assert 'data-kpi="score" data-value="0.42' in path.read_text()
        await pilot.press("o")
        await wait_for(pilot, lambda: opened.exists() and opened.read_text().strip() != "")
        assert opened.read_text().splitlines() == [str(path)]
        await pilot.press("escape")
        assert isinstance(app.screen, ExperimentsScreen)
        # R on the audit screen too, and q closes the dialog
        app.open_audit(OPENTHINKER_KEY)
        await pilot.pause()
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen))
        await pilot.press("q")
        assert isinstance(app.screen, AuditScreen)
        assert [e.message for e in app.event_log if e.where == "report"][:1] == [f"report written: {path}"]


async def test_o_without_a_system_opener_says_where_the_file_is(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen))
        screen = app.screen
        assert isinstance(screen, ReportScreen)
        assert "No system opener (xdg-open)" in str(screen.query_one("#report-hint", Static).render())
        await pilot.press("o")
        await pilot.pause()
        assert app.event_log[-1].message == f"No system opener (xdg-open) here; the report is at {screen.path}"


async def test_the_audit_shows_alignment_for_the_run_with_a_baseline(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    app = make_full_demo_app(shared_full_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_audit(OPENTHINKER_KEY)
        await pilot.pause()
        items = {i.id: i for i in app.screen.query_one(Checklist).items}
        al = items["alignment"]
        assert al.status == "fail" and al.title == "Aligned with the baseline"
        assert "vs expected 0.487 (per-task expectations of baseline terminal_bench_2-openthinker-agent-8b)" \
            in al.evidence
        assert "config drift: timeout_multiplier 2 → 1" in al.evidence and "top gaps: " in al.evidence
        # another model's run of the same benchmark: the baseline does not apply, no row
        other = app.audit("demo::terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00")
        assert other is not None and "alignment" not in [c.id for c in other.checks]


async def test_baselines_come_from_the_config_dir_never_the_current_directory(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "cwd"
    (here / "baselines").mkdir(parents=True)
    (here / "baselines" / "all.json").write_text(json.dumps({"pass_rate": 0.99}))
    monkeypatch.chdir(here)
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    assert app.baselines == [] and app.audit_context is None
    folder = default_baselines_dir()
    folder.mkdir(parents=True)
    (folder / "dev_set_v2-ref.json").write_text(json.dumps({"benchmark": "dev_set_v2", "pass_rate": 0.3}))
    (folder / "broken.json").write_text("{")
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    assert [b.name for b in app.baselines] == ["dev_set_v2-ref"]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert any("baseline" in e.message and "broken.json: not valid JSON" in e.message for e in app.event_log)
        report = app.audit("demo::dev_set_v2_gpt-5-mini_2026-11-19__08-30-00")
        assert report is not None and report.check("alignment").status.value in ("pass", "warn", "fail")


# ---- snapshots --------------------------------------------------------------------------------

async def _at_report(pilot: Any) -> None:
    app = pilot.app
    await settle(pilot)
    await select_row(pilot, OPENTHINKER_KEY)
    # a toast (the demo's running job breaks rule d) stays on the screen under the dialog: clear it first
    app.clear_notifications()
    await pilot.pause()
    await pilot.press("R")
    await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen))
    app.clear_notifications()
    await pilot.pause()


async def _at_alignment(pilot: Any) -> None:
    app = pilot.app
    await settle(pilot)
    app.open_audit(OPENTHINKER_KEY)
    await pilot.pause()
    checklist = app.screen.query_one(Checklist)
    checklist.highlighted = [i.id for i in checklist.items].index("alignment")
    app.clear_notifications()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", ["report", "alignment"])
def test_snapshot(view: str, size: tuple[int, int], snap_compare: Any, tmp_path: Path,
                  tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # the report's path is on screen: a fixed data dir keeps it the same on every run
    monkeypatch.setenv("XDG_DATA_HOME", "/tmp/evaldesk-snapshot-data")
    fake_opener(tmp_path, monkeypatch)
    app = make_full_demo_app(shared_full_demo(tmp_path_factory), tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=_at_report if view == "report" else _at_alignment)
