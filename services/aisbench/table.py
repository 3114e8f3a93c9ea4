"""The task table: every task evaldesk was asked to run, launched or not.

A task dir on the host says what ran; the table says what was asked — including tasks that
never got a dir (`needs_input`: max-out-len or batch size not given; `blocked`: the preflight
failed) and tasks whose dir has gone since (`removed`: an eval host's /tmp is cleared on
reboot). It is evaldesk's own bookkeeping, like the journal, and never holds an API key.

Where it lives: a task root on an SSH host keeps its table on this machine
(`[aisbench] tasks_file`, default `$XDG_STATE_HOME/evaldesk/aisbench/tasks.json`), because the
host may lose it; a task root on this machine keeps it beside its tasks
(`<task_root>/.evaldesk-tasks.json`), so a copied task root carries its table along.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from services.aisbench.find import LOCAL, LOCAL_TABLE
from services.aisbench.formats import TaskRow, TaskTableFile
from services.core.config import Config
from services.core.input_files import InputFileError, read_bytes
from services.core.statefile import locked, write_atomic
from services.core.xdg import state_dir


class TableError(Exception):
    pass


def table_path_for(config: Config, where: str, task_root: str) -> Path:
    if where == LOCAL:
        return Path(task_root) / LOCAL_TABLE
    if config.aisbench.tasks_file:
        return Path(config.aisbench.tasks_file).expanduser()
    return state_dir() / "aisbench" / "tasks.json"


class TaskTable:
    """The rows of one task root (`where` + `task_root`) in a table file shared by many."""

    def __init__(self, path: Path, where: str, task_root: str) -> None:
        self.path = path
        self.where = where
        self.task_root = task_root

    def _load_all(self) -> list[TaskRow]:
        try:
            raw = read_bytes(self.path)
        except FileNotFoundError:
            return []
        except InputFileError as exc:
            raise TableError(f"cannot read the task table: {exc}") from None
        except OSError as exc:
            raise TableError(f"{self.path}: cannot read the task table: {exc.strerror}") from None
        try:
            return TaskTableFile.model_validate_json(raw).tasks
        except ValidationError as exc:
            raise TableError(f"{self.path}: not a task table: {exc.errors()[0]['msg']}") from None

    def rows(self) -> list[TaskRow]:
        return [r for r in self._load_all() if r.where == self.where and r.task_root == self.task_root]

    def get(self, task_id: str) -> TaskRow | None:
        return next((r for r in self.rows() if r.id == task_id), None)

    def put(self, row: TaskRow) -> None:
        """Insert or replace one row; atomic (temp file, fsync, rename), mode 600."""
        row = row.model_copy(update={"where": self.where, "task_root": self.task_root})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with locked(self.path):  # (two launches at once both land)
            rows = [r for r in self._load_all()
                    if not (r.id == row.id and r.where == row.where and r.task_root == row.task_root)]
            rows.append(row)
            data = TaskTableFile(tasks=rows).model_dump(mode="json", exclude_none=True)
            text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
            write_atomic(self.path, text.encode("utf-8"), mode=0o600)
