"""Finding AISBench task roots on local disk: a few `stat`s and none of AISBench's models, so a
folder of Harbor job dirs is cheap to look through (the backend registry asks every backend of
every local folder)."""

from __future__ import annotations

import os
from pathlib import Path

KIND_LOCAL, KIND_SSH = "aisbench", "aisbench+ssh"  # the Experiment.source of its tasks
LOCAL = "local"  # the host of a task root on this machine
LOCAL_TABLE = ".evaldesk-tasks.json"  # evaldesk's task table beside the tasks of a local task root


def is_task_root(path: Path, look: int = 16) -> bool:
    """Evaldesk's task table beside the tasks, or a task dir among the first few children (a
    folder of 100k Harbor trial dirs is not listed whole to find out it is not one)."""
    try:
        # a dir this user cannot read is not ours to claim (the source that owns it says why)
        if (path / LOCAL_TABLE).is_file():
            return True
        with os.scandir(path) as it:
            for entry in it:
                if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                    continue
                child = Path(entry.path)
                # evaldesk's task.json; run.sh beside cfg/ or the runbook's bootstrap.sh (its agent tasks have no cfg/)
                if (child / "task.json").is_file() or ((child / "run.sh").is_file() and (
                        (child / "cfg").is_dir() or (child / "bootstrap.sh").is_file())):
                    return True
                look -= 1
                if look <= 0:
                    return False
    except OSError:
        return False
    return False
