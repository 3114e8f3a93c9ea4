"""`:` as k9s has it: a command line at the bottom of the screen that switches views
(`:trials`, `:audit`, `:monitor`, `:journal`, `:log`, `:list`), shows one source or host by
name (`:demo`, `:cluster`), and runs any action of the screen by its name (`:dedupe`,
`:report`, `:sort-next`). Tab completes, ↑/↓ walk the history (kept in the state dir), and
the names come from the one action registry (tui/actions.py) that also makes the footer and
the help screen, so a key added there is a command here too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from textual import events
from textual.app import App
from textual.screen import Screen
from textual.suggester import SuggestFromList
from textual.widgets import Input

from services.core.xdg import state_dir
from tui.actions import ACTIONS, GLOBAL, VIEWS, ActionSpec

HISTORY_LIMIT = 100


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    run: Callable[[], Any]
    aliases: tuple[str, ...] = ()


def command_name(spec: ActionSpec) -> str:
    """`experiments.sort_next` → `sort-next`: the action's own name, as typed."""
    return spec.id.split(".", 1)[1].replace("_", "-")


def source_names(app: Any) -> dict[str, str]:
    """Each source's label and, for a remote one, its host: name → the label it shows."""
    names: dict[str, str] = {}
    for src in getattr(app, "sources", []):
        label = str(src.label)
        names.setdefault(label, label)
        if "://" in label:
            host = urlsplit(label).hostname
            if host:
                names.setdefault(host, label)
    return names


def commands(app: App[Any], screen: Screen[Any]) -> list[Command]:
    """Every command that makes sense on `screen`: views, its actions and the app's, sources."""
    scope = getattr(screen, "SCREEN_ID", GLOBAL)
    out: list[Command] = []
    for name, aliases, action, text in VIEWS:
        out.append(Command(name, text, _view(app, action), aliases))
    seen = {c.name for c in out} | {a for c in out for a in c.aliases}
    for spec in ACTIONS:
        if spec.screen not in (scope, GLOBAL) or not spec.palette or spec.action == "command_palette":
            continue
        name = command_name(spec)
        if name in seen:
            continue
        seen.add(name)
        target: Any = app if spec.screen == GLOBAL else screen
        out.append(Command(name, spec.long, _action(app, spec.action, target)))
    for name, label in source_names(app).items():
        if name not in seen:
            seen.add(name)
            out.append(Command(name, f"show only {label}", _source(app, label)))
    return out


def _action(app: App[Any], action: str, target: Any) -> Callable[[], Any]:
    return lambda: app.run_action(action, target)


def _view(app: App[Any], action: str) -> Callable[[], Any]:
    return lambda: app.run_action(f"view('{action}')")


def _source(app: App[Any], label: str) -> Callable[[], Any]:
    return lambda: app.run_action(f"show_source({label!r})")


def resolve(typed: str, available: list[Command]) -> Command | None:
    """The command `typed` names: a name or alias, else the one name it begins."""
    word = typed.strip().lstrip(":").strip()
    if not word:
        return None
    for c in available:
        if word == c.name or word in c.aliases:
            return c
    starts = [c for c in available if c.name.startswith(word)]
    return starts[0] if len(starts) == 1 else None


def complete(typed: str, available: list[Command]) -> str:
    """Tab: the name `typed` begins when it begins one (names before aliases), else the longest
    start every such name shares."""
    for pool in ([c.name for c in available], [a for c in available for a in c.aliases]):
        names = sorted({n for n in pool if n.startswith(typed)})
        if len(names) == 1:
            return names[0]
        if names:
            first, last = names[0], names[-1]
            n = 0
            while n < min(len(first), len(last)) and first[n] == last[n]:
                n += 1
            return first[:n]
    return typed


def _history_path() -> str:
    return str(state_dir() / "commands.json")


def load_history() -> list[str]:
    from services.core.statefile import read_json

    data = read_json(_history_path(), default=[])
    return [str(x) for x in data][-HISTORY_LIMIT:] if isinstance(data, list) else []


def remember(command: str) -> None:
    from services.core.statefile import update_json

    def change(old: Any) -> list[str]:
        items = [x for x in (old if isinstance(old, list) else []) if x != command]
        return [*items, command][-HISTORY_LIMIT:]

    with contextlib.suppress(OSError):  # a read-only state dir costs the history, never the command
        update_json(_history_path(), change, default=[])


class CommandLine(Input):
    """The `:` line: typed, completed, run with enter, closed with esc."""

    DEFAULT_CSS = """
    CommandLine {
        height: 1;
        border: none;
        padding: 0 1;
        background: $boost;
    }
    """

    def __init__(self, available: list[Command]) -> None:
        names = sorted({n for c in available for n in (c.name, *c.aliases)}, key=len)
        super().__init__(placeholder="command: trials, audit, monitor, journal, a source … (tab completes)",
                         suggester=SuggestFromList(names, case_sensitive=False), id="command-line",
                         compact=True)
        self.available = available
        self.history = load_history()
        self._at = len(self.history)

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "tab":
            event.stop()
            event.prevent_default()
            self.value = complete(self.value.strip(), self.available)
            self.cursor_position = len(self.value)
        elif event.key in ("up", "down") and self.history:
            event.stop()
            event.prevent_default()
            self._at = max(0, min(len(self.history), self._at + (-1 if event.key == "up" else 1)))
            self.value = self.history[self._at] if self._at < len(self.history) else ""
            self.cursor_position = len(self.value)
        elif event.key == "escape":
            event.stop()
            event.prevent_default()
            self.close()
        else:
            await super()._on_key(event)

    def close(self) -> None:
        screen = self.screen
        self.remove()
        focus = getattr(screen, "focus_after_command", None)
        if callable(focus):
            focus()
        else:
            screen.focus_next()

    async def action_submit(self) -> None:
        typed = self.value.strip()
        command = resolve(typed, self.available)
        app = self.app
        self.close()
        if command is None:
            if typed:
                names = ", ".join(c.name for c in self.available if c.name.startswith(typed[:1]))[:120]
                app.record("warning", "command", f"no command {typed!r}" +  # type: ignore[attr-defined]
                           (f"; begins the same: {names}" if names else "; :help lists the keys"))
            return
        remember(typed)
        await _maybe_await(command.run())


async def _maybe_await(value: Any) -> None:
    import inspect

    if inspect.isawaitable(value):
        await value
