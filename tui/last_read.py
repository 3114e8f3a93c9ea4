"""What the console read last time, so the next start shows it at once.

After a scan that changed what a source holds, its experiments (never their trials) and their
audits are written to a file of that source's own under `$XDG_STATE_HOME/evaldesk/last-read/`
(services/core/statefile.py: atomic), so keeping one source's read never rewrites the others'. At
start the rows of the sources being opened come from there in well under a second, each marked
with the age of that read; a source's fresh answer replaces its rows as it arrives.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from datetime import datetime
from typing import Any

from services.core.models import AuditReport, Experiment, experiment_key
from services.core.plain import dump, validate
from services.core.statefile import dump_json, read_json, write_atomic
from services.core.xdg import state_dir

VERSION = 2


def path(label: str) -> str:
    """The file of one source's last read (its label may be any text: the name is its digest)."""
    digest = hashlib.sha256(label.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return str(state_dir() / "last-read" / f"{digest}.json")


def load(labels: list[str]) -> dict[str, tuple[datetime, list[Experiment], dict[str, AuditReport]]]:
    """The last read of each of `labels` that was kept: (when, experiments, audits by key)."""
    out: dict[str, tuple[datetime, list[Experiment], dict[str, AuditReport]]] = {}
    for label in labels:
        kept = read_json(path(label), default=None)
        if not isinstance(kept, dict) or kept.get("version") != VERSION or kept.get("label") != label:
            continue
        try:
            at = datetime.fromisoformat(kept["taken_at"])
            exps = [validate(Experiment, e) for e in kept["experiments"]]
            audits = {k: validate(AuditReport, v) for k, v in kept.get("audits", {}).items()}
        except (KeyError, TypeError, ValueError):
            continue  # a file from another version, or hand-edited: read the sources instead
        out[label] = (at, exps, audits)
    return out


def save(label: str, taken_at: datetime, experiments: list[Experiment], audits: dict[str, AuditReport]) -> None:
    """Keep one source's read, replacing its last one."""
    entry: dict[str, Any] = {
        "version": VERSION, "label": label, "taken_at": taken_at.isoformat(),
        "experiments": [dump(e, json=True) for e in experiments],
        "audits": {experiment_key(e): dump(audits[experiment_key(e)], json=True)
                   for e in experiments if experiment_key(e) in audits}}
    target = path(label)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    write_atomic(target, dump_json(entry))
    with contextlib.suppress(FileNotFoundError):  # every source's read in one file, as version 1 kept it
        os.unlink(state_dir() / "last-read.json")
