"""Trials of one experiment: every attempt, grouped or filtered, with the selected trial's
log tail and its diagnosis.

All file reads happen in workers that post messages; the handlers below own every change to
the widgets. The table is virtual (widgets/trial_table.py), so 100k attempts open at once.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from itertools import islice
from typing import ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Container
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static

from services.core.census import census_words
from services.core.diagnosis import score_effect
from services.core.failures import FAILURE_CLASS_MEANING
from services.core.models import Experiment, Trial, TrialStatus
from services.core.paths import UnsafePath, inside
from services.core.source import TrialFile
from services.core.text import term_safe
from services.transport.fs import JobFS
from tui.actions import bindings_for
from tui.context import ConsoleState, console
from tui.external import copy_location
from tui.messages import HandOver, OpenView, RequestPlan, SnapshotUpdated
from tui.navigation import move
from widgets.diagnose import DiagnoseInfo, DiagnosePanel
from widgets.footer import KeyFooter
from widgets.ids import shorten
from widgets.log_tail import ErrorReader, FSReader, LogTail, LogView
from widgets.trial_table import (
    GROUP_COLUMNS,
    Column,
    Group,
    VirtualTable,
    build_groups,
    fmt_reward,
    group_cells,
    group_key,
    marked_cells,
    marked_columns,
    trial_cells,
    trial_columns,
)

STATUS_CYCLE: tuple[TrialStatus | None, ...] = (None, TrialStatus.valid, TrialStatus.errored,
                                                 TrialStatus.running)
# Below this size the panels share one slot (toggled with `d`) under the table.
COMPACT_WIDTH = 110
COMPACT_HEIGHT = 30
SELECT_DELAY = 0.08  # holding a key down must not open a log per row passed


@dataclass
class PreparedTrials:
    """The experiment's attempts in display order, with what filtering and grouping read."""

    trials: list[Trial]
    statuses: list[TrialStatus]
    status_counts: Counter[TrialStatus]
    columns: list[Column]
    made: list[Trial] = field(default_factory=list, repr=False)  # the order they were made in
    order: list[int] = field(default_factory=list, repr=False)  # display position → index in `made`

    @cached_property
    def group_keys(self) -> list[str]:
        # only grouping, the `f` filter and the diagnose panel's count need them: not the first frame
        keys = [t.exception_type or group_key(t) for t in self.made]
        return [keys[i] for i in self.order]

    @cached_property
    def group_counts(self) -> Counter[str]:
        return Counter(self.group_keys)


def prepare_trials(trials: list[Trial]) -> PreparedTrials:
    # Every field is read in the order the trials were made (neighbours in memory), then the
    # small values are permuted: reading 100k Trials in sorted order misses the CPU cache on
    # nearly every one and cost ~5x the whole sort.
    names = [t.trial_name for t in trials]
    attempts = [t.attempt for t in trials]
    tasks = [t.task_name for t in trials]
    statuses_in = [t.status for t in trials]
    columns = trial_columns(trials)  # widths do not depend on the order
    # three stable sorts on plain lists beat one sort on (task, attempt, name) tuples by ~30%
    order = list(range(len(trials)))
    if any(a > b for a, b in zip(names, islice(names, 1, None), strict=False)):  # a scan makes them in name order
        order.sort(key=names.__getitem__)
    order.sort(key=attempts.__getitem__)
    order.sort(key=tasks.__getitem__)
    ordered = [trials[i] for i in order]
    statuses = [statuses_in[i] for i in order]
    return PreparedTrials(ordered, statuses, Counter(statuses), columns, trials, order)


class _Prepared(Message):
    def __init__(self, experiment: Experiment, prepared: PreparedTrials) -> None:
        super().__init__()
        self.experiment = experiment
        self.prepared = prepared


class _DiagnoseRead(Message):
    def __init__(self, path: str, info: DiagnoseInfo) -> None:
        super().__init__()
        self.path = path
        self.info = info


class _AgentFiles(Message):
    def __init__(self, path: str, files: list[str], error: str | None) -> None:
        super().__init__()
        self.path = path
        self.files = files
        self.error = error


class TrialsScreen(Screen[None]):
    SCREEN_ID = "trials"
    CSS_PATH = "trials.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [*bindings_for("trials")]

    def __init__(self, key: str, *, clock: Callable[[], datetime] | None = None,
                 poll_interval: float = 0.5) -> None:
        super().__init__()
        self.key = key
        self._clock = clock
        self.poll_interval = poll_interval
        self.experiment: Experiment | None = None
        self.trials: list[Trial] = []  # sorted by task, attempt
        self.rows: list[int] = []  # indices into self.trials that the table shows
        self.groups: list[Group] = []
        self.grouped = False
        self.status_filter: TrialStatus | None = None
        self.focus_filter: tuple[str, str] | None = None  # ("task"|"group", value)
        self.file_index = 0  # which of the source's trial files the log panel shows
        self._agent_files: list[str] = []
        self._agent_index = -1
        self._prepared = PreparedTrials([], [], Counter(), [])
        self._status_counts: Counter[TrialStatus] = Counter()
        self._statuses: list[TrialStatus] = []
        self._columns: list[Column] = []
        self._selected_path: str | None = None
        self._opened_key: tuple[str, str] | None = None
        self._select_timer: Timer | None = None
        self._panel = "log"
        self.marks: set[str] = set()  # trial paths marked with space

    # ------------------------------------------------------------------ host
    @property
    def host(self) -> ConsoleState:
        return console(self)

    def now(self) -> datetime:
        if self._clock is not None:
            return self._clock()
        app_now = getattr(self.app, "now", None)
        return app_now() if callable(app_now) else datetime.now(UTC)

    def fs(self) -> JobFS:
        return cast(JobFS, self.host.source_for(self.key).fs())

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        if hasattr(self.app, "scan_state"):
            from tui.chrome import ConsoleHeader

            yield ConsoleHeader("Trials")
        yield Static("", id="trials-title", classes="status-line")
        with Container(id="trials-body"):
            yield VirtualTable(id="trials-table")
            with Container(id="trials-panels"):
                yield LogTail(id="trials-log", poll_interval=self.poll_interval)
                yield DiagnosePanel(id="trials-diagnose")
        yield KeyFooter()

    @property
    def table(self) -> VirtualTable:
        return self.query_one("#trials-table", VirtualTable)

    @property
    def log_tail(self) -> LogTail:
        return self.query_one("#trials-log", LogTail)

    @property
    def diagnose(self) -> DiagnosePanel:
        return self.query_one("#trials-diagnose", DiagnosePanel)

    def on_mount(self) -> None:
        self._apply_layout(self.app.size.width, self.app.size.height)
        self.load_experiment()
        self.table.focus()

    def on_resize(self, event: Resize) -> None:
        self._apply_layout(event.size.width, event.size.height)

    def _apply_layout(self, width: int, height: int) -> None:
        compact = width < COMPACT_WIDTH or height < COMPACT_HEIGHT
        self.set_class(compact, "-compact")
        self.set_class(self._panel == "diagnose", "-show-diagnose")

    # ------------------------------------------------------------------ data
    def load_experiment(self) -> None:
        exp = self.host.experiment(self.key)
        self.experiment = exp
        # The first load runs on the event loop on purpose: measured, a thread made the first
        # frame slower (the sort holds the GIL either way); refreshes go to a thread.
        self._apply_prepared(prepare_trials(list(exp.trials) if exp is not None else []))

    def _apply_prepared(self, p: PreparedTrials) -> None:
        keep = self._path_to_keep()
        self.rows = []  # (indices into the trials being replaced)
        self.trials = p.trials
        self._prepared = p
        self._statuses = p.statuses
        self._status_counts = p.status_counts
        self._columns = p.columns
        self.refresh_rows(keep_path=keep)

    def _path_to_keep(self) -> str | None:
        # the trial under the cursor now: the shown selection lags a quick key by SELECT_DELAY
        under = self.selected_trial()
        return under.path if under is not None else self._selected_path

    def refresh_rows(self, keep_path: str | None = None) -> None:
        """Recompute what the table shows from the filters; keeps the cursor on the same trial."""
        keep_path = keep_path or self._path_to_keep()
        table = self.table
        if self.grouped:
            pool = self._filtered(with_focus=False)
            self.groups = build_groups([self.trials[i] for i in pool], [self._group_keys[i] for i in pool])
            total = len(pool)
            groups = self.groups
            table.empty_text = "no trials"
            table.set_data(GROUP_COLUMNS, len(groups), lambda i: group_cells(groups[i], total), cursor=0)
        else:
            self.rows = self._filtered(with_focus=True)
            trials, rows = self.trials, self.rows
            cursor = 0
            if keep_path is not None:
                for n, i in enumerate(rows):
                    if trials[i].path == keep_path:
                        cursor = n
                        break
            now = self.now()
            table.empty_text = "no trials match" if self.trials else (
                "no such experiment (gone from the source?)" if self.experiment is None else "no trials yet")
            marks = self.marks
            if marks:
                # a gutter while any trial is marked, as on the list: ✓ and bold on the marked ones
                table.set_data(marked_columns(self._columns), len(rows),
                               lambda n: marked_cells(trial_cells(trials[rows[n]], now), trials[rows[n]].path in marks),
                               cursor=cursor)
            else:
                table.set_data(self._columns, len(rows), lambda n: trial_cells(trials[rows[n]], now), cursor=cursor)
            if not rows:
                self._show_selection(None)
        self._update_title()

    @property
    def _group_keys(self) -> list[str]:
        return self._prepared.group_keys

    @property
    def _group_counts(self) -> Counter[str]:
        return self._prepared.group_counts

    def _filtered(self, with_focus: bool) -> list[int]:
        status = self.status_filter
        focus = self.focus_filter if with_focus else None
        statuses = self._statuses
        if focus is None:
            if status is None:
                return list(range(len(statuses)))
            return [i for i, s in enumerate(statuses) if s is status]
        kind, value = focus
        if kind == "task":
            rows = [i for i, t in enumerate(self.trials) if t.task_name == value]
        else:
            rows = [i for i, k in enumerate(self._group_keys) if k == value]
        if status is not None:
            rows = [i for i in rows if statuses[i] is status]
        return rows

    def breadcrumb(self) -> list[str]:
        """Where the table is: the experiment, then each filter or grouping in force."""
        crumbs = ["trials"]
        if self.grouped:
            crumbs.append("grouped by exception")
        if self.status_filter is not None:
            crumbs.append(f"status {self.status_filter.value}")
        if self.focus_filter is not None:
            kind, value = self.focus_filter
            crumbs.append(f"task {term_safe(value)}" if kind == "task" else f"same failure as {term_safe(value)}")
        return crumbs

    def _update_title(self) -> None:
        exp = self.experiment
        width = max(20, (self.size.width or self.app.size.width or 80) - 2)
        crumbs = " › ".join(self.breadcrumb())
        line1 = Text(no_wrap=True, overflow="ellipsis")
        if exp is None:
            line1.append(f"{term_safe(self.key.split('::')[-1])}: not in the current snapshot", style="bold red")
        else:
            # the crumbs always fit; the experiment id gives way
            line1.append(shorten(term_safe(exp.id), max(8, width - len(crumbs) - 3)), style="bold")
            line1.append(" › ", style="dim")
            line1.append(crumbs, style="bold")
        line2 = Text(no_wrap=True, overflow="ellipsis")
        if self.marks:
            # first on the line: what x acts on must not be the part an 80-column line cuts
            line2.append(f"{len(self.marks)} marked (x resumes them, ctrl+space clears)", style="bold")
            line2.append(" · ", style="dim")
        filtered = self.grouped or self.status_filter is not None or self.focus_filter is not None
        if filtered and not self.grouped:
            n = Counter(self._statuses[i] for i in self.rows)
            line2.append(f"{len(self.rows):,} of {len(self.trials):,} rows: ")
            line2.append(f"{n[TrialStatus.valid]:,} valid", style="green")
            line2.append(" · ")
            line2.append(f"{n[TrialStatus.errored]:,} errored", style="red")
            line2.append(f" · {n[TrialStatus.running]:,} running")
            line2.append("  (esc clears)", style="dim")
        elif self.grouped:
            line2.append(f"{len(self.groups):,} outcomes over {len(self._filtered(with_focus=False)):,} rows"
                         "  (enter opens one, E or esc ungroups)")
        elif exp is not None:
            report = self.host.audit(self.key)
            after = report.trials.get("valid_after_dedupe") if report is not None else None
            line2.append(census_words(exp.counts, valid_after_dedupe=after, score=exp.score, with_score=True))
        self.query_one("#trials-title", Static).update(Text("\n").join([line1, line2]))

    @on(SnapshotUpdated)
    def _on_snapshot(self, message: SnapshotUpdated) -> None:
        exp = self.host.experiment(self.key)
        if self.experiment is not None and exp is self.experiment:
            self.refresh_rows()  # unchanged: only the running clocks move
            return
        if exp is None or self.experiment is None:
            self.load_experiment()
            return
        # A live job re-prepares on every poll: 100k rows cost ~0.5 s of sorting, which a thread
        # keeps off the event loop; the table shows the previous poll until the new one is ready.
        self._prepare_refresh(exp)

    @work(thread=True, exclusive=True, group="trials-prepare", exit_on_error=False)
    def _prepare_refresh(self, exp: Experiment) -> None:
        self.post_message(_Prepared(exp, prepare_trials(list(exp.trials))))

    @on(_Prepared)
    def _on_prepared(self, message: _Prepared) -> None:
        if self.host.experiment(self.key) is not message.experiment:
            return  # a newer snapshot is being prepared
        self.experiment = message.experiment
        self._apply_prepared(message.prepared)
        # the selected trial may have finished: re-read its diagnosis
        trial = self.selected_trial()
        if trial is not None:
            self._load_diagnose(trial)

    # ------------------------------------------------------------------ selection
    def selected_trial(self) -> Trial | None:
        if self.grouped or not self.rows:
            return None
        cursor = self.table.cursor
        if 0 <= cursor < len(self.rows):
            return self.trials[self.rows[cursor]]
        return None

    @on(VirtualTable.Highlighted, "#trials-table")
    def _on_highlighted(self, message: VirtualTable.Highlighted) -> None:
        if self.grouped:
            return
        if self._select_timer is not None:
            self._select_timer.stop()
        self._select_timer = self.set_timer(SELECT_DELAY, self._select_now)

    def _select_now(self) -> None:
        self._select_timer = None
        self._show_selection(self.selected_trial())

    @on(VirtualTable.Selected, "#trials-table")
    def _on_selected(self, message: VirtualTable.Selected) -> None:
        if self.grouped:
            group = self.groups[message.index]
            self.grouped = False
            self.focus_filter = ("group", group.key)
            self.refresh_rows()
            return
        self._select_now()
        if self._panel == "log":
            self.log_tail.view.focus()
        else:
            self.diagnose.focus()

    def _show_selection(self, trial: Trial | None) -> None:
        if trial is None:
            self._selected_path = None
            self._opened_key = None
            self.log_tail.clear("no trial selected")
            self.diagnose.show(None, "no trial selected")
            return
        changed = trial.path != self._selected_path
        self._selected_path = trial.path
        if changed:
            self._agent_files = []
            self._agent_index = -1
            if self._is_folder(self.file_index):
                self.file_index = 0
        self._open_file(trial)
        if changed:
            self._load_diagnose(trial)

    def trial_files(self) -> tuple[TrialFile, ...]:
        try:
            return tuple(getattr(self.host.source_for(self.key), "trial_files", ()))
        except KeyError:
            return ()

    def _is_folder(self, index: int) -> bool:
        files = self.trial_files()
        return index < len(files) and files[index].rel.endswith("/")

    def _open_file(self, trial: Trial) -> None:
        files = self.trial_files()
        if self.file_index >= len(files):
            self._opened_key = None
            self.log_tail.clear(f"{trial.trial_name}: this source has no file {self.file_index + 1}")
            return
        tf = files[self.file_index]
        if tf.rel.endswith("/"):
            if not self._agent_files:
                self._list_agent_files(trial, tf.rel)
                return
            rel = f"{tf.rel}{self._agent_files[self._agent_index % len(self._agent_files)]}"
        else:
            rel = tf.rel
        key = (trial.path, rel)
        if key == self._opened_key:
            return
        self._opened_key = key
        exp = self.experiment
        title = f"{trial.trial_name}/{rel}"
        try:
            path = inside(exp.path if exp else "", trial.path, rel)
        except UnsafePath as exc:
            self.log_tail.open(ErrorReader(str(exc)), title)
            return
        self.log_tail.open(FSReader(self.fs(), path), title)

    # ------------------------------------------------------------------ workers (IO only)
    @work(exclusive=True, group="trials-diagnose", exit_on_error=False)
    async def _load_diagnose(self, trial: Trial) -> None:
        exp = self.experiment
        info = DiagnoseInfo(
            title=trial.trial_name,
            status=trial.status.value,
            reward=fmt_reward(trial.reward),
            exception_type=trial.exception_type,
            exception_message=trial.exception_message,
            failure_class=trial.failure_class,
            meaning=FAILURE_CLASS_MEANING.get(trial.failure_class or "") if trial.failure_class else None,
            score_note=score_effect(trial, getattr(self.app, "policy", None)),
        )
        key = group_key(trial)
        if trial.exception_type or trial.parse_error or trial.status == TrialStatus.errored:
            info.same_count = max(0, self._group_counts.get(key, 0) - 1)
            info.same_label = f"failed the same way ({key})"
        if exp is None:
            info.problems.append("the experiment is gone from its source")
        else:
            ev = await self.host.source_for(self.key).evidence(exp, trial)
            info.exception_type = info.exception_type or ev.exception_type
            info.exception_message = info.exception_message or ev.exception_message
            info.traceback = ev.traceback
            info.verifier_label = ev.verifier_label
            info.verifier_excerpt = ev.verifier_excerpt
            info.problems += ev.problems
        self.post_message(_DiagnoseRead(trial.path, info))

    @work(exclusive=True, group="trials-agent-files", exit_on_error=False)
    async def _list_agent_files(self, trial: Trial, folder: str) -> None:
        exp = self.experiment
        try:
            agent_dir = inside(exp.path if exp else "", trial.path, folder)
            names = await self.fs().list_dir(agent_dir)
        except FileNotFoundError:
            self.post_message(_AgentFiles(trial.path, [], f"no {folder} dir"))
            return
        except Exception as exc:
            self.post_message(_AgentFiles(trial.path, [], str(exc)))
            return
        files = [n for n in names if n.endswith((".txt", ".log")) or n == "trajectory.json"]
        # the trajectory first: it is what people open most
        files.sort(key=lambda n: (n != "trajectory.json", n))
        self.post_message(_AgentFiles(trial.path, files, None))

    # ------------------------------------------------------------------ handlers
    @on(_DiagnoseRead)
    def _on_diagnose_read(self, message: _DiagnoseRead) -> None:
        if message.path == self._selected_path:
            self.diagnose.show(message.info)

    @on(_AgentFiles)
    def _on_agent_files(self, message: _AgentFiles) -> None:
        trial = self.selected_trial()
        if trial is None or trial.path != message.path or not self._is_folder(self.file_index):
            return
        if not message.files:
            self._opened_key = None
            self.log_tail.clear(f"{trial.trial_name}: {message.error or 'no logs in the folder'}")
            return
        self._agent_files = message.files
        self._agent_index = 0
        self._open_file(trial)

    # ------------------------------------------------------------------ actions
    def action_group_by_exception(self) -> None:
        self.grouped = not self.grouped
        if self.grouped:
            self.focus_filter = None
        self.refresh_rows()

    def action_cycle_status(self) -> None:
        i = STATUS_CYCLE.index(self.status_filter)
        self.status_filter = STATUS_CYCLE[(i + 1) % len(STATUS_CYCLE)]
        self.refresh_rows()

    def action_task_attempts(self) -> None:
        trial = self.selected_trial()
        if self.focus_filter is not None and self.focus_filter[0] == "task":
            self.focus_filter = None
        elif trial is not None:
            self.focus_filter = ("task", trial.task_name)
            self.status_filter = None
        self.refresh_rows()

    def action_same_failure(self) -> None:
        trial = self.selected_trial()
        if trial is None:
            return
        key = group_key(trial)
        if not (trial.exception_type or trial.parse_error or trial.status == TrialStatus.errored):
            self.notify("the selected trial did not fail", severity="warning")
            return
        self.focus_filter = ("group", key)
        self.status_filter = None
        self.refresh_rows()

    def action_mark(self) -> None:
        trial = self.selected_trial()
        if trial is None:
            return
        self.marks ^= {trial.path}
        self.refresh_rows(keep_path=trial.path)
        move(self.table, "down")

    def action_clear_marks(self) -> None:
        self.marks.clear()
        self.refresh_rows()

    def action_invert_marks(self) -> None:
        self.marks ^= {self.trials[i].path for i in self.rows}
        self.refresh_rows()

    def action_resume_shown(self) -> None:
        """Resume exactly the errored trials on screen: the marked ones, else the highlighted
        group when grouped, else the rows the filters leave (f: one failure, s: a status, a: one task)."""
        if self.marks:
            chosen = [t for t in self.trials if t.path in self.marks]
        elif self.grouped:
            index = self.table.cursor
            if not self.groups or not 0 <= index < len(self.groups):
                return
            key = self.groups[index].key
            chosen = [t for t, k in zip(self.trials, self._group_keys, strict=True) if k == key]
        else:
            chosen = [self.trials[i] for i in self.rows]
        paths = [t.path for t in chosen if t.status != TrialStatus.valid]
        if not paths:
            self.notify("no errored trial among those shown: filter them with f, s or g first", severity="warning")
            return
        self.post_message(RequestPlan("resume", self.key, {"paths": paths}))

    def action_switch_focus(self) -> None:
        if self.table.has_focus and not self.has_class("-zoom-log"):
            self.log_tail.query_one(LogView).focus()
        else:
            self.table.focus()

    def action_zoom_log(self) -> None:
        zoom = not self.has_class("-zoom-log")
        self.set_class(zoom, "-zoom-log")
        if zoom:
            self._panel = "log"
            self.set_class(False, "-show-diagnose")
            self.log_tail.query_one(LogView).focus()
        else:
            self.table.focus()

    def action_toggle_panel(self) -> None:
        self._panel = "diagnose" if self._panel == "log" else "log"
        self.set_class(self._panel == "diagnose", "-show-diagnose")

    def action_show_file(self, number: int) -> None:
        """Open the source's file `number` (1-based); a folder's key again shows its next file."""
        trial = self.selected_trial()
        index = number - 1
        if index == self.file_index and self._is_folder(index) and self._agent_files:
            self._agent_index = (self._agent_index + 1) % len(self._agent_files)
        elif index != self.file_index:
            self._agent_files = []
            self._agent_index = -1
        self.file_index = index
        self._panel = "log"
        self.set_class(False, "-show-diagnose")
        if trial is not None:
            self._open_file(trial)

    def action_cursor(self, how: str) -> None:
        # the focused list moves: the table, or the log when it has focus
        focused = self.focused
        if focused is None or not move(focused, how):
            move(self.table, how)

    def action_copy(self) -> None:
        trial = self.selected_trial()
        exp = self.experiment
        if trial is None or exp is None:
            self.notify("no trial selected", severity="warning")
            return
        copy_location(self, self.key, posixpath.join(exp.path, trial.path))

    def action_hand_over(self, kind: str) -> None:
        trial = self.selected_trial()
        exp = self.experiment
        if trial is None or exp is None:
            self.notify("no trial selected", severity="warning")
            return
        try:
            if kind == "shell":
                path = inside(exp.path, trial.path)
            else:
                files = self.trial_files()
                tf = files[self.file_index] if self.file_index < len(files) else None
                if tf is None or (tf.rel.endswith("/") and not self._agent_files):
                    self.notify("no file shown to open", severity="warning")
                    return
                rel = f"{tf.rel}{self._agent_files[self._agent_index % len(self._agent_files)]}" \
                    if tf.rel.endswith("/") else tf.rel
                path = inside(exp.path, trial.path, rel)
        except UnsafePath as exc:
            self.notify(str(exc), severity="error")
            return
        self.post_message(HandOver(kind, self.key, path))

    def action_search_log(self) -> None:
        self._panel = "log"
        self.set_class(False, "-show-diagnose")
        self.log_tail.action_search()

    def action_log_match(self, direction: int) -> None:
        self.log_tail._step_match(direction)

    def action_log_wrap(self) -> None:
        self.log_tail.action_toggle_wrap()

    def action_log_follow(self) -> None:
        self.log_tail.follow = True
        self.log_tail.scroll_to_end()

    def action_results(self) -> None:
        self.post_message(OpenView("results", [self.key]))

    def action_back(self) -> None:
        if self.grouped or self.status_filter is not None or self.focus_filter is not None:
            self.grouped = False
            self.status_filter = None
            self.focus_filter = None
            self.refresh_rows()
            return
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
