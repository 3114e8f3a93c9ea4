"""SLURM jobs evaldesk itself submitted for a job dir (a resume or a re-run through `sbatch`),
so the scheduler state a source reports is the newest job's, not the original run's.

Kept on this machine (`$XDG_STATE_HOME/evaldesk/followed.json`), keyed by host and job dir:
a resume submitted from the console is still followed after evaldesk restarts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.core.statefile import read_json, update_json
from services.core.xdg import state_dir

LOCAL = "local"


def _path() -> Path:
    return state_dir() / "followed.json"


def _key(host: str | None, job_dir: str) -> str:
    return f"{host or LOCAL}\t{job_dir}"


def _load() -> dict[str, Any]:
    data = read_json(_path(), {})
    return data if isinstance(data, dict) else {}


def follow(host: str | None, job_dir: str, slurm_job_id: str, record: str | None = None) -> None:
    """From now on, `job_dir` on `host` is tracked under `slurm_job_id`."""
    entry = {"slurm_job_id": slurm_job_id, "record": record, "since": datetime.now(UTC).isoformat()}

    def add(data: Any) -> dict[str, Any]:
        data = data if isinstance(data, dict) else {}
        data[_key(host, job_dir)] = entry
        return data

    update_json(_path(), add, {})


def followed_job(host: str | None, job_dir: str) -> str | None:
    """The SLURM job evaldesk last submitted for `job_dir` on `host`, if any."""
    entry = _load().get(_key(host, job_dir))
    if isinstance(entry, dict) and entry.get("slurm_job_id"):
        return str(entry["slurm_job_id"])
    return None


def followed_on(host: str | None) -> dict[str, str]:
    """Every job dir on `host` with the SLURM job evaldesk last submitted for it."""
    prefix = f"{host or LOCAL}\t"
    return {k[len(prefix):]: str(v["slurm_job_id"]) for k, v in _load().items()
            if k.startswith(prefix) and isinstance(v, dict) and v.get("slurm_job_id")}
