"""The output of a command a write runs (a resume, a re-run), streaming as it arrives: what
runs and where, stdout and stderr, then how it ended (exit code, the SLURM job it submitted).

The App keeps the output (it outlives this screen) and forwards each chunk here."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Log, Static

from services.remediations.job_commands import printable
from tui.actions import bindings_for
from tui.chrome import ConsoleHeader
from tui.context import CommandRun, ConsoleState, console
from tui.messages import CommandChanged, CommandOutput, OpenView, SnapshotUpdated
from widgets.footer import KeyFooter

STATE_STYLES = {"running": "bold white on blue", "done": "bold black on green", "failed": "bold white on red",
                "refused": "bold black on yellow"}


class CommandLogScreen(Screen[None]):
    SCREEN_ID = "command"
    BINDINGS = bindings_for("command")
    CSS_PATH = "command_log.tcss"

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self._shown = 0  # output chunks (of all the run received) already written to the log

    @property
    def evaldesk(self) -> ConsoleState:
        return console(self)

    @property
    def run(self) -> CommandRun | None:
        return self.evaldesk.command_runs.get(self.key)

    def compose(self) -> ComposeResult:
        yield ConsoleHeader("Command")
        yield Static("", id="command-title")
        yield Static("", id="command-status")
        yield Log(id="command-output", highlight=False, max_lines=20_000)
        yield KeyFooter()

    def on_mount(self) -> None:
        self._render_status()
        self._catch_up()
        self.query_one(Log).focus()

    def _catch_up(self) -> None:
        run = self.run
        if run is None:
            return
        log = self.query_one(Log)
        new = min(run.received - self._shown, len(run.output))
        for _, text in run.output[len(run.output) - new:] if new > 0 else []:
            log.write(printable(text))
        self._shown = run.received

    def _render_status(self) -> None:
        run = self.run
        title = self.query_one("#command-title", Static)
        status = self.query_one("#command-status", Static)
        exp_id = self.key.split("::", 1)[-1]
        if run is None:
            title.update(Text(f"{exp_id}: no command has run in this session", style="bold red"))
            status.update("")
            return
        head = Text.assemble((f" {run.state} ", STATE_STYLES.get(run.state, "reverse")), " ",
                             (f"{run.action} of {exp_id}", "bold"))
        title.update(head)
        lines = [Text.assemble(("$ ", "dim"), printable(run.command))]
        if run.state == "running":
            lines.append(Text(f"on {run.host or 'this machine'} since "
                              f"{run.started_at.astimezone():%H:%M:%S}; the output follows as it comes — "
                              "m monitors the job, esc leaves it running", style="dim"))
        else:
            end = []
            if run.exit_code is not None:
                end.append(f"exit code {run.exit_code}")
            if run.slurm_job_id:
                end.append(f"SLURM job {run.slurm_job_id} submitted")
            if run.record:
                end.append(f"record {run.record}")
            lines.append(Text(" · ".join(end) or run.state, style="bold"))
            if run.message:
                lines.append(Text(printable(run.message)))
        status.update(Text("\n").join(lines))

    @on(CommandOutput)
    def _on_output(self, message: CommandOutput) -> None:
        if message.key == self.key:
            self._catch_up()

    @on(CommandChanged)
    def _on_changed(self, message: CommandChanged) -> None:
        if message.key == self.key:
            self._catch_up()
            self._render_status()

    @on(SnapshotUpdated)
    def _on_snapshot(self) -> None:
        self.query_one(ConsoleHeader).refresh()

    def action_monitor(self) -> None:
        self.post_message(OpenView("monitor", [self.key]))

    def action_audit(self) -> None:
        self.post_message(OpenView("audit", [self.key]))

    def action_back(self) -> None:
        self.dismiss()
