"""The audit checklist of one experiment; rows with a fix run it through a confirmed dry run."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import OptionList, Static

from services.core.census import census_words
from services.core.models import AuditReport, Experiment
from services.core.text import term_safe
from services.remediations.registry import REMEDIATIONS
from tui.actions import bindings_for
from tui.chrome import ConsoleHeader
from tui.context import ConsoleState, console
from tui.external import copy_location
from tui.messages import CommandChanged, Notice, OpenView, RequestPlan, RequestReport, SnapshotUpdated
from tui.navigation import move
from widgets.checklist import Checklist, ChecklistItem
from widgets.footer import KeyFooter
from widgets.state_badge import state_badge
from widgets.verdict_style import verdict_style


def verdict_text(report: AuditReport) -> Text:
    """The verdict and why, in the words of the check that decided it
    (services.audit.verdict.decide): what to run, or what a person must decide."""
    text = Text.assemble(("Verdict: ", "bold"), (report.verdict.upper(), verdict_style(report.verdict, bold=True)),
                         f" — {term_safe(report.reason)}")
    if report.fix and report.fix in REMEDIATIONS:
        text.append("  [x runs it]", style="dim")
    if report.ask and report.ask != report.reason:
        text.append(f"\nDecide: {term_safe(report.ask)}")
    return text


def checklist_items(report: AuditReport) -> list[ChecklistItem]:
    return [
        ChecklistItem(
            id=c.id,
            status=c.status.value,
            title=c.title,
            evidence=c.evidence,
            action=c.action,
            runnable=c.remediation if c.remediation in REMEDIATIONS else None,
        )
        for c in report.checks
    ]


class AuditScreen(Screen[None]):
    SCREEN_ID = "audit"
    CSS_PATH = "audit.tcss"
    BINDINGS = bindings_for("audit")

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    @property
    def evaldesk(self) -> ConsoleState:
        return console(self)

    def compose(self) -> ComposeResult:
        yield ConsoleHeader("Audit")
        yield Static("", id="audit-title", classes="status-line")
        command = Static("", id="audit-command", classes="status-line")
        command.display = False
        yield command
        yield Checklist(id="checks")
        with VerticalScroll(id="audit-notes"):
            yield Static("", id="verdict")
            yield Static("", id="notes")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.render_report()
        checklist = self.query_one(Checklist)
        checklist.focus()
        report = self.evaldesk.audit(self.key)
        if report is not None and checklist.items:
            # start on what needs doing: a row evaldesk can fix, else the first failing check
            ids = [i.id for i in checklist.items]
            decider = [c for c in report.checks if c.id == report.decided_by]
            order = ([c for c in decider if c.remediation] + [c for c in report.checks if c.remediation]
                     + decider + [c for c in report.checks if c.status == "fail"])
            target = next((ids.index(c.id) for c in order if c.id in ids), None)
            if target is not None:
                checklist.highlighted = target

    @on(SnapshotUpdated)
    def _on_snapshot(self, message: SnapshotUpdated) -> None:
        self.render_report()

    @on(CommandChanged)
    def _on_command(self, message: CommandChanged) -> None:
        if message.key == self.key:
            self.render_report()

    def render_report(self) -> None:
        exp = self.evaldesk.experiment(self.key)
        report = self.evaldesk.audit(self.key)
        title = self.query_one("#audit-title", Static)
        if exp is None or report is None:
            title.update(Text(f"{term_safe(self.key.split('::', 1)[-1])}: not in the latest scan", style="bold red"))
            self.query_one(Checklist).set_items([])
            return
        title.update(self._title(exp, report))
        command = self._command_line()
        line = self.query_one("#audit-command", Static)
        line.display = command is not None
        line.update(command or "")
        self.query_one(Checklist).set_items(checklist_items(report))
        self.query_one("#verdict", Static).update(verdict_text(report))
        notes = Text("\n").join(Text(f"• {term_safe(n)}") for n in report.notes) if report.notes else Text("")
        self.query_one("#notes", Static).update(notes)

    @staticmethod
    def _title(exp: Experiment, report: AuditReport) -> Text:
        text = Text.assemble(state_badge(exp.state.value, compact=True), " ", (term_safe(exp.id), "bold"), "\n")
        after = report.trials.get("valid_after_dedupe")
        ef = "—" if report.error_fraction is None else f"{100 * report.error_fraction:.1f}%"
        if after is not None:
            ef += " after dedupe"
        words = census_words(exp.counts, valid_after_dedupe=after, score=report.score, with_score=True)
        text.append(f"{words} · error gate {ef}", style="dim")
        return text

    def _command_line(self) -> Text | None:
        run = self.evaldesk.command_runs.get(self.key)
        if run is None:
            return None
        if run.running:
            return Text(f"{run.action} running on {run.host or 'this machine'} — o shows its output", style="bold blue")
        return Text(f"last {run.action}: {run.message or run.state} (o: output)",
                    style="bold red" if run.state == "failed" else "dim")

    # ---- actions ------------------------------------------------------------------------

    def action_run_remediation(self) -> None:
        item = self.query_one(Checklist).selected_item
        if item is None:
            return
        if item.runnable:
            self.post_message(RequestPlan(item.runnable, self.key))
            return
        hint = f"Recommended: {item.action}" if item.action else "Nothing to do for this check."
        self.post_message(Notice("information", item.title, f"No fix evaldesk can run here: {item.evidence}. {hint}"))

    @on(OptionList.OptionSelected, "#checks")
    def _on_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_run_remediation()

    def action_undo(self) -> None:
        self.post_message(RequestPlan("undo", self.key))

    def action_open_output(self) -> None:
        self.post_message(OpenView("command", [self.key]))

    def action_report(self) -> None:
        self.post_message(RequestReport([self.key]))

    def action_open_trials(self) -> None:
        self.post_message(OpenView("trials", [self.key]))

    def action_cursor(self, how: str) -> None:
        move(self.query_one(Checklist), how)

    def action_copy(self) -> None:
        exp = self.evaldesk.experiment(self.key)
        if exp is not None:
            copy_location(self, self.key, exp.path)

    def action_back(self) -> None:
        self.dismiss()
