"""What a batch command may start before the rest of evaldesk loads (~0.15 s of imports).

A backend can name a step that begins its work on a second core meanwhile, such as listing the
job dirs it is about to read (services/harbor/walk.py `prelist`). They are named here, as the
registry names backends (services/core/registry.py), so that the entry point reaches no backend
by name; unlike the registry, this module and the steps it names import the standard library
only, or they would cost the time they are meant to save.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

# (backend, module, function taking the local paths a command was given)
EARLY: tuple[tuple[str, str, str], ...] = (
    ("harbor", "services.harbor.walk", "prelist"),
)


def start(paths: Iterable[str]) -> None:
    """Start every backend's early step for `paths` (URLs are left out: nothing to list here)."""
    local = [p for p in paths if "://" not in p]
    if not local:
        return
    for _, module, name in EARLY:
        getattr(importlib.import_module(module), name)(local)
