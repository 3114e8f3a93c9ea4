"""evaldesk's configuration: TOML in the XDG config dir, overridable by EVALDESK_* env vars.

Secrets are never stored here: a backend's key is named by the env var that holds it.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.core.policy import Policy


class ConfigError(Exception):
    """A one-line, human message naming the key and the file."""


class HostConfig(BaseModel):
    """An SSH host whose Harbor job dirs evaldesk reads (`[[hosts]]`)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="label shown in the console")
    host: str = Field(description="hostname or ~/.ssh/config alias")
    user: str | None = None
    port: int | None = None
    paths: list[str] = Field(default_factory=list, description="job dirs or folders of job dirs")
    proxy_jump: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = Field(None, description="known_hosts file; default ~/.ssh/known_hosts")
    insecure_no_host_key_check: bool = Field(
        False, description="turn host-key checking off for this host only; shown in the UI"
    )
    poll_interval_s: float | None = None
    python: str = "python3"
    slurm_job_id_key: str = Field("slurm_job_id", description="job config key holding the SLURM job id")
    slurm_env_file: str = Field("meta.env", description="file in the job dir with SLURM_JOB_ID=…")
    slurm_job_ids: dict[str, str] = Field(
        default_factory=dict, description="job dir name or path → SLURM job id, when the job files name none"
    )
    scan_timeout_s: float = Field(120.0, gt=0, description="give up on a remote scan after this long")


class SourceConfig(BaseModel):
    """A local path (job dir or folder of job dirs), or an ssh:// URL."""

    model_config = ConfigDict(extra="forbid")

    path: str
    name: str | None = None
    poll_interval_s: float | None = None


class RockConfig(BaseModel):
    """Rock runs (`[[rock]]`): a regression.py work dir (results/, configs/, logs/), the rl-rock
    CLI's run metadata (`rock job run-list` / `run-status`), or both."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="label shown in the console")
    workdir: str | None = Field(None, description="where regression.py writes results/, configs/, logs/")
    experiment: str | None = Field(
        None, description="omitted: every experiment; 'newest'; an id (exact, then prefix); or a results file")
    regression: str | None = Field(None, description="path to regression.py: retry runs it")
    python: str = "python3"
    retry_options: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="explicit regression.py retry options; they override the saved config")
    command: list[str] = Field(default_factory=lambda: ["rock"], description="the rl-rock CLI as argv")
    job_config: str | None = Field(None, description="rock --job-config YAML (it holds the OSS locator and keys)")
    namespace: str | None = None
    experiment_id: str | None = Field(None, description="rock --experiment-id")
    poll_interval_s: float | None = None


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sources: list[SourceConfig] = Field(default_factory=list)
    hosts: list[HostConfig] = Field(default_factory=list)
    read_only: bool = False
    usernames: list[str] = Field(default_factory=list, description="whose leaderboard rows are ours")
    poll_interval_s: float = Field(10.0, gt=0)
    ssh_config: str | None = Field(None, description="like ssh -F; default ~/.ssh/config")
    journal_path: str | None = None
    theme: str | None = None
    keys: dict[str, str] = Field(
        default_factory=dict, description="binding id → key, e.g. experiments.filter = \"f\" (see ? help)"
    )
    policy: Policy = Field(default_factory=Policy)
    baselines_dir: str | None = Field(
        None, description="alignment baselines; default $XDG_CONFIG_HOME/evaldesk/baselines")
    rock: list[RockConfig] = Field(default_factory=list)
    config_path: str | None = Field(None, exclude=True)


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "evaldesk" / "config.toml"


def data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "evaldesk"


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "evaldesk"


def _coerce_env(value: str) -> Any:
    low = value.strip().lower()
    if low in ("true", "yes", "1", "on"):
        return True
    if low in ("false", "no", "0", "off"):
        return False
    if value.strip().startswith("["):
        import json

        try:
            return json.loads(value)
        except ValueError:
            pass
    return value


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """EVALDESK_READ_ONLY=1, EVALDESK_POLICY__ERROR_FRACTION_MAX=0.05 (`__` nests)."""
    out: dict[str, Any] = {}
    for key, value in environ.items():
        if not key.startswith("EVALDESK_") or key in ("EVALDESK_CONFIG",):
            continue
        parts = key[len("EVALDESK_") :].lower().split("__")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = _coerce_env(value)
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(merged.get(k), dict):
            merged[k] = _merge(merged[k], v)
        else:
            merged[k] = v
    return merged


def _env_name(env_over: dict[str, Any], loc: tuple[Any, ...]) -> str | None:
    """The EVALDESK_* variable a bad value came from, so the error names the right place."""
    node: Any = env_over
    parts: list[str] = []
    for p in loc:
        if not isinstance(node, dict) or str(p) not in node:
            return None
        node = node[str(p)]
        parts.append(str(p).upper())
        if not isinstance(node, dict):
            break
    return "EVALDESK_" + "__".join(parts) if parts else None


def load_config(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Config:
    environ = dict(os.environ if environ is None else environ)
    explicit = path is not None or "EVALDESK_CONFIG" in environ
    cfg_path = Path(path or environ.get("EVALDESK_CONFIG") or default_config_path()).expanduser()
    data: dict[str, Any] = {}
    if cfg_path.exists():
        try:
            data = tomllib.loads(cfg_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{cfg_path}: not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{cfg_path}: cannot read: {exc.strerror}") from None
    elif explicit:
        raise ConfigError(f"{cfg_path}: no such config file")
    env_over = _env_overrides(environ)
    data = _merge(data, env_over)
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        env_var = _env_name(env_over, err["loc"])
        where = f"environment variable {env_var}" if env_var else str(cfg_path)
        if err["type"] == "extra_forbidden":
            raise ConfigError(f"{where}: unknown key {key!r}") from None
        raise ConfigError(f"{where}: key {key!r}: {err['msg']}") from None
    cfg.config_path = str(cfg_path) if cfg_path.exists() else None
    return cfg
