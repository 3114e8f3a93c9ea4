"""Sources of experiments; `open_source` turns a command-line SOURCE or config entry into one."""

from __future__ import annotations

from services.core.config import Config, HostConfig
from services.core.source import Source, SourceUnavailable

__all__ = ["Source", "SourceUnavailable", "open_source", "source_for_host", "sources_from_config"]


def _host_config_for(host: str, config: Config) -> HostConfig | None:
    for hc in config.hosts:
        if host in (hc.host, hc.name):
            return hc
    return None


def source_for_host(hc: HostConfig, config: Config, paths: list[str] | None = None) -> Source:
    from services.harbor.ssh_source import SSHHarborSource
    from services.transport.ssh import HostSpec

    spec = HostSpec(
        host=hc.host,
        user=hc.user,
        port=hc.port,
        proxy_jump=hc.proxy_jump,
        identity_file=hc.identity_file,
        known_hosts=hc.known_hosts,
        insecure_no_host_key_check=hc.insecure_no_host_key_check,
        ssh_config=config.ssh_config,
    )
    use = paths if paths is not None else hc.paths
    return SSHHarborSource(
        spec,
        use,
        policy=config.policy,
        label=f"{hc.name}:{','.join(use)}",
        python=hc.python,
        timeout_s=hc.scan_timeout_s,
        slurm_job_id_key=hc.slurm_job_id_key,
        slurm_job_ids=hc.slurm_job_ids,
    )


def open_source(spec: str, config: Config) -> Source:
    """A local path → HarborSource; `ssh://[user@]host[:port]/path` → the SSH source.

    An ssh:// host that matches a `[[hosts]]` entry (by `host` or `name`) takes that entry's
    settings (identity, known_hosts, jump host, SLURM keys); the URL's user and port win.
    Raises ValueError for a malformed URL.
    """
    if spec.startswith("ssh://"):
        from services.harbor.ssh_source import SSHHarborSource, parse_ssh_url
        from services.transport.ssh import HostSpec

        host_spec, path = parse_ssh_url(spec)
        hc = _host_config_for(host_spec.host, config)
        if hc is not None:
            merged = hc.model_copy(
                update={"user": host_spec.user or hc.user, "port": host_spec.port or hc.port}
            )
            return source_for_host(merged, config, [path])
        return SSHHarborSource(
            HostSpec(host=host_spec.host, user=host_spec.user, port=host_spec.port, ssh_config=config.ssh_config),
            [path],
            policy=config.policy,
            label=spec,
        )
    from services.harbor.source import HarborSource

    return HarborSource(spec, policy=config.policy)


def sources_from_config(config: Config) -> list[Source]:
    """One source per `[[sources]]` entry and one per `[[hosts]]` entry that lists paths."""
    out: list[Source] = []
    for sc in config.sources:
        src = open_source(sc.path, config)
        if sc.name:
            src.label = sc.name
        out.append(src)
    for hc in config.hosts:
        if hc.paths:
            out.append(source_for_host(hc, config))
    return out
