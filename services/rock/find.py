"""Finding regression.py work dirs on local disk: one listing and none of Rock's models (the
backend registry asks every backend of every local folder)."""

from __future__ import annotations

from pathlib import Path


def results_files(workdir: str | Path) -> list[Path]:
    """A work dir's experiments: regression.py's results/*.json."""
    d = Path(workdir) / "results"
    try:
        return sorted(p for p in d.iterdir() if p.suffix == ".json" and p.is_file() and not p.name.startswith("."))
    except OSError:
        return []
