"""evaldesk's folders on this machine, by the XDG base-directory spec."""

from __future__ import annotations

import os
from pathlib import Path


def _base(var: str, *default: str) -> Path:
    return Path(os.environ.get(var) or os.path.join(os.path.expanduser("~"), *default)) / "evaldesk"


def config_dir() -> Path:
    return _base("XDG_CONFIG_HOME", ".config")


def data_dir() -> Path:
    return _base("XDG_DATA_HOME", ".local", "share")


def state_dir() -> Path:
    return _base("XDG_STATE_HOME", ".local", "state")


def cache_dir() -> Path:
    return _base("XDG_CACHE_HOME", ".cache")


def default_config_path() -> Path:
    return config_dir() / "config.toml"


def default_baselines_dir() -> Path:
    """``$XDG_CONFIG_HOME/evaldesk/baselines``: beside the config file, never the current dir."""
    return config_dir() / "baselines"


def config_file(path: str | None, environ: dict[str, str] | os._Environ[str]) -> Path:
    """The config file a run reads: --config, else EVALDESK_CONFIG, else the default."""
    return Path(path or environ.get("EVALDESK_CONFIG") or default_config_path()).expanduser()
