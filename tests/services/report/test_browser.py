"""The report file in a real browser: headless Chromium (Debian's `chromium`) opens it from
disk with networking off, runs its script, and the DOM it dumps is what is asserted on — the
KPI cards carry exactly the audit's figures. A screenshot proves it renders.

`.ci/run` installs chromium; without it these tests skip, and with CI=true they fail.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.models import Experiment
from services.core.policy import Policy
from services.core.registry import open_sources, write_demo
from services.core.times import DEMO_NOW
from services.report.html import TASK_COLUMNS
from services.report.output import render, report_for, write_text_atomic

NOW = DEMO_NOW + timedelta(minutes=5)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        why = "chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return found


def browse(page: Path, tmp: Path, *args: str, fragment: str = "") -> subprocess.CompletedProcess[str]:
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-extensions", "--no-first-run", "--no-default-browser-check",
            f"--user-data-dir={tmp / 'profile'}", *args, page.as_uri() + fragment]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=90, cwd=tmp)
    assert p.returncode == 0, p.stderr[-2000:]
    return p


class DomReader(HTMLParser):
    """What the assertions need from the dumped DOM: KPI cards, row order, the root's marks."""

    def __init__(self) -> None:
        super().__init__()
        self.kpis: dict[tuple[str, str], dict[str, str]] = {}  # (experiment, kpi) -> attrs + text
        self.rows: dict[str, list[list[str]]] = {}  # table id -> each row's cells' data-sort, in order
        self.root: dict[str, str] = {}
        self._exp = ""
        self._table = ""
        self._kpi: tuple[str, str] | None = None
        self._in_value = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "html":
            self.root = a
        if tag == "section" and "data-experiment" in a:
            self._exp = a["data-experiment"]
        if tag == "table" and a.get("id"):
            self._table = a["id"]
            self.rows[self._table] = []
        if tag == "tr" and "data-task" in a and self._table:
            self.rows[self._table].append([])
        if tag == "td" and self._table and self.rows[self._table]:
            self.rows[self._table][-1].append(a.get("data-sort", ""))
        if tag == "div" and "data-kpi" in a:
            self._kpi = (self._exp, a["data-kpi"])
            self.kpis[self._kpi] = dict(a)
        if tag == "span" and self._kpi and a.get("class") == "value":
            self._in_value = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "span":
            self._in_value = False
        if tag == "table":
            self._table = ""

    def handle_data(self, data: str) -> None:
        if self._in_value and self._kpi:
            self.kpis[self._kpi]["text"] = self.kpis[self._kpi].get("text", "") + data


def _num(s: str) -> float | None:
    return float(s) if s else None


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> list[Experiment]:
    root = tmp_path_factory.mktemp("demo")
    write_demo(root, DEMO_NOW)
    exps: list[Experiment] = []
    for src in open_sources(str(root), Config()):
        exps += asyncio.run(src.scan()).experiments
    return exps


def test_every_demo_experiments_report_opens_and_its_kpis_are_the_audits(
        demo: list[Experiment], tmp_path: Path) -> None:
    policy = Policy()
    page = write_text_atomic(tmp_path / "demo.html", render(report_for(demo, policy, NOW), "html", policy))
    dom = DomReader()
    dom.feed(browse(page, tmp_path, "--dump-dom", "--virtual-time-budget=2000").stdout)
    assert dom.root.get("data-ready") == "1"  # the page's own script ran
    assert {e.source for e in demo} == {"harbor", "rock", "aisbench", "csbench"} and len(demo) == 15
    for exp in demo:
        audit = audit_experiment(exp, policy, NOW)

        def card(k: str, exp_id: str = exp.id) -> dict[str, str]:
            return dom.kpis[(exp_id, k)]

        assert _num(card("score")["data-value"]) == audit.score, exp.id
        assert card("score")["text"] == ("—" if audit.score is None else f"{audit.score:.3f}")
        assert int(card("valid")["data-value"]) == audit.trials["valid"]
        expected = audit.trials["expected"]
        assert card("valid")["data-expected"] == ("" if expected is None else str(expected))
        assert card("valid")["text"] == f"{audit.trials['valid']}/{'?' if expected is None else expected}"
        assert _num(card("errors")["data-value"]) == audit.error_fraction
        ef = audit.error_fraction
        assert card("errors")["text"] == ("—" if ef is None else f"{100 * ef:.1f}%")
        assert {k for (e, k) in dom.kpis if e == exp.id} == {"score", "valid", "errors", "tokens", "cost", "duration"}


def test_a_screenshot_of_a_report_and_a_sorted_comparison(demo: list[Experiment], tmp_path: Path) -> None:
    policy = Policy()
    by_id = {e.id: e for e in demo}
    rock = write_text_atomic(tmp_path / "rock.html", render(report_for([by_id["exp-7f3a9c21"]], policy, NOW), "html"))
    shot = tmp_path / "rock.png"
    browse(rock, tmp_path, f"--screenshot={shot}", "--window-size=1280,1600", "--hide-scrollbars")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30_000  # a page with cards, charts and tables
    tb2 = [e for e in demo if e.id.startswith("terminal_bench_2_laion-")][:2]
    page = write_text_atomic(tmp_path / "cmp.html", render(report_for(tb2, policy, NOW), "html"))
    dom = DomReader()
    dom.feed(browse(page, tmp_path, "--dump-dom", "--virtual-time-budget=2000",
                    fragment="#sort=tasks-0:outcome:desc").stdout)
    # the #sort fragment made the page's script sort the task table by outcome, descending
    col = [k for k, _, _ in TASK_COLUMNS].index("outcome")
    outcomes = [float(cells[col]) for cells in dom.rows["tasks-0"]]
    assert len(outcomes) == 89 and outcomes == sorted(outcomes, reverse=True) and outcomes[0] > outcomes[-1]
    # the comparison's per-task deltas: largest change first, as rendered
    deltas = [abs(float(cells[-1])) for cells in dom.rows["deltas"]]
    assert len(deltas) == 89 and deltas == sorted(deltas, reverse=True)
