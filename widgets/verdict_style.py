"""The colour of a verdict, the same on every screen: it follows what the verdict asks of a
person (services.audit.verdict.VERDICT_KIND). The word itself always carries the meaning."""

from __future__ import annotations

from services.audit.verdict import VerdictKind, verdict_kind

KIND_STYLES: dict[VerdictKind, str] = {
    "done": "green",
    "wait": "blue",
    "act": "yellow",
    "look": "bold red",
    "input": "magenta",
}


def verdict_style(verdict: str, *, bold: bool = False) -> str:
    """The Rich style of `verdict`."""
    style = KIND_STYLES[verdict_kind(verdict)]
    return f"bold {style.removeprefix('bold ')}" if bold else style
