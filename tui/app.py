"""The evaldesk console: sources, scans, writes and the screen stack.

The App owns every piece of state. Workers do all IO (scans, plans, writes) and only post
messages; `@on` handlers here turn those into state and forward snapshots to the screens.
One `Worker.StateChanged` handler turns any worker failure into a notice and a log entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from textual import on
from textual.app import App
from textual.notifications import Notifications, Notify
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from services.core.config import Config
from services.core.memory import give_back_memory, one_heap_arena
from services.core.models import AuditReport, Experiment, Snapshot, experiment_key
from services.core.policy import Policy
from services.core.source import Source, SourceUnavailable
from services.core.text import term_safe
from services.core.xdg import data_dir
from services.monitor.activity import probe_snapshot
from services.monitor.state import MonitorState
from services.remediations.base import WritePath
from services.remediations.errors import LockHeld, StepFailed, WriteRefused
from services.remediations.records import Plan, Record
from tui.actions import GLOBAL, bindings_for
from tui.command_runs import close_run, command_of
from tui.context import CommandRun, LogEntry
from tui.leaderboard_poll import AuditsRefreshed, LeaderboardRead
from tui.marked import MarkedPlans
from tui.messages import (
    ChromeChanged,
    ClearLog,
    CommandChanged,
    CommandOutput,
    HandOver,
    InputsNeeded,
    Notice,
    OpenView,
    PlanReady,
    PollingChanged,
    ReportWritten,
    RequestPlan,
    RequestReport,
    ScanFinished,
    ScanProgress,
    SnapshotUpdated,
    WriteDone,
)
from tui.palette import EvaldeskCommands
from tui.wording import source_problem
from tui.write_recovery import RecoveryFlow, guarded
from widgets.ids import shorten
from widgets.notice_line import NoticeLine

DEMO_LABEL = "demo"
TRIM_MIN_TRIALS = 20_000


def _trials_counted(exp: Experiment) -> int:
    # from the census: asking for len(exp.trials) would read lazily kept trials on the UI thread
    c = exp.counts
    return c.total + c.running + c.copies
LOG_LIMIT = 500
OUTPUT_LIMIT = 4000  # chunks of a command's output kept for its log view
COMMAND_RESCAN_S = 2.0  # while a command runs, its source is read at most this often


@dataclass
class ScanStopped(Exception):
    """Raised inside a scan thread when the console is closing."""


@dataclass
class UndoRequest:
    """An undo the user was shown: the record, what undo would do, and what blocks it."""

    record: Record
    lines: list[str]
    blocked: list[str]


@dataclass
class PendingWrite:
    """A write the user was asked to confirm; kept so the dialog's answer finds it."""

    action: str
    key: str
    payload: Any = None
    lines: list[str] = field(default_factory=list)


def demo_sources(config: Config, root: Path | None = None) -> list[Source]:
    """The bundled demo data, written on first use so a first run shows something real."""
    from services.core.registry import demo_sources as opened
    from services.core.registry import write_demo

    root = root or data_dir() / "demo"
    if not demo_written(root):
        # dated now, so the running job in the demo looks live on the monitor
        write_demo(root, now=datetime.now(UTC))
    return opened(config, root, DEMO_LABEL)


def demo_written(root: Path | None = None) -> bool:
    root = root or data_dir() / "demo"
    return root.is_dir() and any(root.iterdir())


def read_only_without_data() -> str:
    """What to do when --read-only has nothing to open: the demo would have to be written."""
    where = data_dir() / "demo"
    return (
        "evaldesk: nothing to open: no SOURCE given, none in the config, and the demo data is not on disk yet; "
        f"--read-only does not write it to {term_safe(where)}.\n"
        "evaldesk: open a job dir or folder (evaldesk --read-only PATH), list sources in the config, "
        "or write the demo once without --read-only (evaldesk demo) and then run evaldesk --read-only.\n"
    )


def _reason(err: object) -> str:
    # the cause first: the header has room for a few words, and the path is the source's label
    return str(getattr(err, "message", None) or (err if err is not None else "cancelled"))


# the sources are read by then even if the last read's rows have not reached the screen
FIRST_READ_LATEST_S = 1.0


class EvaldeskApp(RecoveryFlow, App[int]):
    TITLE = "evaldesk"
    CSS_PATH = str(Path(__file__).parent / "app.tcss")  # absolute: subclasses live elsewhere
    BINDINGS = bindings_for(GLOBAL)
    COMMANDS = App.COMMANDS | {EvaldeskCommands}

    def __init__(
        self,
        sources: list[Source],
        config: Config | None = None,
        read_only: bool = False,
        *,
        now: datetime | Callable[[], datetime] | None = None,
        journal: Any = None,
        poll: bool = True,
        cursor_blink: bool = True,
        startup_errors: list[str] | None = None,
        baseline_dirs: list[str] | None = None,
    ) -> None:
        super().__init__()
        one_heap_arena()  # before any worker thread allocates
        self._baseline_dirs = list(baseline_dirs or [])
        self.config = config or Config()
        self.policy: Policy = self.config.policy
        self.read_only = bool(read_only or self.config.read_only)
        self.sources: list[Source] = list(sources)
        self._sources_by_label: dict[str, Source] = {s.label: s for s in self.sources}
        self._now = now
        self._journal = journal
        self.poll = poll
        self.paused = False
        self._poll_timers: dict[str, Timer] = {}
        self.next_poll_in: dict[str, float] = {}
        # label -> (consecutive failures, last reason), shown in the header
        self.poll_failures: dict[str, tuple[int, str]] = {}
        self.cursor_blink = cursor_blink
        self.snapshots: dict[str, Snapshot] = {}
        # rows shown from the last read (tui/last_read.py) until their source answers: key → read at
        self.cached_at: dict[str, datetime] = {}
        self._kept_reads: dict[str, tuple[Experiment, ...]] = {}  # label → the experiments last kept of it
        self.audits: dict[str, AuditReport] = {}
        self._first_read_started = False  # the sources' first read, after the last read's rows
        # the notices raised and not yet expired or cleared, which each screen's notice line shows
        self.notices = Notifications()
        self._experiments: dict[str, Experiment] = {}
        self.scan_state: dict[str, tuple[int, int | None]] = {}
        self._scanning: set[str] = set()
        self._trimmed: set[str] = set()  # sources whose first big read was handed back
        self._rescan: set[str] = set()
        self.last_refresh: datetime | None = None
        self.last_scan_seconds: dict[str, float] = {}
        self.event_log: list[LogEntry] = []
        self.error_count = 0
        self._seen_source_errors: set[tuple[str, str, str]] = set()
        self._startup_errors = list(startup_errors or [])
        self._pending: PendingWrite | None = None
        self._writing = False
        self._write_path: WritePath | None = None
        self._toasted: set[tuple[str, str]] = set()
        self._leaving = False
        self.scan_count = 0
        self.leaderboard_view: Any = None  # services.leaderboard.rows.LeaderboardView once read
        self._init_recovery()
        self.command_runs: dict[str, CommandRun] = {}
        self._command_scanned: dict[str, float] = {}
        self.keymap: dict[str, str] = dict(self.config.keys)
        self.monitor = self._make_monitor()
        if self.config.theme:
            self._requested_theme: str | None = self.config.theme
        else:
            self._requested_theme = None

    def _make_monitor(self) -> MonitorState:
        """The live monitor's series and rules, fed on every scan so the list can flag rows.
        Baselines come from the config dir (never the current directory); rule c and the
        audit's alignment check read the same ones."""
        from services.audit.alignment import baseline_context
        from services.core.baselines import configured_baselines

        self.baselines, problems = configured_baselines(self.config, self._baseline_dirs)
        self._startup_errors += problems
        self.audit_context = baseline_context(self.baselines)
        return MonitorState(self.policy, self.baselines, clock=self.now)

    # ---- public API for screens -------------------------------------------------------

    def now(self) -> datetime:
        if self._now is None:
            return datetime.now(UTC)
        if isinstance(self._now, datetime):
            return self._now
        return self._now()

    @property
    def journal(self) -> Any:
        if self._journal is None:
            from services.core.journal import Journal

            self._journal = Journal(self.config.journal_path)
        return self._journal

    def experiment(self, key: str) -> Experiment | None:
        return self._experiments.get(key)

    def audit(self, key: str) -> AuditReport | None:
        return self.audits.get(key)

    def experiments(self) -> list[Experiment]:
        return list(self._experiments.values())

    def source_for(self, key: str) -> Source:
        label = key.split("::", 1)[0]
        try:
            return self._sources_by_label[label]
        except KeyError:
            raise KeyError(f"no source {label!r}") from None

    def write_refusal(self, action: str) -> str | None:
        """Why a write may not run now, or None — as the write path decides it."""
        return self.write_path.refusal(action)

    def guard_write(self, action: str) -> bool:
        """True when `action` may write; otherwise says why (notice + log) and returns False."""
        why = self.write_refusal(action)
        if why is None:
            return True
        self.record("warning", action, why)
        return False

    def record(self, level: str, where: str, message: str, detail: str = "", notify: bool = True) -> None:
        self.event_log.append(LogEntry(self.now(), level, where, message, detail))
        del self.event_log[:-LOG_LIMIT]
        if level == "error":
            self.error_count += 1
        if notify:
            severity = level if level in ("error", "warning", "information") else "information"
            self.notify(term_safe(message), title=term_safe(where)[:40], severity=severity,  # type: ignore[arg-type]
                        timeout=8 if level == "error" else 4, markup=False)
        self.post_message(ChromeChanged())

    def refresh_sources(self, force: bool = True) -> None:
        for src in self.sources:
            self._start_scan(src, force)
        if self.leaderboard_view is not None:
            self._read_leaderboard()

    def _read_leaderboard(self) -> None:
        from tui.leaderboard_poll import configured, read

        if configured(self):
            self.run_worker(read(self), name="leaderboard read", group="leaderboard", exclusive=True,
                            exit_on_error=False, description="leaderboard read")

    # ---- lifecycle --------------------------------------------------------------------

    def on_mount(self) -> None:
        # back on a screen (a dialog closed, esc): its notice line shows what was raised meanwhile
        self.screen_change_signal.subscribe(self, lambda _screen: self.show_notices())
        if self.console.color_system in ("standard", "windows"):
            # 16 colours: the accent colours fall on red, which reads as an error; reverse video
            # marks the cursor on every terminal
            self.add_class("-few-colors")
        if self._requested_theme:
            if self._requested_theme in self.available_themes:
                self.theme = self._requested_theme
            else:
                self.record("warning", "config", f"unknown theme {self._requested_theme!r}; using the default")
        from tui.actions import ACTIONS
        from tui.screens.experiments import ExperimentsScreen

        known = {spec.id for spec in ACTIONS}
        for binding_id in sorted(set(self.keymap) - known):
            self.record("warning", "config", f"keys: no binding with id {binding_id!r} (the ? help lists them)")
        if self.keymap:
            self.set_keymap({k: v for k, v in self.keymap.items() if k in known})
        self.push_screen(ExperimentsScreen())
        for err in self._startup_errors:
            self.record("error", "source", err)
        # the sources are read once the last read's rows are on screen (or there are none): their
        # reading threads would otherwise hold the GIL while that first frame is drawn
        self.set_timer(FIRST_READ_LATEST_S, self._start_first_read)
        self.run_worker(self._open_last_read, thread=True, name="last read", exit_on_error=False)
        self.look_for_pending()

    def _start_first_read(self) -> None:
        if not self._first_read_started:
            self._first_read_started = True
            self.refresh_sources()

    # ---- polling: each source on its own interval, re-armed after each scan ends ------------

    def interval_for(self, src: Source) -> float:
        """The source's own poll interval: its config entry, else the config default for local
        disk, else a gentler default for anything reached over the network."""
        from services.monitor.poller import default_interval

        for entry in self.config.sources:
            if entry.poll_interval_s and entry.name in (src.label, None) and entry.path in (
                src.label, getattr(src, "root", None)):
                return entry.poll_interval_s
        for host in self.config.hosts:
            if host.poll_interval_s and src.label.startswith(host.name):
                return host.poll_interval_s
        if src.kind == "harbor":
            return self.config.poll_interval_s
        return max(self.config.poll_interval_s, default_interval(src))

    def _arm(self, label: str) -> None:
        old = self._poll_timers.pop(label, None)
        if old is not None:
            old.stop()
        src = self._sources_by_label.get(label)
        if src is None or not self.poll or self.paused:
            return
        from services.monitor.poller import backoff_delay

        failures = self.poll_failures.get(label, (0, ""))[0]
        delay = backoff_delay(self.interval_for(src), failures)
        self.next_poll_in[label] = delay
        self._poll_timers[label] = self.set_timer(delay, lambda: self._start_scan(src, force=False))

    def action_toggle_pause(self) -> None:
        """Pause polling (the screens keep the last snapshot); again to resume at once."""
        self.paused = not self.paused
        if self.paused:
            for timer in self._poll_timers.values():
                timer.stop()
            self._poll_timers.clear()
            self.notify("Polling paused: p resumes, r reads once now", timeout=3)
        else:
            self.refresh_sources(force=False)
        self._chrome_changed()
        for screen in self.screen_stack:
            screen.post_message(PollingChanged())

    def _scan_failed(self, label: str, err: BaseException | str | None) -> None:
        reason = _reason(err)
        count = self.poll_failures.get(label, (0, ""))[0]
        self.poll_failures[label] = (count + 1, reason)

    def _scan_ok(self, label: str) -> None:
        if label in self.poll_failures:
            self.poll_failures.pop(label)
            self.record("information", label, f"{label}: reading again after a failure")

    async def on_unmount(self) -> None:
        for src in self.sources:
            with contextlib.suppress(Exception):
                await src.close()

    # ---- scans ------------------------------------------------------------------------

    def _start_scan(self, src: Source, force: bool) -> None:
        label = src.label
        if force:
            # `r`, and the scan after a write: every trial checked against its files, not only
            # the running ones and the finished ones due on the rotation
            verify_all = getattr(src, "verify_all", None)
            if callable(verify_all):
                verify_all()
        if label in self._scanning:
            # A scan runs in a thread that cannot be interrupted, and two over one source
            # would race on its cache: queue one more instead of cancelling.
            if force:
                self._rescan.add(label)
            return
        self._scanning.add(label)
        self.scan_state[label] = (0, None)
        self.post_message(ChromeChanged())
        self.run_worker(
            self._scan(src),
            name=f"scan {label}",
            group=f"scan-{label}",
            exclusive=True,
            exit_on_error=False,
            description=f"scan of {label}",
        )

    async def _scan(self, src: Source) -> None:
        label = src.label
        t0 = time.monotonic()
        last = [0.0]

        def progress(done: int, total: int | None, message: str) -> None:
            # called from scan threads: throttle, then hand over by message only
            if self._leaving:
                # a scan thread cannot be cancelled from outside; leaving the console stops it here
                raise ScanStopped
            now = time.monotonic()
            if now - last[0] < 0.1 and not (total and done >= total):
                return
            last[0] = now
            self.post_message(ScanProgress(label, done, total, message))

        snapshot = await src.scan(progress)
        for exp in snapshot.experiments:
            if not exp.source_label:
                exp.source_label = label
        audits = await asyncio.to_thread(self._audit_all, snapshot)
        try:
            activity = await probe_snapshot(snapshot, src.fs())
        except Exception:  # activity only sharpens idle times; the scan itself is what matters
            activity = {}
        # the monitor walks every trial: off the event loop, under its own lock
        warnings = await asyncio.to_thread(self.monitor.feed, snapshot, activity)
        self.post_message(ScanFinished(label, snapshot, audits, time.monotonic() - t0, activity, warnings))

    def _audit_all(self, snapshot: Snapshot) -> dict[str, object]:
        from services.audit.context import combine
        from services.audit.verdict import audit_experiment
        out: dict[str, object] = {}
        now = self.now()
        # what the leaderboard and the baselines know, beside what the files say (the
        # leaderboard's modules load only once there is a leaderboard view)
        board = None
        if self.leaderboard_view is not None:
            from services.leaderboard.view import audit_context

            board = audit_context(self.leaderboard_view, self.config)
        context = combine(board, self.audit_context)
        for exp in snapshot.experiments:
            try:
                out[experiment_key(exp)] = audit_experiment(exp, self.policy, now, context)
            except Exception as exc:  # one odd job must not hide the others
                out[experiment_key(exp)] = exc
        return out

    @on(ScanProgress)
    def _on_scan_progress(self, message: ScanProgress) -> None:
        if message.label in self._scanning:
            self.scan_state[message.label] = (message.done, message.total)
            self._chrome_changed()

    def _open_last_read(self) -> None:
        """The rows of the last read, in a thread; shown unless the source answered first."""
        from tui import last_read

        kept: dict[str, tuple[datetime, list[Experiment], dict[str, AuditReport]]] = {}
        try:
            kept = last_read.load([s.label for s in self.sources])
        finally:
            if kept:
                self.call_from_thread(self._show_last_read, kept)
            else:  # nothing kept, or unreadable: the sources are read at once
                self.call_from_thread(self._start_first_read)

    def _show_last_read(self, kept: dict[str, tuple[datetime, list[Experiment], dict[str, AuditReport]]]) -> None:
        for label, (at, exps, audits) in kept.items():
            if label in self.snapshots:
                continue  # the fresh answer came first
            for exp in exps:
                key = experiment_key(exp)
                self._experiments[key] = exp
                self.cached_at[key] = at
                if key in audits:
                    self.audits[key] = audits[key]
        for screen in self.screen_stack:
            screen.post_message(SnapshotUpdated(Snapshot(source="last read", taken_at=self.now())))
        # once the screen has handled those rows and drawn them, the sources are read afresh
        self.screen.call_later(self.screen.call_after_refresh, self._start_first_read)

    def _keep_last_read(self, label: str, snap: Snapshot) -> None:
        from tui import last_read

        audits = {experiment_key(e): self.audits[experiment_key(e)] for e in snap.experiments
                  if experiment_key(e) in self.audits}
        with contextlib.suppress(OSError):  # a read-only state dir: the next start reads the sources
            last_read.save(label, snap.taken_at, snap.experiments, audits)

    @on(ScanFinished)
    def _on_scan_finished(self, message: ScanFinished) -> None:
        label = message.label
        snap = message.snapshot
        for key in [k for k in self.cached_at if k.split("::", 1)[0] == label]:
            # the source answered: its rows from the last read give way to the fresh ones
            del self.cached_at[key]
            self._experiments.pop(key, None)
            self.audits.pop(key, None)
        for exp in snap.experiments:
            if not exp.source_label:
                exp.source_label = label
        old = self.snapshots.get(label)
        if old is not None:
            for exp in old.experiments:
                self._experiments.pop(experiment_key(exp), None)
                self.audits.pop(experiment_key(exp), None)
        self.snapshots[label] = snap
        for exp in snap.experiments:
            key = experiment_key(exp)
            self._experiments[key] = exp
            report = message.audits.get(key)
            if isinstance(report, AuditReport):
                self.audits[key] = report
            elif isinstance(report, Exception):
                self.record("error", f"audit {exp.id}", f"audit failed: {type(report).__name__}: {report}",
                            "".join(traceback.format_exception(report)))
        for err in snap.errors:
            sig = (err.source, err.where, err.message)
            if sig not in self._seen_source_errors:
                self._seen_source_errors.add(sig)
                self.record("warning", err.source, f"{err.where}: {source_problem(err.message)}")
        for warning in message.warnings:
            # every firing goes to the log (L); a toast only the first time a rule holds for an
            # experiment, short, in the corner, and never over a dialog
            seen = (warning.key or warning.id, warning.rule)
            first = seen not in self._toasted
            self._toasted.add(seen)
            self.record("warning", f"monitor {warning.id}"[:40],
                        f"{warning.id}: rule {warning.rule} ({warning.title}): {warning.evidence}", notify=False)
            if first and not isinstance(self.screen, ModalScreen):
                self.notify(f"rule {warning.rule}: {warning.title} — {shorten(warning.id, 28)} (L: log)",
                            severity="warning", timeout=5, markup=False)
        self.last_refresh = self.now()
        self.scan_count += 1
        self.last_scan_seconds[label] = message.seconds
        for screen in self.screen_stack:
            screen.post_message(SnapshotUpdated(snap))
        kept = self._kept_reads.get(label)
        same = kept is not None and len(kept) == len(snap.experiments) and all(
            a is b for a, b in zip(kept, snap.experiments, strict=True))  # (an unchanged job's scan gives it back)
        if (not snap.errors or snap.experiments) and not same:
            self._kept_reads[label] = tuple(snap.experiments)
            self.run_worker(lambda: self._keep_last_read(label, snap), thread=True, name=f"keep {label}",
                            group=f"last-read-{label}", exit_on_error=False)
        source = self._sources_by_label.get(label)
        if source is not None:
            self.look_for_pending(source, snap)
        stale = [e for e in snap.experiments if e.stale_since is not None]
        if stale and snap.errors:
            # the source answered with its last good copy: it is down, whatever the worker says
            self._scan_failed(label, snap.errors[0].message)
        else:
            self._scan_ok(label)
        if self.leaderboard_view is None and "leaderboard" not in self.poll_failures:
            self._read_leaderboard()  # the first read waits for experiments to match rows to
        # 100k parsed trials stay alive between scans; a full cyclic GC over them stalls a key
        # press by ~0.5 s, so what exists now is moved out of the collector's generations
        gc.freeze()
        if label not in self._trimmed and sum(_trials_counted(e) for e in snap.experiments) >= TRIM_MIN_TRIALS:
            # the first big read leaves freed heap pages that glibc keeps: hand them back once
            self._trimmed.add(label)
            give_back_memory()
        self._scan_done(label)

    def _scan_done(self, label: str) -> None:
        self._scanning.discard(label)
        self.scan_state.pop(label, None)
        self._chrome_changed()
        if label in self._rescan:
            self._rescan.discard(label)
            src = self._sources_by_label.get(label)
            if src is not None:
                self._start_scan(src, force=False)
                return
        self._arm(label)

    # ---- the leaderboard: polled on its own interval, it re-audits; down means stale, never blocking

    @on(LeaderboardRead)
    def _on_leaderboard_read(self, message: LeaderboardRead) -> None:
        from tui.leaderboard_poll import LABEL, reaudit

        self.leaderboard_view = message.view
        if message.view.error:
            self._scan_failed(LABEL, message.view.error)
        else:
            self._scan_ok(LABEL)
        self.run_worker(reaudit(self), name="re-audit", group="reaudit", exclusive=True, exit_on_error=False,
                        description="audit with the leaderboard")
        old = self._poll_timers.pop(LABEL, None)
        if old is not None:
            old.stop()
        if self.poll and not self.paused:
            from services.monitor.poller import backoff_delay

            delay = backoff_delay(self.config.leaderboard.poll_interval_s, self.poll_failures.get(LABEL, (0, ""))[0])
            self.next_poll_in[LABEL] = delay
            self._poll_timers[LABEL] = self.set_timer(delay, self._read_leaderboard)
        self._chrome_changed()

    @on(AuditsRefreshed)
    def _on_audits_refreshed(self, message: AuditsRefreshed) -> None:
        for key, report in message.audits.items():
            if isinstance(report, AuditReport) and key in self._experiments:
                self.audits[key] = report
        for snap in self.snapshots.values():
            for screen in self.screen_stack:
                screen.post_message(SnapshotUpdated(snap))

    # ---- the one worker-failure handler -------------------------------------------------

    @on(Worker.StateChanged)
    def _on_worker_state(self, event: Worker.StateChanged) -> None:
        if self._leaving:
            return  # scans stopped on the way out are not failures
        worker = event.worker
        group = worker.group or ""
        if event.state == WorkerState.ERROR:
            err = worker.error
            detail = "".join(traceback.format_exception(err)) if isinstance(err, BaseException) else ""
            what = worker.description or worker.name or "background task"
            scan_label = group[len("scan-"):] if group.startswith("scan-") else None
            repeated = scan_label is not None and self.poll_failures.get(scan_label, (0, ""))[1] == _reason(err)
            # a source that stays down says so once (and in the header), not on every poll
            if not repeated:
                self.record("error", what, f"{what} failed: {type(err).__name__}: {err}", detail)
            if scan_label is not None:
                self._scan_failed(scan_label, err if isinstance(err, BaseException) else None)
            if group == "write":
                self._writing = False
        if event.state in (WorkerState.ERROR, WorkerState.CANCELLED) and group.startswith("scan-"):
            self._scan_done(group[len("scan-"):])

    @on(ChromeChanged)
    def _on_chrome_changed(self) -> None:
        self._chrome_changed()

    def _chrome_changed(self) -> None:
        from tui.chrome import ConsoleHeader

        for screen in self.screen_stack:
            for header in screen.query(ConsoleHeader):
                header.refresh()
            progress = getattr(screen, "scan_progress", None)
            if callable(progress):
                progress()

    # ---- navigation -------------------------------------------------------------------

    async def action_quit(self) -> None:
        """Leave at once, even mid-scan: running scans stop at their next progress report. A
        command running here stops with evaldesk (its process group goes too): say so once, and
        leave on the second press."""
        running = [r for r in self.command_runs.values() if r.running]
        now = time.monotonic()
        if running and now - getattr(self, "_quit_warned", 0.0) > 5.0:
            self._quit_warned = now
            run = running[0]
            self.record("warning", "quit", f"a {run.action} still runs ({run.command}); quitting stops it — "
                        "press q again to quit anyway")
            return
        self._leaving = True
        for timer in self._poll_timers.values():
            timer.stop()
        self.exit(0)

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen))

    # ---- `:` (tui/commandline.py) -------------------------------------------------------

    def action_command_line(self) -> None:
        from tui.commandline import CommandLine, commands

        screen = self.screen
        if isinstance(screen, ModalScreen):
            self.action_command_palette()  # a dialog keeps its own keys; the palette lists them
            return
        if not screen.query(CommandLine):
            line = CommandLine(commands(self, screen))
            line.cursor_blink = self.cursor_blink
            footer = screen.query("KeyFooter")
            screen.mount(line, before=footer.first() if footer else None)
            line.focus()

    def _current_keys(self) -> list[str]:
        """The rows a view command acts on: the marked ones, else the one under the cursor."""
        screen = self.screen
        marked = getattr(screen, "marked_keys", None)
        if callable(marked) and marked():
            return list(marked())
        selected = getattr(screen, "selected_key", None)
        if callable(selected):
            key = selected()
            return [key] if key else []
        key = getattr(screen, "key", None)
        if isinstance(key, str):
            return [key]
        keys = getattr(screen, "keys", None)
        return list(keys) if isinstance(keys, list) else []

    async def action_view(self, name: str) -> None:
        from tui.screens.experiments import ExperimentsScreen

        if name == "list":
            while len(self.screen_stack) > 2 and not isinstance(self.screen, ExperimentsScreen):
                self.pop_screen()
        elif name == "journal":
            from tui.screens.journal import JournalScreen

            self.push_screen(JournalScreen())
        elif name == "log":
            self.action_show_log()
        elif name == "help":
            self.action_help()
        elif name == "quit":
            await self.action_quit()
        elif name in ("audit", "monitor"):
            keys = self._current_keys()
            self.post_message(OpenView(name, keys if name == "monitor" else keys[:1]))
        else:
            self.post_message(OpenView(name, self._current_keys()[:1]))

    async def action_show_source(self, label: str) -> None:
        """`:<source or host>`: the list, showing only that source's rows."""
        import re

        from tui.screens.experiments import ExperimentsScreen

        await self.action_view("list")
        home = self.screen
        if isinstance(home, ExperimentsScreen):
            home.apply_filter(re.escape(label))

    @on(Notify)
    def _on_notify_shown(self, event: Notify) -> None:
        # every notify() reaches the app as this message (Textual keeps its own copy for its toasts,
        # which the stylesheet hides): the screen's line shows it
        self.notices.add(event.notification)
        self.show_notices()

    def clear_notifications(self) -> None:
        super().clear_notifications()
        self.notices.clear()
        self.show_notices()

    def show_notices(self) -> None:
        """The current screen's notice line shows the live notices (a line expires them itself)."""
        try:
            lines = list(self.screen.query(NoticeLine))
        except Exception:  # no screen yet, or one being torn down
            return
        for line in lines:
            line.show(self.notices)

    def action_show_log(self) -> None:
        from tui.screens.log import LogScreen

        if not isinstance(self.screen, LogScreen):
            self.push_screen(LogScreen())

    def action_refresh(self) -> None:
        self.refresh_sources(force=True)

    def _push_safely(self, make: Callable[[], Screen[Any]], where: str) -> None:
        """Open a screen; a screen that fails to build is a notice and a log entry, not a crash."""
        try:
            screen = make()
        except Exception as exc:
            self.record("error", where, f"cannot open the {where} view: {type(exc).__name__}: {exc}",
                        "".join(traceback.format_exception(exc)))
            return
        self.push_screen(screen)

    def open_audit(self, key: str) -> None:
        from tui.screens.audit import AuditScreen

        if self.experiment(key) is None:
            self.record("warning", "audit", "no experiment selected")
            return
        self._push_safely(lambda: AuditScreen(key), "audit")

    def open_trials(self, key: str) -> None:
        if self.experiment(key) is None:
            self.record("warning", "trials", "no experiment selected")
            return
        try:
            from tui.screens.trials import TrialsScreen  # type: ignore[import-not-found,unused-ignore]
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("tui.screens.trials"):
                self.record("information", "trials", "The trials view is not part of this build yet.")
                return
            raise
        self._push_safely(lambda: TrialsScreen(key), "trials")

    def open_monitor(self, keys: list[str]) -> None:
        if not keys:
            self.record("warning", "monitor", "no experiment selected")
            return
        try:
            from tui.screens.monitor import MonitorScreen  # type: ignore[import-not-found,unused-ignore]
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("tui.screens.monitor"):
                self.record("information", "monitor", "The live monitor is not part of this build yet.")
                return
            raise
        self._push_safely(lambda: MonitorScreen(keys=keys), "monitor")

    def open_results(self, key: str) -> None:
        from tui.screens.results import ResultsScreen

        if self.experiment(key) is None:
            self.record("warning", "results", "no experiment selected")
            return
        self._push_safely(lambda: ResultsScreen(key), "results")

    @on(OpenView)
    def _on_open_view(self, message: OpenView) -> None:
        if message.view == "monitor":
            self.open_monitor(message.keys)
        elif not message.keys:
            self.record("warning", message.view, "no experiment selected")
        elif message.view == "trials":
            self.open_trials(message.keys[0])
        elif message.view == "audit":
            self.open_audit(message.keys[0])
        elif message.view == "results":
            self.open_results(message.keys[0])
        elif message.view == "log":
            self.action_show_log()
        elif message.view == "command":
            self.open_command_log(message.keys[0])

    @on(HandOver)
    def _on_hand_over(self, message: HandOver) -> None:
        """Give the terminal to a pager, an editor or a shell, then take it back."""
        from tui.external import command_for, missing, run_foreground, ssh_spec_of

        try:
            spec = ssh_spec_of(self.source_for(message.key))
        except KeyError:
            return
        argv, cwd = command_for(message.kind, message.path, spec)
        why = missing(argv)
        if why:
            self.record("warning", message.kind, f"cannot open a {message.kind}: {why}")
            return
        if self.is_headless:
            # nothing to hand the terminal to (tests): run it with no terminal at all
            import subprocess

            code = subprocess.call(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        else:
            from textual.app import SuspendNotSupported

            try:
                with self.suspend():
                    code = run_foreground(argv, cwd)
            except SuspendNotSupported:
                # a console in a browser tab (evaldesk serve) has no terminal to hand over
                self.record("warning", message.kind, f"cannot open a {message.kind} from a browser tab: it needs "
                            "a terminal — run evaldesk in one")
                return
        if code not in (0, None):
            self.record("warning", message.kind, f"{argv[0]} exited with code {code}", notify=False)
        self.refresh()

    @on(Notice)
    def _on_notice(self, message: Notice) -> None:
        self.record(message.level, message.where, message.message, notify=message.notify)

    @on(ClearLog)
    def _on_clear_log(self) -> None:
        self.event_log.clear()
        self.error_count = 0
        self._chrome_changed()

    # ---- reports: written to evaldesk's own reports folder, never into a job dir ---------

    @on(RequestReport)
    def _on_request_report(self, message: RequestReport) -> None:
        exps = [e for e in (self.experiment(k) for k in message.keys) if e is not None]
        if not exps:
            self.record("warning", "report", "no experiment selected")
            return
        audits = [self.audit(experiment_key(e)) for e in exps]
        self.run_worker(self._write_report(exps, audits), name="report", group="report", exclusive=True,
                        exit_on_error=False, description=f"report of {exps[0].id}")

    async def _write_report(self, exps: list[Experiment], audits: list[AuditReport | None]) -> None:
        from services.report.output import default_name, render, report_for, reports_dir, write_text_atomic

        def write() -> tuple[str, list[str]]:
            report = report_for(exps, self.policy, self.now(), self.baselines, audits)
            path = write_text_atomic(reports_dir() / default_name(report, "html"), render(report, "html", self.policy))
            return str(path), report_summary(report)

        path, lines = await asyncio.to_thread(write)
        self.post_message(ReportWritten(path, lines))

    @on(ReportWritten)
    def _on_report_written(self, message: ReportWritten) -> None:
        from tui.screens.report import ReportScreen

        self.record("information", "report", f"report written: {message.path}", notify=False)
        self.push_screen(ReportScreen(message.path, message.lines))

    # ---- writes: plan → confirm → apply → re-scan -------------------------------------
    # Every write goes through services.remediations (registry → base.WritePath): the app only
    # asks for a plan, shows its preview, and hands the confirmed plan back.

    @property
    def write_path(self) -> WritePath:
        if self._write_path is None:
            why = self.config.read_only_why or ("read_only = true in the config" if self.config.read_only
                                                else "--read-only")
            self._write_path = WritePath(self.journal, read_only=self.read_only, read_only_why=why)
        return self._write_path

    @on(RequestPlan)
    def _on_request_plan(self, message: RequestPlan) -> None:
        exp = self.experiment(message.key)
        if exp is None:
            self.record("warning", message.action, "no experiment selected")
            return
        if message.action == "undo":
            work = self._plan_undo(message.key, exp)
        else:
            work = self._plan(message.action, message.key, exp, message.options)
        self.run_worker(work, name=f"plan {message.action}", group="plan", exclusive=True,
                        exit_on_error=False, description=f"{message.action} preview for {exp.id}")

    async def _plan(self, action: str, key: str, exp: Experiment, options: dict[str, Any] | None = None) -> None:
        from services.remediations import inputs, registry

        try:
            fields = await inputs.needed(action, exp, self.source_for(key), self.config)
            if fields:
                self.post_message(InputsNeeded(action, key, fields))
                return
            plan = await registry.plan(action, exp, self.source_for(key), self.config, self.now(), options)
        except WriteRefused as exc:
            self.post_message(WriteDone(action, key, f"{action}: {exc}", rescan=False))
            return
        self.post_message(PlanReady(action, key, plan))

    @on(InputsNeeded)
    def _on_inputs_needed(self, message: InputsNeeded) -> None:
        from tui.screens.inputs import InputsScreen

        exp = self.experiment(message.key)
        if exp is None:
            return
        names = " and ".join(f.label.split(" (")[0] for f in message.fields)
        title = f"{exp.id}: {names} not given (needed before {message.action.replace('_', ' ')})"

        def answered(values: dict[str, int] | None) -> None:
            if values is None:
                self.record("information", message.action, f"{message.action} cancelled: nothing changed",
                            notify=False)
                return
            self.run_worker(self._provide(message.action, message.key, values), name=f"inputs {message.action}",
                            group="plan", exclusive=True, exit_on_error=False,
                            description=f"{message.action} inputs for {exp.id}")

        self.push_screen(InputsScreen(title, message.fields), callback=answered)

    async def _provide(self, action: str, key: str, values: dict[str, int]) -> None:
        from services.remediations import inputs

        exp = self.experiment(key)
        if exp is None:
            return
        try:
            await inputs.provide(action, exp, self.source_for(key), self.config, values)
        except WriteRefused as exc:
            self.post_message(WriteDone(action, key, f"{action}: {exc}", rescan=False))
            return
        await self._plan(action, key, exp)

    async def undo_request(self, key: str, exp: Experiment) -> UndoRequest | None:
        """The newest undoable write of `exp` and its preview, or None when there is none."""
        from services.remediations.records import UNDOABLE
        from services.remediations.registry import records_for

        source = self.source_for(key)
        records = [r for r in await records_for(source.fs(), exp.path) if r.status in UNDOABLE]
        from tui.batch_leaderboard import local_records

        # leaderboard writes keep their records on this machine: the newest write of either kind
        records = sorted(records + await local_records(self.write_path, key), key=lambda r: r.created_at,
                         reverse=True)
        if not records:
            return None
        record = records[0]
        from services.remediations import registry

        ctx = registry.context(record.action, source, self.config)
        lines, blocked = await self.write_path.undo_preview(record, ctx)
        return UndoRequest(record, lines, blocked)

    async def _plan_undo(self, key: str, exp: Experiment) -> None:
        req = await self.undo_request(key, exp)
        if req is None:
            self.post_message(WriteDone("undo", key, f"{exp.id}: nothing to undo (no applied write in its "
                                        "quarantine)", rescan=False))
            return
        self.post_message(PlanReady("undo", key, req))

    # ---- a write on every marked run (tui/marked.py) ---------------------------------------

    def write_marked(self, action: str, keys: list[str]) -> None:
        from tui.marked import plan_all

        why = self.write_refusal(action)
        if why is not None:
            self.record("warning", action, why)
            return
        self.run_worker(plan_all(self, action, keys), name=f"plan {action}", group="plan", exclusive=True,
                        exit_on_error=False, description=f"{action} preview for {len(keys)} marked run(s)")

    @on(MarkedPlans)
    def _on_marked_plans(self, message: MarkedPlans) -> None:
        from tui.marked import apply_all, preview
        from tui.screens.confirm import ConfirmScreen

        title, lines, todo = preview(message.action, message.plans)

        def answered(confirmed: bool | None) -> None:
            if not confirmed:
                self.record("information", message.action, f"{message.action} cancelled: nothing changed",
                            notify=False)
                return
            if self._writing:
                self.record("warning", message.action, "another write is still running")
                return
            self._writing = True
            self.run_worker(apply_all(self, message.action, message.plans), name=message.action, group="write",
                            exclusive=False, exit_on_error=False,
                            description=f"{message.action} of {todo} marked run(s)")

        refusal = self.write_refusal(message.action) or (None if todo else "nothing to change in the marked runs")
        self.push_screen(ConfirmScreen(title, lines, confirm_label=f"Apply to {todo} run(s)", action=message.action,
                                       refusal=refusal), callback=answered)

    @on(PlanReady)
    def _on_plan_ready(self, message: PlanReady) -> None:
        from tui.screens.confirm import ConfirmScreen

        exp = self.experiment(message.key)
        if exp is None:
            return
        word: str | None = None  # a plan that goes ahead only when this word is typed
        if isinstance(message.payload, UndoRequest):
            req = message.payload
            rec = req.record
            n_dirs = sum(1 for ln in req.lines if ln.startswith("  restore "))
            lines = [f"Undo {rec.action} {rec.id} of {exp.id}: put back {n_dirs} trial dir(s) and "
                     f"{len(req.lines) - n_dirs} other change(s) it made.", ""]
            if req.blocked:
                lines += ["Undo is refused, nothing will change:", *(f"  {b}" for b in req.blocked)]
            lines += req.lines
            title, confirm = f"Undo {rec.action} of {exp.id}", "Undo"
            refusal = self.write_refusal("undo") or ("; ".join(req.blocked) if req.blocked else None)
        else:
            plan = cast("Plan", message.payload)
            if (plan.meta.get("preview_paths") == "absolute" or plan.meta.get("full_paths")
                    or plan.meta.get("verbatim")):
                lines = list(plan.preview)  # a command's paths are shown exactly as it gets them
            else:
                lines = [ln.replace(exp.path + "/", "").replace(exp.path, exp.id) for ln in plan.preview]
            if plan.nothing_to_do:
                self.record("information", message.action, " ".join(lines) if lines else f"nothing to {message.action}")
                return
            title, confirm = plan.title, f"Apply {len(plan.steps)} step(s)"
            word = plan.meta.get("confirm_word") if plan.blocked else None
            refusal = self.write_refusal(message.action) or (
                f"Cannot apply now: {plan.blocked}." if plan.blocked and not word else None)
            if plan.blocked:
                # planning may have learned why (a preflight): the list shows it at once
                self._start_scan(self.source_for(message.key), force=True)
        self._pending = PendingWrite(message.action, message.key, message.payload, lines)
        self.push_screen(
            ConfirmScreen(title, lines, confirm_label=confirm, action=message.action, refusal=refusal, word=word),
            callback=self._on_confirm,
        )

    def _on_confirm(self, confirmed: bool | None) -> None:
        pending, self._pending = self._pending, None
        if not confirmed or pending is None:
            if pending is not None:
                self.record("information", pending.action, f"{pending.action} cancelled: nothing changed",
                            notify=False)
            return
        blocked = getattr(pending.payload, "blocked", None)
        word = getattr(pending.payload, "meta", {}).get("confirm_word") if blocked else None
        if blocked and word and not self._writing:
            # the dialog took the word the plan asked for: the planner decides again with it
            exp = self.experiment(pending.key)
            if exp is not None:
                self._writing = True
                self.run_worker(self._apply_with_word(pending, exp, str(word)), name=pending.action, group="write",
                                exclusive=False, exit_on_error=False, description=f"{pending.action} of {exp.id}")
            return
        if blocked:
            # the dialog said so already; nothing starts (no command run, no output view)
            self.record("warning", pending.action, f"{pending.action} refused, nothing changed: {blocked}")
            return
        if self._writing:
            self.record("warning", pending.action, "another write is still running")
            return
        exp = self.experiment(pending.key)
        if exp is None:
            return
        self._writing = True
        command = command_of(pending.payload)
        if command is not None:
            self._start_command_run(pending, exp, command)
        self.run_worker(self._apply(pending, exp), name=pending.action, group="write",
                        exclusive=False, exit_on_error=False, description=f"{pending.action} of {exp.id}")

    async def _apply_with_word(self, pending: PendingWrite, exp: Experiment, word: str) -> None:
        from services.remediations import registry

        try:
            plan = await registry.plan(pending.action, exp, self.source_for(pending.key), self.config, self.now(),
                                       {"confirm_word": word})
        except WriteRefused as exc:
            self.post_message(WriteDone(pending.action, pending.key, f"{pending.action} refused: {exc}", rescan=False))
            return
        if plan.blocked:
            self.post_message(WriteDone(pending.action, pending.key,
                                        f"{pending.action} refused, nothing changed: {plan.blocked}", rescan=False))
            return
        accepted = PendingWrite(pending.action, pending.key, plan, list(plan.preview))
        command = command_of(plan)
        if command is not None:
            self._start_command_run(accepted, exp, command)
        await self._apply(accepted, exp)

    async def apply_planned(self, action: str, key: str, payload: Any, lines: list[str], exp: Experiment) -> None:
        """Apply a plan already previewed and confirmed (one of several marked runs)."""
        await self._apply(PendingWrite(action, key, payload, lines), exp)

    async def _apply(self, pending: PendingWrite, exp: Experiment) -> None:
        from services.remediations import registry

        source = self.source_for(pending.key)
        action = pending.payload.record.action if isinstance(pending.payload, UndoRequest) else pending.action
        ctx = registry.context(action, source, self.config)

        async def run() -> None:
            try:
                if isinstance(pending.payload, UndoRequest):
                    rec = pending.payload.record
                    done = await self.write_path.undo(rec, ctx)
                    summary = f"{exp.id}: undid {rec.action} {done.id}"
                else:
                    plan = cast("Plan", pending.payload)
                    resources: dict[str, Any] = {}
                    if pending.key in self.command_runs and self.command_runs[pending.key].running:
                        key = pending.key
                        resources["on_output"] = lambda stream, text: self.post_message(
                            CommandOutput(key, stream, text))
                    done = await registry.apply(pending.action, plan, exp.id, source, self.config,
                                                self.write_path, resources=resources)
                    summary = f"{pending.action} applied to {exp.id}: {len(plan.steps)} step(s), record {done.id}"
                    summary = self._end_command_run(pending, plan, done) or summary
            except LockHeld:
                self._end_command_run(pending, None, None, "refused", "another writer holds the job's lock")
                raise  # the lock dialog says who holds it
            except WriteRefused as exc:
                # a refusal, not a failure: nothing was changed, and the re-scan shows why
                summary = f"{pending.action} refused: {exc}"
                self._end_command_run(pending, None, None, "refused", summary)
            except StepFailed as exc:
                summary = f"{pending.action} failed: {exc}"
                self._end_command_run(pending, None, None, "failed", summary)
            except SourceUnavailable as exc:
                summary = f"{pending.action} failed: cannot reach {exc.where}: {exc.message}"
                self._end_command_run(pending, None, None, "failed", summary)
            self.post_message(WriteDone(pending.action, pending.key, summary))
            command_run = self.command_runs.get(pending.key)
            if command_run is not None and command_run.state == "failed" and command_run.record is not None:
                # the trials set aside are offered back (undo checks first that nothing re-ran them)
                self.post_message(RequestPlan("undo", pending.key))

        await guarded(self, f"{pending.action} of {exp.id}", pending.key, ctx, run)

    # ---- commands a write runs: their output, followed live -----------------------------

    def _start_command_run(self, pending: PendingWrite, exp: Experiment, command: str) -> None:
        from tui.screens.command_log import CommandLogScreen

        plan = cast("Plan", pending.payload)
        self.command_runs[pending.key] = CommandRun(pending.key, pending.action, command, plan.host, self.now())
        self.post_message(CommandChanged(pending.key))
        self._push_safely(lambda: CommandLogScreen(pending.key), "command output")

    def _end_command_run(self, pending: PendingWrite, plan: Plan | None, record: Record | None,
                         state: str | None = None, message: str = "") -> str | None:
        """Close the command run of a write with its result; the summary to log, if any."""
        run = self.command_runs.get(pending.key)
        if run is None or not run.running:
            return None
        summary = close_run(run, pending.key.split("::", 1)[-1], plan, record, state, message)
        self.post_message(CommandChanged(pending.key))
        return summary

    @on(CommandOutput)
    def _on_command_output(self, message: CommandOutput) -> None:
        run = self.command_runs.get(message.key)
        if run is None:
            return
        run.output.append((message.stream, message.text))
        run.received += 1
        del run.output[:-OUTPUT_LIMIT]
        for screen in self.screen_stack:
            screen.post_message(CommandOutput(message.key, message.stream, message.text))
        # new trials arrive while it runs: read the source again, not more often than every 2 s
        label = message.key.split("::", 1)[0]
        now = time.monotonic()
        if now - self._command_scanned.get(label, 0.0) >= COMMAND_RESCAN_S:
            self._command_scanned[label] = now
            src = self._sources_by_label.get(label)
            if src is not None:
                self._start_scan(src, force=True)

    @on(CommandChanged)
    def _on_command_changed(self, message: CommandChanged) -> None:
        for screen in self.screen_stack:
            screen.post_message(CommandChanged(message.key))

    def open_command_log(self, key: str) -> None:
        from tui.screens.command_log import CommandLogScreen

        if key not in self.command_runs:
            self.record("information", "output", "no command has run for this experiment in this session")
            return
        self._push_safely(lambda: CommandLogScreen(key), "command output")

    @on(WriteDone)
    def _on_write_done(self, message: WriteDone) -> None:
        self._writing = False
        self.record("information", message.action, message.summary)
        if not message.rescan:
            return
        if self.leaderboard_view is not None:
            self._read_leaderboard()  # a leaderboard write shows in the next audit
        src = self._sources_by_label.get(message.key.split("::", 1)[0])
        if src is not None:
            # the audit re-runs on the new files as part of the scan
            self._start_scan(src, force=True)


def report_summary(report: Any) -> list[str]:
    """A few lines a person reads in the dialog: one per run, then alignment and comparison."""
    lines = []
    for run in report.runs:
        k = run.kpis
        score = "—" if k.score is None else f"{k.score:.3f}"
        err = "—" if k.error_fraction is None else f"{100 * k.error_fraction:.1f}%"
        # the census's words, as the trials, audit and monitor screens say them
        lines.append(f"{run.id}: score {score} · {k.valid:,} valid of "
                     f"{f'{k.expected:,}' if k.expected is not None else '?'} expected · {k.errored:,} errored · "
                     f"{k.invalid_errors:,} invalid errors · error gate {err} · verdict {run.audit.verdict.upper()}")
        if run.alignment is not None:
            lines.append(f"  alignment ({run.alignment.status.value}): {run.alignment.evidence}")
    if report.comparison is not None and report.comparison.score_delta is not None:
        lines.append(f"compared: score delta {report.comparison.score_delta:+.3f} over "
                     f"{len(report.comparison.tasks)} tasks")
    lines += report.notes
    return lines


def run_app(sources: list[str], config: Config, read_only: bool) -> int:
    """Entry point for the interactive console; returns the process exit code."""
    from services.core.registry import open_all

    # a web driver (evaldesk serve) draws in a browser, whatever TERM says
    if os.environ.get("TERM", "") in ("dumb", "unknown") and not os.environ.get("TEXTUAL_DRIVER"):
        print(f"evaldesk: this terminal (TERM={os.environ.get('TERM')}) cannot draw the console; use the "
              "headless commands instead, e.g. evaldesk --batch list SOURCE (see evaldesk --help)", file=sys.stderr)
        return 2

    opened, errors = open_all(sources, config)
    if sources and not opened:
        for err in errors:
            print(f"evaldesk: {term_safe(err)}", file=sys.stderr)
        return 2
    from services.core.baselines import source_baseline_dirs

    # a SOURCE folder's own baselines/ (the demo's among them), as --batch reads them
    baseline_dirs = source_baseline_dirs(sources)
    if not opened and not errors:
        if read_only and not demo_written():
            sys.stderr.write(read_only_without_data())
            return 2
        try:
            opened = demo_sources(config)
        except OSError as exc:
            print(f"evaldesk: cannot write the demo data: {term_safe(exc)}", file=sys.stderr)
            return 2
        # the demo brings a baseline for one of its runs, so alignment shows without any setup
        baseline_dirs = source_baseline_dirs([str(data_dir() / "demo")])
    app = EvaldeskApp(opened, config, read_only, startup_errors=errors, baseline_dirs=baseline_dirs)
    app.run()
    return app.return_code or 0
