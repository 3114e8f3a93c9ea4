"""evaldesk's configuration: TOML in the XDG config dir, overridable by EVALDESK_* env vars.

Secrets are never stored here: a backend's key is named by the env var that holds it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from services.core.policy import Policy
from services.core.xdg import config_file

CAMPAIGN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class ConfigError(Exception):
    """A one-line, human message naming the key and the file."""


# A command as the config writes it: one string (split like a shell would, before any
# placeholder is filled in) or a list of argv elements, where a nested list is repeated once
# per exception type set aside. Placeholders: {job_dir} {job_name} {jobs_dir} {types} {type}
# {new_job_name} {new_job_dir} — see services/remediations/job_commands.py.
CommandTemplate = str | list[str | list[str]]


def _harbor_resume() -> CommandTemplate:
    return ["harbor", "jobs", "resume", "-p", "{job_dir}", ["-f", "{type}"]]


def _harbor_start() -> CommandTemplate:
    return ["harbor", "jobs", "start", "-c", "{job_dir}/config.json", "--job-name", "{new_job_name}",
            "-o", "{jobs_dir}"]


class CommandConfig(BaseModel):
    """How a site resumes and re-runs a Harbor job where it lives (`[commands]`, or
    `[hosts.commands]` / `[sources.commands]` for one host or source)."""

    model_config = ConfigDict(extra="forbid")

    resume: CommandTemplate = Field(default_factory=_harbor_resume,
                                    description="re-runs what a resume set aside; Harbor's own by default")
    rerun: CommandTemplate = Field(default_factory=_harbor_start, description="starts a fresh job from its config")
    cwd: str | None = Field(None, description="working dir the commands run in (default: the home dir on a "
                            "host, the current dir here)")
    env_from: dict[str, str] = Field(
        default_factory=dict, description="NAME = \"ENV_VAR\": passed to the command, read from evaldesk's own "
        "environment when it starts; values never recorded")


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
    commands: CommandConfig | None = Field(None, description="this host's resume/re-run commands")


class SourceConfig(BaseModel):
    """A local path (job dir or folder of job dirs), or an ssh:// URL."""

    model_config = ConfigDict(extra="forbid")

    path: str
    name: str | None = None
    poll_interval_s: float | None = None
    commands: CommandConfig | None = Field(None, description="this source's resume/re-run commands")


ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class StoreConfig(BaseModel):
    """Harbor job dirs in an object store (`[[stores]]`): `gs://bucket/prefix` or
    `s3://bucket/prefix`. Credentials are the client library's own (ADC, the AWS chain)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="gs://bucket/prefix or s3://bucket/prefix: one job, or a prefix of jobs")
    name: str | None = None
    endpoint: str | None = Field(None, description="a GCS- or S3-compatible endpoint; default: the library's "
                                 "(STORAGE_EMULATOR_HOST, AWS_ENDPOINT_URL, or the cloud's own)")
    region: str | None = None
    project: str | None = None
    poll_interval_s: float | None = None
    # S3 takes parts of 5 MiB to 5 GiB (GCS copies by rewrite, in as many calls as it asks for)
    copy_part_mib: int | None = Field(None, ge=5, le=5120, description="S3: a copy of an object over 5 GiB goes in "
                                      "parts of this many MiB (default 512)")
    commands: CommandConfig | None = Field(None, description="resume: e.g. the launcher with the same --job_name")
    status: CommandTemplate | None = Field(None, description="prints CSV `job,state` rows from the launcher's jobs "
                                           "table; without it a job's state comes from its aggregate")

    @model_validator(mode="after")
    def _parts_are_s3s(self) -> StoreConfig:
        if self.copy_part_mib is not None and not self.url.startswith("s3://"):
            raise ValueError("copy_part_mib is for s3:// stores (GCS copies a large object by rewrite)")
        return self


class LeaderboardTables(BaseModel):
    """Table names on the leaderboard (DESIGN 8's defaults)."""

    model_config = ConfigDict(extra="forbid")

    jobs: str = "sandbox_jobs"
    models: str = "models"
    benchmarks: str = "benchmarks"
    usage: str = "sandbox_trial_model_usage"
    benchmark_tasks: str = "sandbox_benchmark_tasks"


class LeaderboardConfig(BaseModel):
    """`[leaderboard]`: a Supabase (PostgREST) leaderboard. The key is read from the env var
    named by `key_env`, never from the config."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(None, description="the Supabase project URL; unset: no leaderboard")
    key_env: str = Field("SUPABASE_KEY", pattern=ENV_NAME, description="NAME of the env var holding the key")
    usernames: list[str] = Field(default_factory=list, description="whose rows are ours; default: top-level usernames")
    tables: LeaderboardTables = Field(default_factory=LeaderboardTables)
    columns: dict[str, str] = Field(default_factory=dict, description="evaldesk's column name → the table's")
    timeout_s: float = Field(15.0, gt=0)
    poll_interval_s: float = Field(60.0, gt=0)


class TracesConfig(BaseModel):
    """`[traces]`: where trace datasets live (the Hugging Face Hub or any HF_ENDPOINT)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str | None = Field(None, description="default: $HF_ENDPOINT, else https://huggingface.co")
    token_env: str = Field("HF_TOKEN", pattern=ENV_NAME, description="NAME of the env var holding the token")
    org: str | None = Field(None, description="the namespace new trace datasets go to")
    repo_template: str = Field("{org}/{job}-traces", description="the dataset id of a run's traces")
    timeout_s: float = Field(30.0, gt=0)
class CsbenchConfig(BaseModel):
    """csbench cloud campaigns, read by id through the `csbench` CLI (`[csbench]`)."""

    model_config = ConfigDict(extra="forbid")

    config: str = Field(description="csbench's own YAML (target.region, target.blob_bucket …), passed as --config")
    campaigns: list[str] = Field(default_factory=list, description="campaign ids, e.g. camp-ab12cd34")
    results_dir: str | None = Field(None, description="`csbench fetch --dest` puts each campaign in "
                                    "<results_dir>/<campaign id>; default $XDG_DATA_HOME/evaldesk/csbench")
    workdir: str | None = Field(None, description="where csbench commands run (teardown runs terraform in "
                                "infra/terraform/aliyun-iam under it); default: the checkout holding `config`")
    executable: str = Field("csbench", description="the csbench program")
    expect_real: bool = Field(True, description="campaigns are meant to be real runs (target.mode: real)")
    timeout_s: float = Field(120.0, gt=0, description="give up on one csbench status/logs call after this long")
    plans: list[str] = Field(default_factory=list, description="submit plans (configs/*.plan.yaml) the console "
                             "offers to `csbench submit`, each after its preflight")
    watchdog_timeout_s: float = Field(5400.0, description="`csbench submit --watchdog-timeout`: the controller "
                                      "destroys itself after this long (csbench's default, 90 min)")

    @field_validator("campaigns")
    @classmethod
    def _ids(cls, ids: list[str]) -> list[str]:
        # an id travels as one argv word: one that looks like an option would be read as one
        bad = [i for i in ids if not CAMPAIGN_ID.match(i)]
        if bad:
            raise ValueError(f"not a campaign id: {bad[0]!r} (letters, digits, '.', '_', '-'; e.g. camp-ab12cd34)")
        return ids


class AISBenchConfig(BaseModel):
    """`[aisbench]`: where AISBench eval hosts are described and tasks are remembered."""

    model_config = ConfigDict(extra="forbid")

    hosts_file: str = Field("~/.ais-bench-eval/hosts.json", description="eval hosts: host/port/user/image/"
                            "benchmark_src/task_root (a missing file means none)")
    hosts: list[dict[str, Any]] = Field(default_factory=list, description="more hosts, same fields as the file")
    tasks_file: str | None = Field(None, description="the task table of remote task roots; default "
                                   "$XDG_STATE_HOME/evaldesk/aisbench/tasks.json")
    api_key_env: str = Field("AISBENCH_API_KEY", description="env var holding the model API key (never the key)")


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
    stores: list[StoreConfig] = Field(default_factory=list)
    read_only: bool = False
    scan_cache: bool = Field(
        True, description="keep parsed trials in $XDG_CACHE_HOME/evaldesk (--no-cache)")
    usernames: list[str] = Field(default_factory=list, description="whose leaderboard rows are ours")
    poll_interval_s: float = Field(10.0, gt=0)
    ssh_config: str | None = Field(None, description="like ssh -F; default ~/.ssh/config")
    journal_path: str | None = None
    theme: str | None = None
    keys: dict[str, str] = Field(
        default_factory=dict, description="binding id → key, e.g. experiments.filter = \"f\" (see ? help)"
    )
    policy: Policy = Field(default_factory=Policy)
    leaderboard: LeaderboardConfig = Field(default_factory=LeaderboardConfig)
    traces: TracesConfig = Field(default_factory=TracesConfig)
    csbench: CsbenchConfig | None = None
    commands: CommandConfig = Field(default_factory=CommandConfig, description="resume/re-run here")
    aisbench: AISBenchConfig = Field(default_factory=AISBenchConfig)
    baselines_dir: str | None = Field(
        None, description="alignment baselines; default $XDG_CONFIG_HOME/evaldesk/baselines")
    rock: list[RockConfig] = Field(default_factory=list)
    config_path: str | None = Field(None, exclude=True)
    read_only_why: str | None = Field(None, exclude=True, description=(
        "where read-only mode came from (the flag, the environment, the file), for the refusal to say"))

    def leaderboard_usernames(self) -> list[str]:
        """Whose leaderboard rows are ours: `[leaderboard] usernames`, else the top-level list."""
        return list(self.leaderboard.usernames or self.usernames)


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


# Keys the environment may set: every field of the file's top level (config_path is where the
# file was found, not a setting).
ENV_KEYS = frozenset(name for name in Config.model_fields if name not in ("config_path", "read_only_why"))


def _misspelt_key(parts: list[str]) -> str | None:
    """The EVALDESK_* variable meant by one whose first part names no key, or None when it is
    not near one. `read_only` typed `readonly` must not leave writes on without a word; a display
    switch (EVALDESK_ICONS), or a secret someone chose to call EVALDESK_SOMETHING, is nowhere near.
    """
    import difflib

    head, rest = parts[0], parts[1:]
    if not rest:
        for key, field in Config.model_fields.items():
            factory = field.default_factory
            nested = isinstance(factory, type) and (factory is dict or issubclass(factory, BaseModel))
            # EVALDESK_POLICY_ERROR_FRACTION_MAX: a nested key with one underscore instead of two
            if nested and key in ENV_KEYS and head.startswith(f"{key}_"):
                return f"EVALDESK_{key.upper()}__{head[len(key) + 1:].upper()}"
    close = difflib.get_close_matches(head, sorted(ENV_KEYS), n=1, cutoff=0.8)
    if not close:
        return None
    return "EVALDESK_" + "__".join(p.upper() for p in [close[0], *rest])


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """EVALDESK_READ_ONLY=1, EVALDESK_POLICY__ERROR_FRACTION_MAX=0.05 (`__` nests).

    The rule: a variable whose first part names a config key overrides that key, and is checked
    as strictly as the file (a wrong nested key or type is an error naming the variable). Any
    other EVALDESK_* variable is not configuration — display switches such as EVALDESK_ICONS or
    EVALDESK_ASCII, read where they apply — and is left alone, unless it is a near miss of a key,
    which is an error saying which variable was meant.
    """
    out: dict[str, Any] = {}
    for key, value in environ.items():
        # EVALDESK_CRASH_AT / EVALDESK_STOP_AT name write-path checkpoints, not config keys
        if not key.startswith("EVALDESK_") or key in ("EVALDESK_CONFIG", "EVALDESK_CRASH_AT", "EVALDESK_STOP_AT"):
            continue
        parts = key[len("EVALDESK_") :].lower().split("__")
        if parts[0] not in ENV_KEYS:
            meant = _misspelt_key(parts)
            if meant is not None:
                raise ConfigError(f"environment variable {key}: not a config key; did you mean {meant}?")
            continue
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
    cfg_path = config_file(str(path) if path is not None else None, environ)
    data: dict[str, Any] = {}
    if cfg_path.exists():
        from services.core.input_files import InputFileError, read_toml

        try:
            data = read_toml(cfg_path)
        except InputFileError as exc:
            raise ConfigError(str(exc)) from None
        except OSError as exc:
            raise ConfigError(f"{cfg_path}: cannot read: {exc.strerror}") from None
    elif explicit:
        raise ConfigError(f"{cfg_path}: no such config file")
    env_over = _env_overrides(environ)
    try:
        if data:
            # the file's values as written: "yes" is not a bool, "0.1" is not a number (the
            # environment's strings are converted below, as they can only be strings)
            Config.model_validate(data, strict=True)
        data = _merge(data, env_over)
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
    if cfg.read_only:
        cfg.read_only_why = ("EVALDESK_READ_ONLY in the environment" if "read_only" in env_over
                             else f"read_only = true in {cfg_path}")
    return cfg
