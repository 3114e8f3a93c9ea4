"""A dialog for the values a write needs from a person before it can be planned (an AISBench
launch's max-out-len and batch size), each with the guidance to base it on. Nothing is written
by answering: the plan, its preview and the confirmation come after."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from services.remediations.inputs import InputField
from tui.actions import bindings_for


class InputsScreen(ModalScreen[dict[str, int] | None]):
    SCREEN_ID = "inputs"
    BINDINGS = bindings_for("inputs")
    CSS_PATH = "inputs.tcss"

    def __init__(self, title: str, fields: list[InputField]) -> None:
        super().__init__()
        self.title_text = title
        self.fields = fields

    def compose(self) -> ComposeResult:
        # the fields scroll; the error, the hint and the buttons stay in view at any height
        with Vertical(id="inputs-dialog") as box:
            box.border_title = "Needs input"
            yield Static(Text(self.title_text), id="inputs-title")
            with VerticalScroll(id="inputs-fields"):
                for f in self.fields:
                    yield Static(Text(f.label), classes="field-label")
                    yield Static(Text(f.guidance), classes="field-guidance")
                    yield Input(value="" if f.suggested is None else str(f.suggested), id=f"input-{f.name}",
                                type="integer", placeholder=f.name)
            yield Static("", id="inputs-error")
            yield Static(Text("Suggested values are filled in; nothing is launched before the next dialog's "
                              "preview. enter goes on, esc cancels.", style="dim"))
            with Horizontal(id="inputs-buttons"):
                yield Button("Continue \\[ctrl+s]", id="inputs-continue", variant="primary")
                yield Button("Cancel \\[esc]", id="inputs-cancel")

    def on_mount(self) -> None:
        if self.fields:
            self.query_one(f"#input-{self.fields[0].name}", Input).focus()

    def values(self) -> dict[str, int] | None:
        """The typed values, or None after showing what is wrong (and focusing it)."""
        out: dict[str, int] = {}
        for f in self.fields:
            box = self.query_one(f"#input-{f.name}", Input)
            try:
                out[f.name] = f.check(box.value)
            except ValueError as exc:
                self.query_one("#inputs-error", Static).update(Text(str(exc)))
                box.focus()
                return None
        return out

    def action_submit(self) -> None:
        values = self.values()
        if values is not None:
            self.dismiss(values)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    def _on_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        ids = [f"input-{f.name}" for f in self.fields]
        at = ids.index(event.input.id) if event.input.id in ids else len(ids) - 1
        if at + 1 < len(ids):
            self.query_one(f"#{ids[at + 1]}", Input).focus()
        else:
            self.action_submit()

    @on(Button.Pressed, "#inputs-continue")
    def _pressed_continue(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_submit()

    @on(Button.Pressed, "#inputs-cancel")
    def _pressed_cancel(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_cancel()

    def answers(self) -> dict[str, Any]:  # for tests and the palette: what is typed now
        return {f.name: self.query_one(f"#input-{f.name}", Input).value for f in self.fields}
