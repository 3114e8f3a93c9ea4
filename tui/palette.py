"""The command palette's provider: the actions of the screen it was opened from (from the
one registry), plus a jump to each experiment's audit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.markup import escape

from services.core.models import experiment_key
from services.core.text import term_safe
from tui.actions import GLOBAL, actions_for
from tui.context import console
from tui.messages import OpenView


class EvaldeskCommands(Provider):
    def _commands(self) -> Iterator[tuple[str, Callable[[], Any], str]]:
        screen = self.screen
        scope = getattr(screen, "SCREEN_ID", GLOBAL)
        app = self.app
        state = console(app)
        keymap = getattr(app, "keymap", {})
        for spec in actions_for(scope):
            if not spec.palette or spec.action == "command_palette":
                continue
            target = app if spec.screen == GLOBAL else screen
            name = f"{spec.long} ({spec.display_key(keymap)})"
            yield name, partial(app.run_action, spec.action, target), spec.id
        if scope == "experiments":
            for exp in state.experiments():
                message = OpenView("audit", [experiment_key(exp)])
                # the palette reads prompts as markup: names are escaped for the terminal and for it
                name = escape(term_safe(exp.id))
                label = escape(term_safe(exp.source_label))
                yield f"audit {name}", partial(app.post_message, message), f"open the audit of {label}"

    async def discover(self) -> Hits:
        for name, run, help_text in self._commands():
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, run, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, help=help_text)
