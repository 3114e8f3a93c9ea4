"""What the console read last time, so the next start shows it at once.

After every scan the experiments (never their trials) and their audits are written to
`$XDG_STATE_HOME/evaldesk/last-read.json` (services/core/statefile.py: atomic, locked). At
start the rows of the sources being opened come from there in well under a second, each
marked with the age of that read; a source's fresh answer replaces its rows as it arrives.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from services.core.models import AuditReport, Experiment, experiment_key
from services.core.statefile import read_json, update_json
from services.core.xdg import state_dir

VERSION = 1


def path() -> str:
    return str(state_dir() / "last-read.json")


def load(labels: list[str]) -> dict[str, tuple[datetime, list[Experiment], dict[str, AuditReport]]]:
    """The last read of each of `labels` that was kept: (when, experiments, audits by key)."""
    data = read_json(path(), default=None)
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}
    out: dict[str, tuple[datetime, list[Experiment], dict[str, AuditReport]]] = {}
    for label in labels:
        kept = data.get("sources", {}).get(label)
        if not isinstance(kept, dict):
            continue
        try:
            at = datetime.fromisoformat(kept["taken_at"])
            exps = [Experiment.model_validate(e) for e in kept["experiments"]]
            audits = {k: AuditReport.model_validate(v) for k, v in kept.get("audits", {}).items()}
        except (KeyError, TypeError, ValueError):
            continue  # a file from another version, or hand-edited: read the sources instead
        out[label] = (at, exps, audits)
    return out


def save(label: str, taken_at: datetime, experiments: list[Experiment], audits: dict[str, AuditReport]) -> None:
    """Keep one source's read (replacing its last one); the other sources' stay."""
    entry = {"taken_at": taken_at.isoformat(),
             "experiments": [e.model_dump(mode="json") for e in experiments],
             "audits": {experiment_key(e): audits[experiment_key(e)].model_dump(mode="json")
                        for e in experiments if experiment_key(e) in audits}}

    def change(old: Any) -> dict[str, Any]:
        data: dict[str, Any] = old if isinstance(old, dict) and old.get("version") == VERSION else {"version": VERSION}
        sources: dict[str, Any] = data.setdefault("sources", {})
        sources[label] = entry
        return data

    update_json(path(), change, default=None)
