"""The confirmation dialog every write goes through: it shows the dry run, focuses Cancel,
and applies only on an explicit `y` (or a deliberate press of the Apply button)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from services.core.text import term_safe
from tui.actions import bindings_for
from tui.context import console
from tui.messages import Notice


class ConfirmScreen(ModalScreen[bool]):
    SCREEN_ID = "confirm"
    BINDINGS = bindings_for("confirm")
    CSS_PATH = "confirm.tcss"

    def __init__(
        self,
        title: str,
        lines: list[str],
        *,
        confirm_label: str = "Apply",
        action: str = "write",
        refusal: str | None = None,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines
        self.confirm_label = confirm_label
        self.action_name = action
        self.refusal = refusal

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = "Confirm — dry run"
            # the plan names trial dirs and files: each preview line is shown escaped, one row each
            yield Static(Text(term_safe(self.title_text)), id="confirm-title")
            with VerticalScroll(id="preview"):
                yield Static(Text("\n".join(term_safe(line) for line in self.lines)), id="preview-text")
            if self.refusal:
                yield Static(Text(term_safe(self.refusal, keep_newlines=True)), id="refusal")
            else:
                yield Static(Text("Nothing has changed yet. y applies, n or esc cancels.", style="dim"))
            with Horizontal(id="buttons"):
                yield Button(f"{self.confirm_label} \\[y]", id="confirm", variant="error",
                             disabled=self.refusal is not None)
                yield Button("Cancel \\[n]", id="cancel", variant="primary")

    def on_mount(self) -> None:
        # never the confirming control: a stray enter cancels
        self.query_one("#cancel", Button).focus()

    def action_scroll(self, move: str) -> None:
        preview = self.query_one("#preview", VerticalScroll)
        getattr(preview, f"scroll_{move}")(animate=False)

    def action_confirm(self) -> None:
        # the app decides (and says why); the refusal shown here is only its explanation
        why = console(self).write_refusal(self.action_name)
        if why is not None:
            self.post_message(Notice("warning", self.action_name, why))
            self.app.bell()
            return
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed, "#confirm")
    def _pressed_confirm(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_confirm()

    @on(Button.Pressed, "#cancel")
    def _pressed_cancel(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_cancel()
