"""`d` on the list (as k9s's describe): every field of the selected row, whole, in a popup, so
nothing a column cuts is out of reach. Read-only; esc, q or d closes."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from services.core.census import census_words
from services.core.models import AuditReport, Experiment
from services.core.plain import dump
from services.core.text import term_safe
from tui.actions import bindings_for


def describe_fields(exp: Experiment, report: AuditReport | None) -> list[tuple[str, str]]:
    """(name, value) for every field of the experiment and its audit, values escaped."""
    rows: list[tuple[str, str]] = [("key", f"{exp.source_label}::{exp.id}")]
    data = dump(exp, json=True)
    counts = data.pop("counts", {})
    data.pop("verified_at", None)  # the reader's own bookkeeping: the header says how old the read is
    for name, value in data.items():
        rows.append((name, _text(value)))
    rows.append(("census", census_words(exp.counts)))
    for name, value in counts.items():
        rows.append((f"counts.{name}", _text(value)))
    if report is not None:
        rows.append(("verdict", report.verdict))
        for c in report.checks:
            rows.append((f"check {c.id}", f"{c.status.value}: {c.evidence}" + (f" → {c.action}" if c.action else "")))
        for n in report.notes:
            rows.append(("note", n))
    return [(k, term_safe(v)) for k, v in rows]


def audit_fields(app: Any, keys: list[str]) -> list[tuple[str, str]]:
    """The audit of several runs in one view: each run's verdict, then its checks that fail or warn."""
    rows: list[tuple[str, str]] = []
    for key in keys:
        exp, report = app.experiment(key), app.audit(key)
        if exp is None:
            continue
        verdict = report.verdict.upper() if report is not None else "…"
        rows.append((verdict, f"{exp.id} · {census_words(exp.counts)}"))
        for c in report.checks if report is not None else []:
            if c.status.value in ("fail", "warn"):
                action = f" → {c.action}" if c.action else ""
                rows.append((f"  {c.status.value}", f"{c.title}: {c.evidence}{action}"))
    return [(k, term_safe(v)) for k, v in rows]


def _text(value: Any) -> str:
    if value is None or value == {} or value == []:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(map(str, value))
    return str(value)


class DescribeScreen(ModalScreen[None]):
    SCREEN_ID = "describe"
    BINDINGS = bindings_for("describe")
    CSS_PATH = "describe.tcss"

    def __init__(self, title: str, fields: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.fields = fields

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 1))
        longest = max((len(n) for n, _ in self.fields), default=8)
        table.add_column(style="bold", no_wrap=True, max_width=min(24, longest))
        table.add_column(overflow="fold")
        for name, value in self.fields:
            table.add_row(Text(name), Text(value))
        with VerticalScroll(id="describe") as box:
            box.border_title = term_safe(self.title_text)
            box.border_subtitle = "esc closes · ↑↓ pgup pgdn scroll"
            yield Static(table, id="describe-fields")

    def on_mount(self) -> None:
        self.query_one("#describe", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll(self, move: str) -> None:
        getattr(self.query_one("#describe", VerticalScroll), f"scroll_{move}")(animate=False)
