"""evaldesk's configuration: TOML in the XDG config dir, overridable by EVALDESK_* env vars.

Secrets are never stored here: a backend's key is named by the env var that holds it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from services.core.policy import Policy
from services.core.xdg import config_file

CAMPAIGN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class ConfigError(Exception):
    """A one-line, human message naming the key and the file."""


class FieldValueError(ValueError):
    """A bad value of one field, found by a section's `__post_init__`: the error names the field's
    key (`csbench.campaigns`), as a check of the section as a whole names the section."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.field = name


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


@dataclass(kw_only=True)
class CommandConfig:
    """How a site resumes and re-runs a Harbor job where it lives (`[commands]`, or
    `[hosts.commands]` / `[sources.commands]` for one host or source)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    resume: CommandTemplate = field(default_factory=_harbor_resume, metadata={
        "description": "re-runs what a resume set aside; Harbor's own by default"})
    rerun: CommandTemplate = field(default_factory=_harbor_start, metadata={
        "description": "starts a fresh job from its config"})
    cwd: str | None = field(default=None, metadata={
        "description": "working dir the commands run in (default: the home dir on a host, the current dir here)"})
    env_from: dict[str, str] = field(default_factory=dict, metadata={
        "description": "NAME = \"ENV_VAR\": passed to the command, read from evaldesk's own environment when it "
        "starts; values never recorded"})


@dataclass(kw_only=True)
class HostConfig:
    """An SSH host whose Harbor job dirs evaldesk reads (`[[hosts]]`)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    name: str = field(metadata={"description": "label shown in the console"})
    host: str = field(metadata={"description": "hostname or ~/.ssh/config alias"})
    user: str | None = None
    port: int | None = None
    paths: list[str] = field(default_factory=list, metadata={"description": "job dirs or folders of job dirs"})
    proxy_jump: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = field(default=None, metadata={
        "description": "known_hosts file; default ~/.ssh/known_hosts"})
    insecure_no_host_key_check: bool = field(default=False, metadata={
        "description": "turn host-key checking off for this host only; shown in the UI"})
    poll_interval_s: float | None = None
    python: str = "python3"
    slurm_job_id_key: str = field(default="slurm_job_id", metadata={
        "description": "job config key holding the SLURM job id"})
    slurm_env_file: str = field(default="meta.env", metadata={"description": "file in the job dir with SLURM_JOB_ID=…"})
    slurm_job_ids: dict[str, str] = field(default_factory=dict, metadata={
        "description": "job dir name or path → SLURM job id, when the job files name none"})
    scan_timeout_s: float = field(default=120.0, metadata={
        "gt": 0, "description": "give up on a remote scan after this long"})
    commands: CommandConfig | None = field(default=None, metadata={
        "description": "this host's resume/re-run commands"})


@dataclass(kw_only=True)
class SourceConfig:
    """A local path (job dir or folder of job dirs), or an ssh:// URL."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    path: str
    name: str | None = None
    poll_interval_s: float | None = None
    commands: CommandConfig | None = field(default=None, metadata={
        "description": "this source's resume/re-run commands"})


ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


@dataclass(kw_only=True)
class StoreConfig:
    """Harbor job dirs in an object store (`[[stores]]`): `gs://bucket/prefix` or
    `s3://bucket/prefix`. Credentials are the client library's own (ADC, the AWS chain)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    url: str = field(metadata={"description": "gs://bucket/prefix or s3://bucket/prefix: one job, or a prefix of jobs"})
    name: str | None = None
    endpoint: str | None = field(default=None, metadata={
        "description": "a GCS- or S3-compatible endpoint; default: the library's (STORAGE_EMULATOR_HOST, "
        "AWS_ENDPOINT_URL, or the cloud's own)"})
    region: str | None = None
    project: str | None = None
    poll_interval_s: float | None = None
    # S3 takes parts of 5 MiB to 5 GiB (GCS copies by rewrite, in as many calls as it asks for)
    copy_part_mib: int | None = field(default=None, metadata={
        "ge": 5, "le": 5120, "description": "S3: a copy of an object over 5 GiB goes in parts of this many MiB "
        "(default 512)"})
    commands: CommandConfig | None = field(default=None, metadata={
        "description": "resume: e.g. the launcher with the same --job_name"})
    status: CommandTemplate | None = field(default=None, metadata={
        "description": "prints CSV `job,state` rows from the launcher's jobs table; without it a job's state comes "
        "from its aggregate"})

    def __post_init__(self) -> None:
        if self.copy_part_mib is not None and not self.url.startswith("s3://"):
            raise ValueError("copy_part_mib is for s3:// stores (GCS copies a large object by rewrite)")


@dataclass(kw_only=True)
class LeaderboardTables:
    """Table names on the leaderboard (DESIGN 8's defaults)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    jobs: str = "sandbox_jobs"
    models: str = "models"
    benchmarks: str = "benchmarks"
    usage: str = "sandbox_trial_model_usage"
    benchmark_tasks: str = "sandbox_benchmark_tasks"


@dataclass(kw_only=True)
class LeaderboardConfig:
    """`[leaderboard]`: a Supabase (PostgREST) leaderboard. The key is read from the env var
    named by `key_env`, never from the config."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    url: str | None = field(default=None, metadata={"description": "the Supabase project URL; unset: no leaderboard"})
    key_env: str = field(default="SUPABASE_KEY", metadata={
        "pattern": ENV_NAME, "description": "NAME of the env var holding the key"})
    usernames: list[str] = field(default_factory=list, metadata={
        "description": "whose rows are ours; default: top-level usernames"})
    tables: LeaderboardTables = field(default_factory=LeaderboardTables)
    columns: dict[str, str] = field(default_factory=dict, metadata={
        "description": "evaldesk's column name → the table's"})
    timeout_s: float = field(default=15.0, metadata={"gt": 0})
    poll_interval_s: float = field(default=60.0, metadata={"gt": 0})


@dataclass(kw_only=True)
class TracesConfig:
    """`[traces]`: where trace datasets live (the Hugging Face Hub or any HF_ENDPOINT)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    endpoint: str | None = field(default=None, metadata={
        "description": "default: $HF_ENDPOINT, else https://huggingface.co"})
    token_env: str = field(default="HF_TOKEN", metadata={
        "pattern": ENV_NAME, "description": "NAME of the env var holding the token"})
    org: str | None = field(default=None, metadata={"description": "the namespace new trace datasets go to"})
    repo_template: str = field(default="{org}/{job}-traces", metadata={
        "description": "the dataset id of a run's traces"})
    timeout_s: float = field(default=30.0, metadata={"gt": 0})


@dataclass(kw_only=True)
class CsbenchConfig:
    """csbench cloud campaigns, read by id through the `csbench` CLI (`[csbench]`)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    config: str = field(metadata={
        "description": "csbench's own YAML (target.region, target.blob_bucket …), passed as --config"})
    campaigns: list[str] = field(default_factory=list, metadata={"description": "campaign ids, e.g. camp-ab12cd34"})
    results_dir: str | None = field(default=None, metadata={
        "description": "`csbench fetch --dest` puts each campaign in <results_dir>/<campaign id>; default "
        "$XDG_DATA_HOME/evaldesk/csbench"})
    workdir: str | None = field(default=None, metadata={
        "description": "where csbench commands run (teardown runs terraform in infra/terraform/aliyun-iam under "
        "it); default: the checkout holding `config`"})
    executable: str = field(default="csbench", metadata={"description": "the csbench program"})
    expect_real: bool = field(default=True, metadata={
        "description": "campaigns are meant to be real runs (target.mode: real)"})
    timeout_s: float = field(default=120.0, metadata={
        "gt": 0, "description": "give up on one csbench status/logs call after this long"})
    plans: list[str] = field(default_factory=list, metadata={
        "description": "submit plans (configs/*.plan.yaml) the console offers to `csbench submit`, each after its "
        "preflight"})
    watchdog_timeout_s: float = field(default=5400.0, metadata={
        "description": "`csbench submit --watchdog-timeout`: the controller destroys itself after this long "
        "(csbench's default, 90 min)"})

    def __post_init__(self) -> None:
        # an id travels as one argv word: one that looks like an option would be read as one
        bad = [i for i in self.campaigns if not CAMPAIGN_ID.match(i)]
        if bad:
            raise FieldValueError("campaigns", f"not a campaign id: {bad[0]!r} (letters, digits, '.', '_', '-'; "
                                  "e.g. camp-ab12cd34)")


@dataclass(kw_only=True)
class AISBenchConfig:
    """`[aisbench]`: where AISBench eval hosts are described and tasks are remembered."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    hosts_file: str = field(default="~/.ais-bench-eval/hosts.json", metadata={
        "description": "eval hosts: host/port/user/image/benchmark_src/task_root (a missing file means none)"})
    hosts: list[dict[str, Any]] = field(default_factory=list, metadata={
        "description": "more hosts, same fields as the file"})
    tasks_file: str | None = field(default=None, metadata={
        "description": "the task table of remote task roots; default $XDG_STATE_HOME/evaldesk/aisbench/tasks.json"})
    api_key_env: str = field(default="AISBENCH_API_KEY", metadata={
        "description": "env var holding the model API key (never the key)"})


def _rock_cli() -> list[str]:
    return ["rock"]


@dataclass(kw_only=True)
class RockConfig:
    """Rock runs (`[[rock]]`): a regression.py work dir (results/, configs/, logs/), the rl-rock
    CLI's run metadata (`rock job run-list` / `run-status`), or both."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    name: str = field(metadata={"description": "label shown in the console"})
    workdir: str | None = field(default=None, metadata={
        "description": "where regression.py writes results/, configs/, logs/"})
    experiment: str | None = field(default=None, metadata={
        "description": "omitted: every experiment; 'newest'; an id (exact, then prefix); or a results file"})
    regression: str | None = field(default=None, metadata={"description": "path to regression.py: retry runs it"})
    python: str = "python3"
    retry_options: dict[str, str | int | float | bool] = field(default_factory=dict, metadata={
        "description": "explicit regression.py retry options; they override the saved config"})
    command: list[str] = field(default_factory=_rock_cli, metadata={"description": "the rl-rock CLI as argv"})
    job_config: str | None = field(default=None, metadata={
        "description": "rock --job-config YAML (it holds the OSS locator and keys)"})
    namespace: str | None = None
    experiment_id: str | None = field(default=None, metadata={"description": "rock --experiment-id"})
    poll_interval_s: float | None = None


@dataclass(kw_only=True)
class Config:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    sources: list[SourceConfig] = field(default_factory=list)
    hosts: list[HostConfig] = field(default_factory=list)
    stores: list[StoreConfig] = field(default_factory=list)
    read_only: bool = False
    scan_cache: bool = field(default=True, metadata={
        "description": "keep parsed trials in $XDG_CACHE_HOME/evaldesk (--no-cache)"})
    usernames: list[str] = field(default_factory=list, metadata={"description": "whose leaderboard rows are ours"})
    poll_interval_s: float = field(default=10.0, metadata={"gt": 0})
    ssh_config: str | None = field(default=None, metadata={"description": "like ssh -F; default ~/.ssh/config"})
    journal_path: str | None = None
    theme: str | None = None
    keys: dict[str, str] = field(default_factory=dict, metadata={
        "description": "binding id → key, e.g. experiments.filter = \"f\" (see ? help)"})
    policy: Policy = field(default_factory=Policy)
    leaderboard: LeaderboardConfig = field(default_factory=LeaderboardConfig)
    traces: TracesConfig = field(default_factory=TracesConfig)
    csbench: CsbenchConfig | None = None
    commands: CommandConfig = field(default_factory=CommandConfig, metadata={"description": "resume/re-run here"})
    aisbench: AISBenchConfig = field(default_factory=AISBenchConfig)
    baselines_dir: str | None = field(default=None, metadata={
        "description": "alignment baselines; default $XDG_CONFIG_HOME/evaldesk/baselines"})
    rock: list[RockConfig] = field(default_factory=list)
    config_path: str | None = field(default=None, metadata={"exclude": True})
    read_only_why: str | None = field(default=None, metadata={"exclude": True, "description": (
        "where read-only mode came from (the flag, the environment, the file), for the refusal to say")})

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
ENV_KEYS = frozenset(f.name for f in dataclasses.fields(Config) if f.name not in ("config_path", "read_only_why"))


def _misspelt_key(parts: list[str]) -> str | None:
    """The EVALDESK_* variable meant by one whose first part names no key, or None when it is
    not near one. `read_only` typed `readonly` must not leave writes on without a word; a display
    switch (EVALDESK_ICONS), or a secret someone chose to call EVALDESK_SOMETHING, is nowhere near.
    """
    import difflib

    head, rest = parts[0], parts[1:]
    if not rest:
        for f in dataclasses.fields(Config):
            key, factory = f.name, f.default_factory
            nested = isinstance(factory, type) and (factory is dict or dataclasses.is_dataclass(factory))
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


def _as_json(data: dict[str, Any]) -> str:
    """The file's values as JSON text, for pydantic's strict check: its strict Python mode takes
    a section only as the dataclass itself, never as a dict. TOML's dates and times become ISO
    text (a str key holding one is still refused, by the lax pass over the same value). The
    stdlib's json, not orjson: it writes inf and nan as tokens pydantic reads back as floats
    (orjson writes null), and an integer past 64 bits as it is (orjson refuses it)."""
    import json
    from datetime import date, time

    def when(value: object) -> str:
        if isinstance(value, date | time):
            return value.isoformat()
        raise TypeError(f"{type(value).__name__} is not a TOML value")

    return json.dumps(data, default=when)


# A wrong kind of value, worded as pydantic's Python mode words it for a model (the strict pass
# reads JSON: "Input should be an object", "… a valid array").
_WORDING: dict[str, str] = {
    "dict_type": "Input should be a valid dictionary",
    "list_type": "Input should be a valid list",
    "dataclass_type": "Input should be a valid dictionary or instance of {class_name}",
}


@functools.cache
def _strict_adapter() -> Any:
    """pydantic's reader of the file's JSON, made once (as plain.validate's own)."""
    from pydantic import TypeAdapter

    return TypeAdapter(Config)


def _validated(data: dict[str, Any], env_over: dict[str, Any], cfg_path: Path) -> Config:
    """The file's data with the environment's overrides, checked by pydantic (imported only now: a
    run with neither never loads it)."""
    from pydantic import ValidationError

    from services.core.plain import validate

    try:
        if data:
            # the file's values as written: "yes" is not a bool, "0.1" is not a number (the
            # environment's strings are converted below, as they can only be strings)
            _strict_adapter().validate_json(_as_json(data), strict=True)
        return validate(Config, _merge(data, env_over))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        cause = err.get("ctx", {}).get("error")
        if isinstance(cause, FieldValueError):  # a section's check of one of its fields
            loc = (*loc, cause.field)
        key = ".".join(str(p) for p in loc)
        env_var = _env_name(env_over, loc)
        where = f"environment variable {env_var}" if env_var else str(cfg_path)
        # a dataclass's unknown key is an unexpected keyword argument
        if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            raise ConfigError(f"{where}: unknown key {key!r}") from None
        wording = _WORDING.get(err["type"])
        msg = wording.format(**err.get("ctx", {})) if wording else err["msg"]
        raise ConfigError(f"{where}: key {key!r}: {msg}") from None


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
    cfg = _validated(data, env_over, cfg_path) if data or env_over else Config()
    cfg.config_path = str(cfg_path) if cfg_path.exists() else None
    if cfg.read_only:
        cfg.read_only_why = ("EVALDESK_READ_ONLY in the environment" if "read_only" in env_over
                             else f"read_only = true in {cfg_path}")
    return cfg
