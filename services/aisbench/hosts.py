"""Eval hosts: the runbook's hosts file (`~/.ais-bench-eval/hosts.json`: host/port/user/image/
benchmark_src/task_root per host) and `[aisbench] hosts` entries of the config, same fields.

The file may be a list of entries, `{"hosts": [...]}`, or an object of name → entry; an
entry without `name` is named by its host. A malformed entry is an error naming the file and
the entry, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from services.aisbench.formats import HostEntry
from services.core.config import Config


class HostsError(Exception):
    pass


def _entries(data: Any) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(data, dict) and "hosts" in data:
        data = data["hosts"]
    if isinstance(data, dict) and "host" in data and isinstance(data["host"], str):
        return [(str(data.get("name") or data["host"]), data)]
    if isinstance(data, dict):
        return [(str(k), v) for k, v in data.items() if isinstance(v, dict)]
    if isinstance(data, list):
        return [(str((e or {}).get("name") or (e or {}).get("host") or f"#{i + 1}"), e)
                for i, e in enumerate(data) if isinstance(e, dict)]
    raise HostsError("not a list or object of hosts")


def parse_hosts(data: Any, where: str) -> list[HostEntry]:
    try:
        entries = _entries(data)
    except HostsError as exc:
        raise HostsError(f"{where}: {exc}") from None
    out: list[HostEntry] = []
    for name, raw in entries:
        try:
            # the runbook's own fields: `alias` names a host, `default_tokenizer` is its perf tokenizer
            raw = {**raw, "name": raw.get("name") or raw.get("alias") or name}
            if raw.get("default_tokenizer") and not raw.get("tokenizer_path"):
                raw["tokenizer_path"] = raw["default_tokenizer"]
            entry = HostEntry.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"])
            raise HostsError(f"{where}: host {name!r}: {key}: {err['msg']}") from None
        out.append(entry)
    return out


def load_hosts(config: Config) -> list[HostEntry]:
    """Hosts of the hosts file (absent: none), then the config's own entries."""
    hosts: list[HostEntry] = []
    path = Path(config.aisbench.hosts_file).expanduser()
    if path.exists():
        from services.core.input_files import loads_json, read_text

        try:
            data = loads_json(read_text(path), str(path))
        except (OSError, ValueError) as exc:
            raise HostsError(f"{path}: cannot read the hosts file: {exc}") from None
        hosts += parse_hosts(data, str(path))
    if config.aisbench.hosts:
        hosts += parse_hosts(config.aisbench.hosts, f"{config.config_path or 'config'} [aisbench] hosts")
    return hosts


def host_for(name_or_host: str, hosts: list[HostEntry]) -> HostEntry | None:
    for h in hosts:
        if name_or_host in (h.name, h.host):
            return h
    return None
