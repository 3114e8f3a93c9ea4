"""Harbor as a backend of the source registry: local job dirs (the embedded default) and the
same dirs on SSH hosts (`ssh://host/path`, `[[hosts]]` entries)."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from services.core.config import Config, HostConfig
from services.core.models import AuditReport, Experiment
from services.core.plain import copy_with
from services.core.policy import Policy
from services.core.source import Source, SourceUnavailable
from services.harbor import walk
from services.harbor.source import HarborSource

# the SSH side (asyncssh, ~0.25 s to import) loads only when a host is read: a local batch
# command starts that much sooner

NAME = "harbor"
SCHEMES: tuple[str, ...] = ("ssh", "harbor+ssh")
KINDS: tuple[str, ...] = ("harbor", "harbor+ssh")


def source_for_host(hc: HostConfig, config: Config, paths: list[str] | None = None) -> Source:
    from services.harbor.ssh_source import SSHHarborSource
    from services.transport.ssh import host_spec

    use = paths if paths is not None else hc.paths
    return SSHHarborSource(
        host_spec(hc, config.ssh_config),
        use,
        policy=config.policy,
        label=f"{hc.name}:{','.join(use)}",
        python=hc.python,
        timeout_s=hc.scan_timeout_s,
        slurm_job_id_key=hc.slurm_job_id_key,
        slurm_job_ids=hc.slurm_job_ids,
    )


def open_url(spec: str, config: Config) -> Source:
    """`ssh://[user@]host[:port]/path`. A host that matches a `[[hosts]]` entry (by `host` or
    `name`) takes that entry's settings (identity, known_hosts, jump host, SLURM keys); the
    URL's user and port win. Raises ValueError for a malformed URL."""
    from services.harbor.ssh_source import SSHHarborSource
    from services.transport.ssh import host_config_for, parse_ssh_url

    spec_host, path = parse_ssh_url(spec)
    hc = host_config_for(spec_host.host, config.hosts)
    if hc is not None:
        merged = copy_with(hc, user=spec_host.user or hc.user, port=spec_host.port or hc.port)
        return source_for_host(merged, config, [path])
    return SSHHarborSource(
        replace(spec_host, ssh_config=config.ssh_config),
        [path],
        policy=config.policy,
        label=spec,
    )


def find_job_dirs(root: str) -> list[str]:
    """The job dirs under a local path; raises SourceUnavailable when it cannot be read."""
    try:
        return walk.find_jobs(walk.LocalWalkFS(), root)[0]
    except walk.WalkError as exc:
        raise SourceUnavailable(exc.where, exc.message) from None


def looks_like_job_dir(path: str) -> bool:
    fs = walk.LocalWalkFS()
    listing = fs.list([path])[0]
    return isinstance(listing, list) and walk.is_job_dir(fs, path, listing)


def open_path(path: str, config: Config) -> Source:
    return HarborSource(path, policy=config.policy, cache=config.scan_cache)


def find_local(path: str, config: Config) -> list[Source]:
    """The Harbor source of a local folder, when it holds (or is) a job dir."""
    # a file is not a job dir (another backend may claim it, e.g. a Rock results file)
    return [open_path(path, config)] if os.path.isdir(path) and find_job_dirs(path) else []


def claims(path: str) -> bool:
    return os.path.isdir(path) and looks_like_job_dir(path)


def configured(config: Config) -> list[Source]:
    """One source per `[[hosts]]` entry that lists paths (`[[sources]]` paths go through
    the registry like a command-line SOURCE)."""
    return [source_for_host(hc, config) for hc in config.hosts if hc.paths]


def write_demo(root: Path, now: datetime) -> list[Path]:
    from services.harbor.demo import write_demo as write
    from services.harbor.demo_baseline import write_demo_baseline

    written = write(root, now=now)
    write_demo_baseline(root, now)
    return written


def audit(exp: Experiment, policy: Policy, now: datetime) -> AuditReport | None:
    return None  # DESIGN 3's checks are Harbor's own
