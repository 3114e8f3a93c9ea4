"""The report just written: where the file is, what it says in a few lines, and `o` to open it
with the system's opener (the browser)."""

from __future__ import annotations

import shutil
import sys

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from services.core.text import term_safe
from services.transport.process import LocalRunner
from tui.actions import bindings_for
from tui.messages import Notice
from widgets.footer import KeyFooter

# what opens a file with the desktop's default application, per platform, first found wins
OPENERS: tuple[str, ...] = ("xdg-open", "open") if sys.platform != "darwin" else ("open", "xdg-open")


def system_opener() -> str | None:
    for name in OPENERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class ReportScreen(ModalScreen[None]):
    SCREEN_ID = "report"
    BINDINGS = bindings_for("report")
    CSS_PATH = "report.tcss"

    def __init__(self, path: str, lines: list[str]) -> None:
        super().__init__()
        self.path = path
        self.lines = lines
        self.opener = system_opener()  # looked up once: the hint and `o` name the same program

    def compose(self) -> ComposeResult:
        with Vertical(id="report-box") as box:
            box.border_title = "Report written"
            yield Static(Text(term_safe(self.path)), id="report-path")
            yield Static(Text(term_safe("\n".join(self.lines), keep_newlines=True)), id="report-summary")
            opener = self.opener
            hint = (f"o opens it ({opener.rsplit('/', 1)[-1]}), esc closes. One self-contained HTML file: "
                    "no network needed to read it." if opener else
                    "No system opener (xdg-open) on this machine: open the file above in a browser. esc closes.")
            yield Static(Text(hint), id="report-hint")
        yield KeyFooter()

    def action_open(self) -> None:
        opener = self.opener
        if opener is None:
            self.post_message(Notice("information", "report",
                                     f"No system opener (xdg-open) here; the report is at {self.path}"))
            return
        self._open(opener)

    @work(exclusive=True, group="report-open", exit_on_error=False)
    async def _open(self, opener: str) -> None:
        # the opener may start a browser that lives on: detach it (output to /dev/null, in the
        # background) so nothing here waits on it or kills it; the path travels as data ($1)
        argv = ["sh", "-c", '"$0" "$1" </dev/null >/dev/null 2>&1 &', opener, self.path]
        res = await LocalRunner().run(argv, timeout_s=10)
        if res.exit_code == 0:
            self.post_message(Notice("information", "report", f"asked {opener.rsplit('/', 1)[-1]} to open {self.path}"))
        else:
            self.post_message(Notice("warning", "report", f"could not start {opener}; the report is at {self.path}"))

    def action_close(self) -> None:
        self.dismiss(None)
