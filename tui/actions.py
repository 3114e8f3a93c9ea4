"""The one registry of user actions.

Every screen's `BINDINGS`, the `?` help screen and the command palette are generated from
`ACTIONS`, so a key is defined once and each binding carries an id that a keymap in the
config can remap (`App.set_keymap({"experiments.filter": "f"})`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from textual.binding import Binding, BindingType

GLOBAL = "global"


@dataclass(frozen=True)
class ActionSpec:
    id: str
    key: str
    action: str
    description: str
    screen: str
    show: bool = True
    help: str = ""  # the longer text of the help screen and palette; the footer shows `description`
    key_display: str | None = None
    priority: bool = False
    palette: bool = True

    @property
    def long(self) -> str:
        return self.help or self.description

    def display_key(self, keymap: Mapping[str, str] | None = None) -> str:
        key = (keymap or {}).get(self.id, self.key)
        if key != self.key:
            return key
        return self.key_display or key


# Column ids of the experiments table, in display order; digit keys sort by them.
EXPERIMENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("source", "source"),
    ("id", "id"),
    ("benchmark", "benchmark"),
    ("model", "model"),
    ("state", "state"),
    ("progress", "progress"),
    ("score", "score"),
    ("errors", "error %"),
    ("verdict", "audit"),
    ("age", "age"),
)
_DIGITS = "1234567890"


def _sort_actions() -> list[ActionSpec]:
    return [
        ActionSpec(
            id=f"experiments.sort_{col}",
            key=_DIGITS[i],
            action=f"sort_by('{col}')",
            description=f"Sort {label}",
            screen="experiments",
            show=False,
            help=f"Sort by {label}; the same key again reverses",
        )
        for i, (col, label) in enumerate(EXPERIMENT_COLUMNS)
    ]


def _scroll_actions(screen: str, what: str, keys_jk: bool) -> list[ActionSpec]:
    """Arrow and page keys that scroll a dialog's text whatever control has focus (a dialog
    focuses its safe button or its filter box, which would otherwise swallow them)."""
    moves = [("down", "down", "Down"), ("up", "up", "Up"), ("page_down", "pagedown", "Page down"),
             ("page_up", "pageup", "Page up")]
    out = []
    for move, key, label in moves:
        if keys_jk and move in ("down", "up"):
            key = f"{key},{'j' if move == 'down' else 'k'}"
        out.append(ActionSpec(f"{screen}.scroll_{move}", key, f"scroll('{move}')", f"Scroll {what}: {label.lower()}",
                              screen, show=False, palette=False, priority=True,
                              help=f"{label}: scroll {what}"))
    return out


def _move_actions(screen: str) -> list[ActionSpec]:
    """vi keys in every list (arrows, page keys, home and end work there too)."""
    return [
        ActionSpec(f"{screen}.cursor_down", "j", "cursor('down')", "Down", screen, show=False, palette=False,
                   help="Next row"),
        ActionSpec(f"{screen}.cursor_up", "k", "cursor('up')", "Up", screen, show=False, palette=False,
                   help="Previous row"),
        ActionSpec(f"{screen}.cursor_top", "g", "cursor('top')", "Top", screen, show=False, palette=False,
                   help="First row"),
        ActionSpec(f"{screen}.cursor_bottom", "G", "cursor('bottom')", "Bottom", screen, show=False, palette=False,
                   help="Last row"),
    ]


def _copy_action(screen: str, what: str) -> ActionSpec:
    return ActionSpec(f"{screen}.copy", "y", "copy", "Copy", screen, show=False,
                      help=f"Copy {what} to the clipboard (OSC 52: works over ssh)")


ACTIONS: tuple[ActionSpec, ...] = (
    # everywhere
    ActionSpec("app.help", "question_mark", "help", "Help", GLOBAL, key_display="?",
               help="Keys of this screen"),
    ActionSpec("app.command", "colon", "command_line", "Command", GLOBAL, show=False, key_display=":",
               help="Command line: a view, a source or host, or an action by name (tab completes, ↑ history)"),
    # Textual adds its own ctrl+p only when no binding names the palette; ours does, so say it here
    ActionSpec("app.palette", "ctrl+p", "command_palette", "Commands", GLOBAL, show=False,
               key_display="ctrl+p", priority=True, palette=False, help="Command palette"),
    ActionSpec("app.log", "L", "show_log", "Log", GLOBAL, show=False, help="Log of errors and notices"),
    ActionSpec("app.quit_ctrl_c", "ctrl+c", "quit", "Quit", GLOBAL, show=False, priority=True, palette=False,
               key_display="ctrl+c", help="Quit evaldesk"),
    ActionSpec("app.refresh", "r", "refresh", "Refresh", GLOBAL, help="Scan every source again now"),
    ActionSpec("app.pause", "p", "toggle_pause", "Pause", GLOBAL, show=False,
               help="Pause polling of every source; again to resume"),
    # experiments (home)
    # priority: the table's own enter would otherwise hide it from the footer
    ActionSpec("experiments.open", "enter", "open_trials", "Trials", "experiments", key_display="enter",
               priority=True, help="Trials of the selected experiment"),
    ActionSpec("experiments.audit", "a", "audit", "Audit", "experiments",
               help="Audit the selected experiment (with marks: the verdicts of every marked one)"),
    ActionSpec("experiments.monitor", "m", "monitor", "Monitor", "experiments",
               help="Live monitor of the selected experiment"),
    ActionSpec("experiments.results", "v", "results", "Results", "experiments", show=False,
               help="Results: per-dataset figures, plots, the tool's summary"),
    ActionSpec("experiments.mark", "space", "mark", "Mark", "experiments", key_display="space",
               help="Mark the row (again: unmark); a, R, D, X and U then act on every marked row"),
    ActionSpec("experiments.clear_marks", "ctrl+space,ctrl+@", "clear_marks", "Clear marks", "experiments",
               show=False, key_display="ctrl+space", help="Clear every mark"),
    ActionSpec("experiments.invert_marks", "asterisk", "invert_marks", "Invert marks", "experiments", show=False,
               key_display="*", help="Mark the rows shown that are not marked, unmark the others"),
    ActionSpec("experiments.dedupe", "D", "write_marked('dedupe')", "Dedupe", "experiments", show=False,
               help="Dedupe the marked runs (or the selected one): one preview of every plan, one confirmation"),
    ActionSpec("experiments.resume", "X", "write_marked('resume')", "Resume", "experiments", show=False,
               help="Resume the errored trials of the marked runs (or the selected one): one preview, one "
                    "confirmation"),
    ActionSpec("experiments.undo", "U", "write_marked('undo')", "Undo", "experiments", show=False,
               help="Undo the last write of each marked run (or the selected one): one preview, one confirmation"),
    ActionSpec("experiments.filter", "slash", "filter", "Filter", "experiments", key_display="/",
               help="Filter rows: text or regex, ! inverts, recalls the last"),
    ActionSpec("experiments.clear_filter", "escape", "clear_filter", "Clear filter", "experiments",
               show=False, key_display="esc", help="Clear the filter"),
    ActionSpec("experiments.sort_next", "s", "sort_next", "Sort", "experiments",
               help="Sort by the next column"),
    ActionSpec("experiments.sort_reverse", "S", "sort_reverse", "Reverse", "experiments", show=False,
               help="Reverse the sort direction"),
    *_sort_actions(),
    *_move_actions("experiments"),
    _copy_action("experiments", "the selected experiment's path"),
    ActionSpec("experiments.shell", "exclamation_mark", "shell", "Shell", "experiments", show=False,
               key_display="!", help="Open a shell in the job dir (on its host over ssh -t for a remote source)"),
    ActionSpec("experiments.report", "R", "report", "Report", "experiments", show=False,
               help="Write the HTML report of the selected experiment, or one of every marked one (o opens it)"),
    ActionSpec("experiments.describe", "d", "describe", "Describe", "experiments", show=False,
               help="Describe the selected row: every field, whole (esc closes)"),
    ActionSpec("experiments.quit", "q", "app.quit", "Quit", "experiments", help="Quit evaldesk"),
    # audit
    ActionSpec("audit.run", "x", "run_remediation", "Fix", "audit",
               help="Run the fix of the selected check (dry run first, then confirm)"),
    ActionSpec("audit.run_enter", "enter", "run_remediation", "Fix", "audit", show=False, key_display="⏎",
               palette=False, help="Run the fix of the selected check"),
    ActionSpec("audit.undo", "u", "undo", "Undo", "audit",
               help="Undo the last dedupe or resume of this job (a resume only before new trials; confirmed)"),
    ActionSpec("audit.output", "o", "open_output", "Output", "audit",
               help="Output of this job's last resume or re-run command, live while it runs"),
    ActionSpec("audit.trials", "t", "open_trials", "Trials", "audit", help="Trials of this experiment"),
    ActionSpec("audit.report", "R", "report", "Report", "audit",
               help="Write the HTML report of this experiment (o opens it)"),
    ActionSpec("audit.back", "escape", "back", "Back", "audit", key_display="esc", help="Back to the list"),
    *_move_actions("audit"),
    _copy_action("audit", "the experiment's path"),
    ActionSpec("audit.back_q", "q", "back", "Back", "audit", show=False, palette=False,
               help="Back to the list"),
    # trials
    ActionSpec("trials.group", "E", "group_by_exception", "Group", "trials",
               help="Group attempts by exception type, with counts"),
    *_move_actions("trials"),
    _copy_action("trials", "the selected trial's dir"),
    ActionSpec("trials.pager", "o", "hand_over('pager')", "Pager", "trials", show=False,
               help="Open the shown log in $PAGER (on the host over ssh -t for a remote source)"),
    ActionSpec("trials.editor", "e", "hand_over('editor')", "Editor", "trials", show=False,
               help="Open the shown log in $EDITOR (vi on a remote host)"),
    ActionSpec("trials.shell", "exclamation_mark", "hand_over('shell')", "Shell", "trials", show=False,
               key_display="!", help="Open a shell in the trial dir (on its host over ssh -t for a remote source)"),
    ActionSpec("trials.mark", "space", "mark", "Mark", "trials", show=False, key_display="space",
               help="Mark the trial (again: unmark); x then resumes the marked ones"),
    ActionSpec("trials.clear_marks", "ctrl+space,ctrl+@", "clear_marks", "Clear marks", "trials", show=False,
               key_display="ctrl+space", help="Clear every mark"),
    ActionSpec("trials.invert_marks", "asterisk", "invert_marks", "Invert marks", "trials", show=False,
               key_display="*", help="Mark the trials shown that are not marked, unmark the others"),
    ActionSpec("trials.status", "s", "cycle_status", "Status", "trials",
               help="Filter by status: all / valid / errored / running"),
    # shown in ? and the palette, not the footer: at 80 columns the footer keeps `? Help`
    ActionSpec("trials.attempts", "a", "task_attempts", "Attempts", "trials", show=False,
               help="Show the selected task's other attempts"),
    ActionSpec("trials.same_failure", "f", "same_failure", "Same", "trials",
               help="Filter to the trials that failed the same way"),
    ActionSpec("trials.resume", "x", "resume_shown", "Resume", "trials",
               help="Resume the errored trials shown (or the highlighted group): dry run first, then confirm"),
    ActionSpec("trials.focus", "tab", "switch_focus", "Log", "trials", key_display="tab",
               help="Move between the table and the log (the log scrolls with the arrows, pgup/pgdn)"),
    ActionSpec("trials.zoom", "z", "zoom_log", "Zoom", "trials", show=False,
               help="Zoom the log to the whole screen (again: back to the table)"),
    ActionSpec("trials.panel", "d", "toggle_panel", "Panel", "trials", show=False,
               help="Switch the bottom panel between diagnose and log"),
    ActionSpec("trials.file_log", "1", "show_file(1)", "Log: file 1 (Harbor: trial.log)", "trials", show=False),
    ActionSpec("trials.file_exception", "2", "show_file(2)", "Log: file 2 (Harbor: exception.txt)", "trials",
               show=False),
    ActionSpec("trials.file_stdout", "3", "show_file(3)", "Log: file 3 (Harbor: verifier stdout)", "trials",
               show=False),
    ActionSpec("trials.file_stderr", "4", "show_file(4)", "Log: file 4 (Harbor: verifier stderr)", "trials",
               show=False),
    ActionSpec("trials.file_agent", "5", "show_file(5)", "Log: file 5 (Harbor: agent logs; again: next)", "trials",
               show=False),
    ActionSpec("trials.search", "slash", "search_log", "Search", "trials", help="Search the log (n/N: next/previous)",
               key_display="/"),
    ActionSpec("trials.next_match", "n", "log_match(1)", "Next match in the log", "trials", show=False),
    ActionSpec("trials.prev_match", "N", "log_match(-1)", "Previous match in the log", "trials", show=False),
    ActionSpec("trials.wrap", "w", "log_wrap", "Wrap", "trials", show=False, help="Wrap long log lines (again: off)"),
    ActionSpec("trials.follow", "end", "log_follow", "Log: follow new lines (End in the log)", "trials",
               show=False),
    ActionSpec("trials.results", "v", "results", "Results", "trials", show=False,
               help="Results: per-dataset figures, plots, the tool's summary"),
    ActionSpec("trials.back", "escape", "back", "Back", "trials", key_display="esc",
               help="Clear the filter or grouping, else go back"),
    ActionSpec("trials.back_q", "q", "back", "Back", "trials", show=False, palette=False),
    # monitor
    ActionSpec("monitor.next", "right_square_bracket", "cycle(1)", "Next", "monitor", key_display="]",
               help="Next monitored experiment"),
    ActionSpec("monitor.prev", "left_square_bracket", "cycle(-1)", "Previous", "monitor", show=False,
               key_display="[", help="Previous monitored experiment"),
    ActionSpec("monitor.trials", "t", "open_trials", "Trials", "monitor", help="Trials of this experiment"),
    ActionSpec("monitor.audit", "a", "audit", "Audit", "monitor", help="Audit this experiment"),
    ActionSpec("monitor.back", "escape", "back", "Back", "monitor", key_display="esc", help="Back to the list"),
    *_move_actions("monitor"),
    _copy_action("monitor", "the selected running trial's dir"),
    ActionSpec("monitor.back_q", "q", "back", "Back", "monitor", show=False, palette=False,
               help="Back to the list"),
    # a write's command output
    ActionSpec("command.monitor", "m", "monitor", "Monitor", "command", help="Live monitor of this experiment"),
    ActionSpec("command.audit", "a", "audit", "Audit", "command", help="Audit this experiment"),
    ActionSpec("command.back", "escape", "back", "Back", "command", key_display="esc",
               help="Back (the command keeps running)"),
    ActionSpec("command.back_q", "q", "back", "Back", "command", show=False, palette=False, help="Back"),
    # confirm dialog
    ActionSpec("confirm.yes", "y", "confirm", "Apply", "confirm", help="Confirm and apply"),
    ActionSpec("confirm.no", "n", "cancel", "Cancel", "confirm", help="Cancel: change nothing"),
    ActionSpec("confirm.escape", "escape", "cancel", "Cancel", "confirm", show=False, key_display="esc",
               palette=False, help="Cancel: change nothing"),
    *_scroll_actions("confirm", "the preview", keys_jk=True),
    # an unfinished write found at start; a target locked by another writer
    ActionSpec("recovery.finish", "f", "finish", "Finish", "recovery",
               help="Carry the interrupted write on to the end"),
    ActionSpec("recovery.rollback", "b", "rollback", "Roll back", "recovery",
               help="Put back everything the interrupted write did"),
    ActionSpec("recovery.later", "l", "later", "Later", "recovery", help="Leave it; asked again at the next start"),
    ActionSpec("recovery.escape", "escape", "later", "Later", "recovery", show=False, key_display="esc",
               palette=False, help="Leave it; asked again at the next start"),
    ActionSpec("lock.break", "b", "break", "Break lock", "lock",
               help="Break a stale lock (its holder is gone) and carry on"),
    ActionSpec("lock.close", "escape", "close", "Close", "lock", key_display="esc", help="Change nothing"),
    # results
    ActionSpec("results.trials", "t", "open_trials", "Trials", "results", help="Trials of this experiment"),
    ActionSpec("results.audit", "a", "audit", "Audit", "results", help="Audit this experiment"),
    ActionSpec("results.back", "escape", "back", "Back", "results", key_display="esc", help="Back"),
    ActionSpec("results.back_q", "q", "back", "Back", "results", show=False, palette=False, help="Back"),
    # inputs dialog (values a write needs before it is planned)
    ActionSpec("inputs.submit", "ctrl+s", "submit", "Continue", "inputs",
               help="Go on with these values (enter in the last field too)"),
    ActionSpec("inputs.cancel", "escape", "cancel", "Cancel", "inputs", key_display="esc",
               help="Cancel: nothing is launched"),
    # report written
    ActionSpec("report.open", "o", "open", "Open", "report", help="Open the report with the system opener"),
    ActionSpec("report.close", "escape", "close", "Close", "report", key_display="esc", help="Close"),
    ActionSpec("report.close_q", "q", "close", "Close", "report", show=False, palette=False, help="Close"),
    # describe popup
    ActionSpec("describe.close", "escape,q,d", "close", "Close", "describe", key_display="esc", help="Close"),
    *_scroll_actions("describe", "the fields", keys_jk=True),
    # help, log
    ActionSpec("help.close", "escape", "close", "Close", "help", key_display="esc", help="Close help"),
    *_scroll_actions("help", "the keys", keys_jk=False),
    ActionSpec("log.close", "escape", "close", "Back", "log", key_display="esc", help="Back"),
    ActionSpec("log.close_q", "q", "close", "Back", "log", show=False, palette=False, help="Back"),
    ActionSpec("log.clear", "c", "clear", "Clear", "log", help="Clear the log"),
    *_move_actions("log"),
    _copy_action("log", "the selected message"),
    # journal of writes (:journal)
    ActionSpec("journal.close", "escape", "close", "Back", "journal", key_display="esc", help="Back"),
    ActionSpec("journal.close_q", "q", "close", "Back", "journal", show=False, palette=False, help="Back"),
    *_move_actions("journal"),
)

# The views `:` switches to (tui/commandline.py): name, aliases, the view, what it shows
VIEWS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("list", ("experiments", "exp", "ls", "home"), "list", "The experiments list"),
    ("trials", ("t", "tr"), "trials", "Trials of the selected experiment"),
    ("audit", ("a",), "audit", "Audit of the selected (or marked) experiments"),
    ("monitor", ("m", "mon"), "monitor", "Live monitor of the selected (or marked) experiments"),
    ("results", ("v", "res"), "results", "Results of the selected experiment"),
    ("journal", ("j", "writes"), "journal", "Every write evaldesk made, newest first"),
    ("log", ("l",), "log", "Log of errors and notices"),
    ("help", ("h", "keys"), "help", "Keys of this screen"),
    ("quit", ("q", "q!"), "quit", "Quit evaldesk"),
)

BY_ID: dict[str, ActionSpec] = {a.id: a for a in ACTIONS}
assert len(BY_ID) == len(ACTIONS), "action ids must be unique"


def actions_for(screen: str, include_global: bool = True) -> list[ActionSpec]:
    scopes: Iterable[str] = (screen, GLOBAL) if include_global else (screen,)
    return [a for a in ACTIONS if a.screen in scopes]


def bindings_for(screen: str) -> list[BindingType]:
    return [
        Binding(
            a.key,
            a.action,
            a.description,
            show=a.show,
            key_display=a.key_display,
            priority=a.priority,
            tooltip=a.long,
            id=a.id,
        )
        for a in ACTIONS
        if a.screen == screen
    ]
