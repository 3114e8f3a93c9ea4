"""The command palette's provider: the actions of the screen it was opened from (from the
one registry), plus a jump to each experiment's audit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.actions import GLOBAL, actions_for

if TYPE_CHECKING:
    from tui.app import EvaldeskApp


class EvaldeskCommands(Provider):
    def _commands(self) -> Iterator[tuple[str, Callable[[], Any], str]]:
        screen = self.screen
        scope = getattr(screen, "SCREEN_ID", GLOBAL)
        app = cast("EvaldeskApp", self.app)
        keymap = getattr(app, "keymap", {})
        for spec in actions_for(scope):
            if not spec.palette or spec.action == "command_palette":
                continue
            target = app if spec.screen == GLOBAL else screen
            name = f"{spec.long} ({spec.display_key(keymap)})"
            yield name, partial(app.run_action, spec.action, target), spec.id
        if scope == "experiments":
            for exp in app.experiments():
                key = f"{exp.source_label}::{exp.id}"
                yield f"audit {exp.id}", partial(app.open_audit, key), f"open the audit of {exp.source_label}"

    async def discover(self) -> Hits:
        for name, run, help_text in self._commands():
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, run, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, help=help_text)
