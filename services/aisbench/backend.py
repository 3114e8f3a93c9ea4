"""AISBench as a backend of the source registry: `aisbench+ssh://[user@]host[:port]/task_root`,
the hosts of the hosts file (`[aisbench] hosts_file`, the runbook's `~/.ais-bench-eval/hosts.json`)
and `[aisbench] hosts`, and task roots on this machine."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from services.aisbench.find import KIND_LOCAL, KIND_SSH, LOCAL, is_task_root
from services.core.config import Config
from services.core.models import AuditReport, Experiment
from services.core.policy import Policy
from services.core.source import Source

if TYPE_CHECKING:
    from services.aisbench.formats import HostEntry
    from services.aisbench.source import AISBenchSource
    from services.transport.ssh import HostSpec

# Finding task roots (find.py) takes a few stats: AISBench's models and sources load only once a
# path holds its tasks or a host is configured, and the SSH side (asyncssh) only when a host is read.

NAME = "aisbench"
SCHEMES: tuple[str, ...] = ("aisbench+ssh",)
KINDS: tuple[str, ...] = (KIND_LOCAL, KIND_SSH)


def spec_for(entry: HostEntry, config: Config) -> HostSpec:
    from services.transport.ssh import HostSpec

    return HostSpec(host=entry.host, user=entry.user, port=entry.port, proxy_jump=entry.proxy_jump,
                    identity_file=entry.identity_file, known_hosts=entry.known_hosts,
                    insecure_no_host_key_check=entry.insecure_no_host_key_check, ssh_config=config.ssh_config)


def source_for_host(entry: HostEntry, config: Config, task_root: str | None = None) -> AISBenchSource:
    from services.aisbench.runbook import tasks_path as runbook_tasks_path
    from services.aisbench.source import AISBenchSource
    from services.aisbench.table import TaskTable, table_path_for

    root = task_root or entry.task_root
    if entry.host == LOCAL:
        return _local(root, config, entry)
    from services.transport.process import SSHRunner
    from services.transport.sftp import SFTPFS
    from services.transport.ssh import shared_pool

    spec = spec_for(entry, config)
    pool = shared_pool()
    return AISBenchSource(
        where=entry.label, task_root=root, fs=SFTPFS(pool, spec), runner=SSHRunner(pool, spec),
        table=TaskTable(table_path_for(config, entry.label, root), entry.label, root), host_entry=entry,
        label=f"{entry.label}:{root}", kind=KIND_SSH, host=spec.label,
        runbook_tasks=runbook_tasks_path(config.aisbench.hosts_file),
    )


def _local(path: str, config: Config, entry: HostEntry | None = None) -> AISBenchSource:
    from services.aisbench.formats import HostEntry
    from services.aisbench.source import AISBenchSource
    from services.aisbench.table import TaskTable, table_path_for
    from services.transport.fs import LocalFS
    from services.transport.process import LocalRunner

    root = os.path.abspath(os.path.expanduser(path))
    return AISBenchSource(
        where=LOCAL, task_root=root, fs=LocalFS(), runner=LocalRunner(),
        table=TaskTable(table_path_for(config, LOCAL, root), LOCAL, root),
        host_entry=entry or HostEntry(name=LOCAL, host="local", benchmark_src=root, task_root=root),
        label=root, kind=KIND_LOCAL,
    )


def open_url(spec: str, config: Config) -> Source:
    """`aisbench+ssh://[user@]host[:port]/task_root`. A host the hosts file names (by `name` or
    `host`) takes that entry's image, source dir and SSH settings; the URL's user, port and
    path win. Raises ValueError for a malformed URL."""
    from services.aisbench.formats import HostEntry
    from services.aisbench.hosts import host_for, load_hosts
    from services.transport.ssh import parse_ssh_url

    url_spec, path = parse_ssh_url(spec)
    entry = host_for(url_spec.host, load_hosts(config))
    if entry is None:
        entry = HostEntry(name=url_spec.host, host=url_spec.host, user=url_spec.user, port=url_spec.port,
                          benchmark_src="~", task_root=path)
    else:
        entry = entry.model_copy(update={"user": url_spec.user or entry.user, "port": url_spec.port or entry.port})
    return source_for_host(entry, config, path if path not in ("", ".", "/") else None)


def open_path(path: str, config: Config) -> Source:
    return _local(path, config)


def find_local(path: str, config: Config) -> list[Source]:
    """A task root (task dirs with task.json or run.sh + cfg/, or evaldesk's task table), or
    a folder holding task roots one level down (the demo)."""
    p = Path(path)
    if not p.is_dir():
        return []
    if is_task_root(p):
        return [_local(path, config)]
    found: list[Source] = []
    try:
        with os.scandir(p) as it:
            children = sorted(e.path for e in it if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    for child in children[:256]:
        if is_task_root(Path(child)):
            found.append(_local(child, config))
    return found


def claims(path: str) -> bool:
    return False  # another backend may find its own runs beside or inside this one


def configured(config: Config) -> list[Source]:
    """One source per eval host of the hosts file and `[aisbench] hosts`."""
    from services.aisbench.hosts import load_hosts

    return [source_for_host(entry, config) for entry in load_hosts(config)]


def write_demo(root: Path, now: datetime) -> list[Path]:
    from services.aisbench.demo import write_demo as write

    return write(root, now)


def audit(exp: Experiment, policy: Policy, now: datetime) -> AuditReport | None:
    from services.aisbench.audit import audit_task
    from services.aisbench.models import TaskExperiment

    return audit_task(exp, policy, now) if isinstance(exp, TaskExperiment) else None


async def new_task(source: Source, config: Config, **request: object) -> str:
    """Ask for a new task on `source` (a row in its task table); its id. `--batch launch` then
    plans `aisbench_launch` on it like any other task. Raises WriteRefused for a bad request."""
    from services.aisbench.actions import new_task as ask

    row = await ask(source, config, **request)  # type: ignore[arg-type]
    return row.id
