"""The stand-in `harbor`, `sbatch`, `sacct` (and silent `squeue`, `scontrol`) of
tests/support/standins/ on PATH — for this process, the commands it starts, and the test SSH
server's shell (it runs commands through a local shell that inherits this environment).

`harbor` follows Harbor 0.26's documented resume semantics on a job dir (see its docstring);
`sbatch` prints `Submitted batch job N` and runs the script in the background; `sacct` reports
what it did.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

STANDINS = Path(__file__).parent / "standins"


@dataclass
class Standins:
    bin: Path
    log: Path  # one JSON argv list per `harbor` call
    slurm: Path  # the stand-in scheduler's state

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


def use_standins(monkeypatch: pytest.MonkeyPatch, tmp: Path, tasks: dict[str, list[str]] | None = None,
                 **env: object) -> Standins:
    """Put the stand-ins first on PATH; `tasks` is the registry of datasets Harbor would
    resolve (dataset name → task names); `env` sets HARBOR_STANDIN_* knobs (EXIT, RUN, DELAY …)."""
    tools = Standins(STANDINS, tmp / "harbor-calls.jsonl", tmp / "slurm")
    monkeypatch.setenv("PATH", f"{STANDINS}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("HARBOR_STANDIN_LOG", str(tools.log))
    monkeypatch.setenv("SLURM_STANDIN_DIR", str(tools.slurm))
    if tasks is not None:
        path = tmp / "datasets.json"
        path.write_text(json.dumps(tasks))
        monkeypatch.setenv("HARBOR_STANDIN_TASKS", str(path))
    for key, value in env.items():
        monkeypatch.setenv(key if key.startswith(("HARBOR_", "SLURM_")) else f"HARBOR_STANDIN_{key}", str(value))
    return tools


def without_standins(monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH without the stand-ins (nor a real harbor): `harbor` is not found."""
    parts = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != STANDINS]
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in parts if not (Path(p) / "harbor").exists()))
