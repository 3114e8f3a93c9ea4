"""Why one trial failed, in one panel: exception, traceback, what it does to the score, the
verifier's last words, and how many other trials failed the same way.

The panel only renders a `DiagnoseInfo`; reading files and deciding the score effect are the
caller's business, so the same panel serves any source.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from rich.console import Console, Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from services.core.text import term_safe


@dataclass
class DiagnoseInfo:
    title: str
    status: str
    reward: str = "—"
    exception_type: str | None = None
    exception_message: str | None = None
    traceback: str | None = None
    failure_class: str | None = None
    meaning: str | None = None
    score_note: str = ""
    verifier_label: str = "verifier output"
    verifier_excerpt: str | None = None
    same_count: int = 0
    same_label: str = ""
    same_key: str = "f"
    problems: list[str] = field(default_factory=list)


def _section(title: str) -> Text:
    return Text(f"\n{title}", style="bold underline")


def _safe(text: str | None) -> str:
    # messages, tracebacks and verifier output are the trial's own words: lines kept, colours
    # dropped, any other control shown as an escape
    return term_safe((text or "").replace("\r\n", "\n"), keep_newlines=True, drop_sequences=True)


def render_info(info: DiagnoseInfo) -> RenderableType:
    parts: list[RenderableType] = []
    head = Text()
    head.append(term_safe(info.title), style="bold")
    head.append(f"  {info.status}", style="red" if info.status == "errored" else (
        "green" if info.status == "valid" else "yellow"))
    head.append(f"  reward {info.reward}")
    parts.append(head)
    if info.exception_type:
        exc = Text()
        exc.append(term_safe(info.exception_type), style="bold red")
        if info.exception_message:
            exc.append(f": {_safe(info.exception_message)}")
        parts.append(exc)
    if info.failure_class:
        cls = Text()
        cls.append("class ", style="dim")
        cls.append(term_safe(info.failure_class), style="bold")
        if info.meaning:
            cls.append(f" — {term_safe(info.meaning)}", style="dim")
        parts.append(cls)
    if info.score_note:
        parts.append(Text.assemble(("score ", "dim"), (term_safe(info.score_note), "italic")))
    if info.same_label:
        same = Text()
        if info.same_count:
            same.append(f"{info.same_count:,} other trial{'s' if info.same_count != 1 else ''} ",
                        style="bold")
            same.append(f"{term_safe(info.same_label)} — press ")
            same.append(info.same_key, style="bold reverse")
            same.append(" to list them")
        else:
            same.append(f"no other trial {term_safe(info.same_label)}", style="dim")
        parts.append(same)
    if info.traceback:
        parts.append(_section("traceback"))
        lines = _safe(info.traceback.rstrip("\n")).split("\n")
        if len(lines) > 40:
            lines = ["…", *lines[-40:]]
        parts.append(Text("\n".join(lines), style="dim", no_wrap=False))
    if info.verifier_excerpt is not None:
        parts.append(_section(term_safe(info.verifier_label)))
        parts.append(Text(_safe(info.verifier_excerpt.rstrip("\n")) or "(empty)", style="dim"))
    for problem in info.problems:
        parts.append(Text(term_safe(problem), style="yellow"))
    return Group(*parts)


class DiagnosePanel(VerticalScroll, can_focus=True):
    DEFAULT_CSS = """
    DiagnosePanel { background: $surface; padding: 0 1; scrollbar-size-vertical: 1; }
    DiagnosePanel > Static { width: 1fr; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.info: DiagnoseInfo | None = None
        self._body = Static(Text("select a trial", style="dim"))

    def compose(self) -> ComposeResult:
        yield self._body

    def show(self, info: DiagnoseInfo | None, placeholder: str = "select a trial") -> None:
        self.info = info
        self._body.update(render_info(info) if info is not None else Text(placeholder, style="dim"))
        self.scroll_home(animate=False)

    @property
    def text(self) -> str:
        """Plain text of what the panel shows (for tests)."""
        if self.info is None:
            return ""
        console = Console(width=200, file=io.StringIO())
        with console.capture() as capture:
            console.print(render_info(self.info))
        return capture.get()
