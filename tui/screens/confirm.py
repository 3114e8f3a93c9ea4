"""The confirmation dialog every write goes through: it shows the dry run, focuses Cancel,
and applies only on an explicit `y` (or a deliberate press of the Apply button).

A plan that may go ahead only on purpose (a csbench submit that would pay for a mock run)
asks for its word instead: Apply stays disabled until the word is typed exactly, and enter in
the box (or the button) applies; the planner checks the word again."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

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
        word: str | None = None,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines
        self.confirm_label = confirm_label
        self.action_name = action
        self.refusal = refusal
        self.word = None if refusal else word

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = "Confirm — dry run"
            # the plan names trial dirs and files: each preview line is shown escaped, one row each
            yield Static(Text(term_safe(self.title_text)), id="confirm-title")
            with VerticalScroll(id="preview"):
                yield Static(Text("\n".join(term_safe(line) for line in self.lines)), id="preview-text")
            if self.refusal:
                yield Static(Text(term_safe(self.refusal, keep_newlines=True)), id="refusal")
            elif self.word:
                yield Static(Text(f"Nothing has changed yet. Type {self.word}, then enter, to go ahead anyway.",
                                  style="bold"), id="word-hint")
            else:
                yield Static(Text("Nothing has changed yet. y applies, n or esc cancels.", style="dim"))
            with Horizontal(id="buttons"):
                if self.word:
                    yield Input(placeholder=f"type {self.word}", id="word")
                # a plan that cannot apply offers no apply at all: the refusal above says why
                if not self.refusal:
                    yield Button(f"{self.confirm_label} \\[y]" if not self.word else self.confirm_label,
                                 id="confirm", variant="error", disabled=self.word is not None)
                yield Button("Close \\[n]" if self.refusal else "Cancel \\[n]", id="cancel", variant="primary")

    def on_mount(self) -> None:
        # never the confirming control: a stray enter cancels (or, asking for a word, types nothing)
        if self.word:
            self.query_one("#word", Input).focus()
        else:
            self.query_one("#cancel", Button).focus()

    def typed(self) -> str:
        return self.query_one("#word", Input).value.strip() if self.word else ""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # while the word is typed, its letters (j, k …) belong to the box, not to scrolling
        return not (action == "scroll" and self.word is not None and isinstance(self.focused, Input))

    @on(Input.Changed, "#word")
    def _word_changed(self, event: Input.Changed) -> None:
        for button in self.query("#confirm").results(Button):
            button.disabled = event.value.strip() != self.word

    @on(Input.Submitted, "#word")
    def _word_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_confirm()

    def action_scroll(self, move: str) -> None:
        preview = self.query_one("#preview", VerticalScroll)
        getattr(preview, f"scroll_{move}")(animate=False)

    def action_confirm(self) -> None:
        # the app decides (and says why); the refusal shown here is only its explanation
        # y where nothing can apply says why again (the dialog offers no apply)
        why = console(self).write_refusal(self.action_name) or self.refusal
        if why is None and self.word and self.typed() != self.word:
            why = f"type {self.word} to go ahead, or esc to cancel"
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
