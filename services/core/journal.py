"""Append-only JSONL record of every write evaldesk makes, with the state before and after."""

from __future__ import annotations

import getpass
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.core.models import JournalEntry
from services.core.plain import dump, validate
from services.core.text import dumps
from services.core.xdg import state_dir


def current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return os.environ.get("USER", "unknown")


class Journal:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else state_dir() / "journal.jsonl"

    def append(
        self, action: str, target: str, before: Any = None, after: Any = None, **detail: Any
    ) -> JournalEntry:
        entry = JournalEntry(
            at=datetime.now(UTC), user=current_user(), action=action, target=target,
            before=before, after=after, detail=detail,
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a path need not be UTF-8 (a job dir named with other bytes): `dumps` writes it as a
        # \udcXX escape where a strict JSON writer refuses it, and the write would be lost
        line = dumps(dump(entry, json=True), separators=(",", ":")) + "\n"
        # O_APPEND keeps concurrent writers from interleaving within a line
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return entry

    def entries(self) -> list[JournalEntry]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    # Python's json reads \udcXX escapes back as the bytes they were
                    out.append(validate(JournalEntry, json.loads(line)))
                except ValueError:
                    continue  # a torn last line after a crash; the rest stays readable
        return out
