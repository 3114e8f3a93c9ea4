"""What a screen may read of the console, as a typed Protocol, and the one way to get it.

Screens never import the App: they read through `ConsoleState` and ask for anything that
changes state (open a view, plan or run a write, clear the log) by posting a message from
`tui.messages`, which the App handles. A screen can so be read, and tested, without the
whole App.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, cast

from textual.dom import DOMNode

from services.core.models import AuditReport, Experiment
from services.core.policy import Policy
from services.core.source import Source
from services.monitor.state import MonitorState


@dataclass
class LogEntry:
    """One line of the console's log of errors and notices (`L`)."""

    at: datetime
    level: str  # error | warning | information
    where: str
    message: str
    detail: str = ""


@dataclass
class CommandRun:
    """A command a write ran or runs for one experiment (a resume, a re-run): what, where, its
    output so far, and how it ended."""

    key: str
    action: str
    command: str  # as a person would type it
    host: str | None
    started_at: datetime
    state: str = "running"  # running | done | failed | refused
    output: list[tuple[str, str]] = field(default_factory=list)  # (stream, text) chunks, the newest kept
    received: int = 0  # chunks ever received (output drops the oldest)
    exit_code: int | None = None
    slurm_job_id: str | None = None
    record: str | None = None
    message: str = ""

    @property
    def running(self) -> bool:
        return self.state == "running"


class ConsoleState(Protocol):
    read_only: bool
    paused: bool
    cursor_blink: bool
    policy: Policy
    monitor: MonitorState
    sources: list[Source]
    scan_state: dict[str, tuple[int, int | None]]
    last_refresh: datetime | None
    poll_failures: dict[str, tuple[int, str]]
    next_poll_in: dict[str, float]
    error_count: int
    event_log: list[LogEntry]
    command_runs: dict[str, CommandRun]

    def now(self) -> datetime: ...

    def experiment(self, key: str) -> Experiment | None: ...

    def audit(self, key: str) -> AuditReport | None: ...

    def experiments(self) -> list[Experiment]: ...

    def source_for(self, key: str) -> Source: ...

    def write_refusal(self, action: str) -> str | None: ...


def console(node: DOMNode) -> ConsoleState:
    """The console state of the app a widget or screen is mounted in."""
    return cast(ConsoleState, node.app)
