"""The footer every screen shows, its own keys first when the terminal is narrow."""

from __future__ import annotations

from textual import events
from textual.screen import ModalScreen
from textual.widgets import Footer

from widgets.notice_line import NoticeLine

# below this many columns the palette hint (17 of them) would push the screen's last keys,
# `? Help` among them, off the line; `?` and the help screen still name ctrl+p
NARROW_BELOW = 100


class KeyFooter(Footer):
    def on_resize(self, event: events.Resize) -> None:
        self.show_command_palette = event.size.width >= NARROW_BELOW

    def on_mount(self) -> None:
        # every full screen has a notice line; a dialog's notices belong to the screen under it
        if not isinstance(self.screen, ModalScreen) and not self.screen.query(NoticeLine):
            line = NoticeLine()
            self.screen.mount(line)
            # the notices raised before this screen opened (the app's live collection, when it keeps one)
            notices = getattr(self.app, "notices", None)
            if notices is not None:
                self.app.call_later(line.show, notices)
