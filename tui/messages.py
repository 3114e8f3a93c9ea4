"""Messages between the App (which owns sources, scans and writes) and the screens."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from services.core.models import Snapshot


class SnapshotUpdated(Message):
    """A source finished a scan; the App posts this to every screen in its stack."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class ScanProgress(Message):
    """Progress of one source's scan, throttled by the App before it is posted."""

    def __init__(self, label: str, done: int, total: int | None, message: str) -> None:
        super().__init__()
        self.label = label
        self.done = done
        self.total = total
        self.message = message


class ScanFinished(Message):
    """A scan worker's result: the snapshot and the audits computed off the event loop."""

    def __init__(self, label: str, snapshot: Snapshot, audits: dict[str, object], seconds: float,
                 activity: dict[str, Any] | None = None, warnings: list[Any] | None = None) -> None:
        super().__init__()
        self.label = label
        self.snapshot = snapshot
        self.audits = audits
        self.seconds = seconds
        # experiment key -> trial path -> services.monitor.state.Activity (running trials' logs)
        self.activity = activity or {}
        # services.monitor.state.MonitorWarning that started to hold on this scan (fed off the loop)
        self.warnings = warnings or []


class ChromeChanged(Message):
    """Sources, refresh time, scan progress or read-only state changed: headers redraw."""


class PlanReady(Message):
    """A dry run is ready for the confirmation dialog (`payload` depends on `action`)."""

    def __init__(self, action: str, key: str, payload: object) -> None:
        super().__init__()
        self.action = action
        self.key = key
        self.payload = payload


class WriteDone(Message):
    """A confirmed write finished; `summary` says what it changed."""

    def __init__(self, action: str, key: str, summary: str, rescan: bool = True) -> None:
        super().__init__()
        self.action = action
        self.key = key
        self.summary = summary
        self.rescan = rescan


class PollingChanged(Message):
    """Polling was paused or resumed, or a source started or stopped failing."""


class OpenView(Message):
    """A screen asks the App to open a view (`trials`, `audit`, `monitor`, `log`) of experiments."""

    def __init__(self, view: str, keys: list[str]) -> None:
        super().__init__()
        self.view = view
        self.keys = keys


class RequestPlan(Message):
    """A screen asks the App for the dry run of a write (`dedupe`, `undo-dedupe`, …) on one
    experiment; the App answers with the confirmation dialog. `options` narrow what the write
    does (a resume's exception types or trial paths)."""

    def __init__(self, action: str, key: str, options: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.action = action
        self.key = key
        self.options = options or {}


class CommandOutput(Message, bubble=False):
    """Output of a command a write runs (a resume, a re-run), as it arrives; the App keeps it
    and forwards it to the screens (a copy that must not bubble back to it)."""

    def __init__(self, key: str, stream: str, text: str) -> None:
        super().__init__()
        self.key = key
        self.stream = stream
        self.text = text


class CommandChanged(Message, bubble=False):
    """A command run of one experiment started or ended; screens showing it redraw."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class InputsNeeded(Message):
    """A write needs values from a person before it can be planned (`fields`: InputField)."""

    def __init__(self, action: str, key: str, fields: list[Any]) -> None:
        super().__init__()
        self.action = action
        self.key = key
        self.fields = fields


class Notice(Message):
    """A screen has something for the log of errors and notices (and a toast when `notify`)."""

    def __init__(self, level: str, where: str, message: str, notify: bool = True) -> None:
        super().__init__()
        self.level = level
        self.where = where
        self.message = message
        self.notify = notify


class ClearLog(Message):
    """The log of errors and notices is to be emptied."""


class HandOver(Message):
    """A screen asks the App to give the terminal to a pager, an editor or a shell at `path`
    (a file, or a dir for a shell) of the experiment `key`'s source, here or on its host."""

    def __init__(self, kind: str, key: str, path: str) -> None:
        super().__init__()
        self.kind = kind
        self.key = key
        self.path = path
class RequestReport(Message):
    """A screen asks the App to write the report of experiments (one, or several compared)."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__()
        self.keys = keys


class ReportWritten(Message):
    """A report file was written: where, and the lines that sum it up."""

    def __init__(self, path: str, lines: list[str]) -> None:
        super().__init__()
        self.path = path
        self.lines = lines
