"""One census per experiment, on every surface: the trials header, the audit screen, the
monitor, the report, `--batch list` and `--batch audit` render the same runs, and every one of
them says the same valid, expected, errored, invalid errors and score (DESIGN's words); and the
list, the audit screen and the report show the same verdict in the same colour."""

from __future__ import annotations

import asyncio
import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.widgets import Static

from services.audit.verdict import verdict_kind
from services.core.models import Experiment, experiment_key
from services.core.policy import Policy
from services.monitor.state import MonitorState
from services.report.output import render, report_for
from tests.support.ui_demo import FIXED_NOW, make_demo_app, settle, shared_demo
from tests.tui.test_batch_cli import run_main
from tui.screens.audit import AuditScreen
from tui.screens.experiments import ExperimentsScreen
from tui.screens.monitor import figures_text
from tui.screens.trials import TrialsScreen
from widgets.verdict_style import KIND_STYLES

Figures = tuple[int, int | None, int, int, float | None]  # valid, expected, errored, invalid errors, score
Shown = tuple[str, str]  # a verdict's word and what its colour says it asks of a person


def _int(s: str) -> int | None:
    return None if s == "?" else int(s.replace(",", ""))


def parse(text: str) -> Figures:
    """The five figures out of a line in the census's words."""
    valid = re.search(r"([\d,]+) valid of ([\d,?]+) expected", text)
    errored = re.search(r"([\d,]+) errored", text)
    invalid = re.search(r"([\d,]+) invalid errors?", text)
    score = re.search(r"score\s+([\d.]+|—)", text)
    assert valid and errored and invalid and score, text
    return (int(valid.group(1).replace(",", "")), _int(valid.group(2)), int(errored.group(1).replace(",", "")),
            int(invalid.group(1).replace(",", "")),
            None if score.group(1) == "—" else round(float(score.group(1)), 3))


def own(exp: Experiment) -> Figures:
    c = exp.counts
    return c.valid, c.expected, c.errored, c.invalid_errors, None if exp.score is None else round(exp.score, 3)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_demo(tmp_path_factory)


def test_every_surface_says_the_same_figures(jobs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, dict[str, Figures]] = {}
    listed: dict[str, tuple[int, int | None, float | None]] = {}
    verdicts: dict[str, dict[str, Shown]] = {}
    exps = asyncio.run(_screens(jobs, tmp_path, seen, listed, verdicts))
    _others(jobs, exps, seen, capsys)
    html = render(report_for(exps, Policy(), FIXED_NOW), "html")
    for run in html.split('<section class="run"')[1:]:
        exp_id = re.search(r'data-experiment="([^"]*)"', run)
        shown = re.search(r'<span class="verdict (\w+)" data-verdict="(\w+)">', run)
        assert exp_id and shown, run[:200]
        verdicts[unescape(exp_id.group(1))]["report"] = (shown.group(2), shown.group(1))
    words = set()
    for exp_id, shown in verdicts.items():
        assert sorted(shown) == ["audit screen", "list", "report"], (exp_id, shown)
        assert len(set(shown.values())) == 1, (exp_id, shown)
        word, kind = shown["list"]
        assert kind == verdict_kind(word), (exp_id, shown)
        words.add(word)
    # these runs hold verdicts of four kinds (input is the AISBench task's, tests/widgets)
    assert {verdict_kind(w) for w in words} >= {"done", "wait", "act", "look"}, words
    for exp_id, surfaces in seen.items():
        assert len(surfaces) == 7, (exp_id, sorted(surfaces))
        assert len(set(surfaces.values())) == 1, (exp_id, surfaces)
        valid, expected, _, _, score = surfaces["files"]
        assert listed[exp_id] == (valid, expected, score), exp_id


def _kind(style: str) -> str:
    by_style = {v.removeprefix("bold "): k for k, v in KIND_STYLES.items()}
    return by_style.get(style.removeprefix("bold "), f"no colour ({style!r})")


async def _screens(jobs: Path, tmp_path: Path, seen: dict[str, dict[str, Figures]],
                   listed: dict[str, tuple[int, int | None, float | None]],
                   verdicts: dict[str, dict[str, Shown]]) -> list[Experiment]:
    """What the trials header and the audit screen say, as a person opens them."""
    app = make_demo_app(jobs, tmp_path)
    exps: list[Experiment] = []
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        exps = [e for e in app.experiments() if e.stale_since is None]
        assert len(exps) >= 6
        home = app.screen
        assert isinstance(home, ExperimentsScreen)
        for row in home.shown:
            # the list's own cells: valid/expected and the score (its error column is the gate's fraction)
            progress = row.cell_text("progress", False, 40).plain.split()[0]
            score = row.cell_text("score", False, 40).plain
            valid, expected = progress.split("/")
            listed[row.exp.id] = (int(valid), _int(expected), None if score == "—" else round(float(score), 3))
            cell = row.cell_text("verdict", False, 40)
            verdicts[row.exp.id] = {"list": (cell.plain, _kind(str(cell.style)))}
        for exp in exps:
            key = experiment_key(exp)
            surfaces = seen.setdefault(exp.id, {"files": own(exp)})
            app.open_trials(key)
            await settle(pilot, 2)
            assert isinstance(app.screen, TrialsScreen)
            surfaces["trials header"] = parse(str(app.screen.query_one("#trials-title", Static).render()))
            app.open_audit(key)
            await settle(pilot, 2)
            assert isinstance(app.screen, AuditScreen)
            surfaces["audit screen"] = parse(str(app.screen.query_one("#audit-title", Static).render()))
            said = app.screen.query_one("#verdict", Static).content
            assert isinstance(said, Text)
            span = next(sp for sp in said.spans if sp.start == len("Verdict: "))
            verdicts[exp.id]["audit screen"] = (said.plain[span.start:span.end].lower(), _kind(str(span.style)))
            await pilot.press("escape")
            await pilot.press("escape")
            await settle(pilot, 1)
    return exps


def _others(jobs: Path, exps: list[Experiment], seen: dict[str, dict[str, Figures]],
            capsys: pytest.CaptureFixture[str]) -> None:
    # the monitor, fed the same experiments
    monitor = MonitorState(Policy(), [], clock=lambda: FIXED_NOW)
    for exp in exps:
        monitor.feed_experiment(exp)
        reading = monitor.reading(experiment_key(exp))
        assert reading is not None
        seen[exp.id]["monitor"] = parse(str(figures_text(reading)))
    # the report (its JSON, as the HTML page embeds it)
    report = json.loads(render(report_for(exps, Policy(), FIXED_NOW), "json"))
    for run in report["runs"]:
        k = run["kpis"]
        seen[run["id"]]["report"] = (k["valid"], k["expected"], k["errored"], k["invalid_errors"],
                                     None if k["score"] is None else round(k["score"], 3))
    # batch list and audit
    for cmd in ("list", "audit"):
        _, out, _ = run_main(capsys, "--batch", cmd, "--format", "json", str(jobs))
        for e in json.loads(out)["experiments"]:
            row: dict[str, Any] = e["trials"] if cmd == "audit" else e
            seen[e["id"]][f"batch {cmd}"] = (row["valid"], row["expected"], row["errored"], row["invalid_errors"],
                                             None if e["score"] is None else round(e["score"], 3))
