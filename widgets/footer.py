"""The footer every screen shows, its own keys first when the terminal is narrow."""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

# below this many columns the palette hint (17 of them) would push the screen's last keys,
# `? Help` among them, off the line; `?` and the help screen still name ctrl+p
NARROW_BELOW = 100


class KeyFooter(Footer):
    def on_resize(self, event: events.Resize) -> None:
        self.show_command_palette = event.size.width >= NARROW_BELOW
