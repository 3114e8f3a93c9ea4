"""Where experiments come from. `open_source` turns a command-line spec into a Source."""

from __future__ import annotations

from services.config import Config
from services.sources.base import Source, SourceUnavailable
from services.sources.harbor import HarborSource


def open_source(spec: str, config: Config) -> Source:
    """A local path (job dir or folder of job dirs) or ssh://[user@]host[:port]/path."""
    if spec.startswith("ssh://"):
        from services.sources.ssh_harbor import SSHHarborSource

        return SSHHarborSource.from_url(spec, config)
    if "://" in spec:
        raise SourceUnavailable(spec, "unknown source scheme (use a local path or ssh://host/path)")
    return HarborSource(spec, config.policy)


__all__ = ["HarborSource", "Source", "SourceUnavailable", "open_source"]
