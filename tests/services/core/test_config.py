"""Config: TOML in the XDG config dir, EVALDESK_* overrides, one-line errors naming key and place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.audit.verdict import audit_experiment
from services.core.config import ConfigError, load_config
from services.core.plain import dump
from services.core.xdg import default_config_path
from tests.support.harbor_factory import JobBuilder, scan_one, tasks

TOML = """
read_only = false
usernames = ["alice", "alice2"]
poll_interval_s = 30

[[sources]]
path = "/data/jobs"
name = "cluster jobs"

[[hosts]]
name = "login"
host = "login.example.org"
paths = ["/scratch/jobs"]

[policy]
benign_exceptions = ["AgentTimeoutError", "DaytonaError"]
error_fraction_max = 0.15
default_n_rep = 2

[policy.benchmark_sizes]
mini = 4
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


def test_toml_loads(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, TOML), environ={})
    assert cfg.usernames == ["alice", "alice2"] and cfg.poll_interval_s == 30
    assert cfg.sources[0].path == "/data/jobs" and cfg.hosts[0].paths == ["/scratch/jobs"]
    assert cfg.policy.benign_exceptions == ["AgentTimeoutError", "DaytonaError"]
    assert cfg.policy.error_fraction_max == 0.15 and cfg.policy.default_n_rep == 2
    assert cfg.policy.benchmark_sizes == {"mini": 4}
    assert cfg.config_path == str(tmp_path / "config.toml")


def test_default_path_is_in_xdg_config_home(tmp_path: Path) -> None:
    assert default_config_path() == Path(os.environ["XDG_CONFIG_HOME"]) / "evaldesk" / "config.toml"
    default_config_path().parent.mkdir(parents=True)
    default_config_path().write_text("read_only = true\n")
    assert load_config().read_only is True


def test_no_config_file_gives_defaults() -> None:
    cfg = load_config(environ={})
    assert cfg.read_only is False and cfg.sources == [] and cfg.config_path is None
    assert cfg.policy.error_fraction_max == 0.10 and cfg.policy.valid_fraction_min == 0.90


def test_env_overrides_with_double_underscore_nesting(tmp_path: Path) -> None:
    env = {
        "EVALDESK_READ_ONLY": "1",
        "EVALDESK_POLL_INTERVAL_S": "2.5",
        "EVALDESK_POLICY__ERROR_FRACTION_MAX": "0.05",
        "EVALDESK_POLICY__BENIGN_EXCEPTIONS": '["OnlyThisError"]',
        "EVALDESK_POLICY__MONITOR__STUCK_POLLS": "5",
        "UNRELATED": "x",
    }
    cfg = load_config(write(tmp_path, TOML), environ=env)
    assert cfg.read_only is True and cfg.poll_interval_s == 2.5
    assert cfg.policy.error_fraction_max == 0.05
    assert cfg.policy.benign_exceptions == ["OnlyThisError"]
    assert cfg.policy.monitor.stuck_polls == 5
    assert cfg.policy.default_n_rep == 2  # untouched keys keep the file's value


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    p = write(tmp_path, TOML + "\n[policy.extra]\nx = 1\n")
    with pytest.raises(ConfigError) as exc:
        load_config(p, environ={})
    msg = str(exc.value)
    assert "policy.extra" in msg and str(p) in msg and "unknown key" in msg
    assert "\n" not in msg

    p = write(tmp_path, "colour = 'blue'\n")
    with pytest.raises(ConfigError, match="colour"):
        load_config(p, environ={})


def test_wrong_type_names_key_and_file(tmp_path: Path) -> None:
    p = write(tmp_path, 'poll_interval_s = "often"\n')
    with pytest.raises(ConfigError) as exc:
        load_config(p, environ={})
    assert "poll_interval_s" in str(exc.value) and str(p) in str(exc.value)

    p = write(tmp_path, "[policy]\nerror_fraction_max = 2.0\n")
    with pytest.raises(ConfigError, match=r"policy\.error_fraction_max"):
        load_config(p, environ={})

    p = write(tmp_path, "[[sources]]\nname = 'no path'\n")
    with pytest.raises(ConfigError, match=r"sources\.0\.path"):
        load_config(p, environ={})


def test_bad_env_value_names_the_variable_not_the_file(tmp_path: Path) -> None:
    p = write(tmp_path, TOML)
    with pytest.raises(ConfigError) as exc:
        load_config(p, environ={"EVALDESK_POLICY__ERROR_FRACTION_MAX": "lots"})
    msg = str(exc.value)
    assert "EVALDESK_POLICY__ERROR_FRACTION_MAX" in msg and "policy.error_fraction_max" in msg
    assert str(p) not in msg
    with pytest.raises(ConfigError, match=r"EVALDESK_POLICY__NOPE.*unknown key 'policy.nope'"):
        load_config(p, environ={"EVALDESK_POLICY__NOPE": "1"})


def test_env_vars_that_are_not_config_keys_never_stop_the_loader(tmp_path: Path) -> None:
    # display switches read by the widgets, a secret someone named EVALDESK_*: not configuration
    env = {"EVALDESK_ICONS": "ascii", "EVALDESK_ASCII": "1", "EVALDESK_SUPABASE_KEY": "k", "EVALDESK_NOPE": "1"}
    cfg = load_config(write(tmp_path, TOML), environ={**env, "EVALDESK_READ_ONLY": "yes"})
    assert cfg.read_only is True and cfg.poll_interval_s == 30
    assert "icons" not in dump(cfg) and "supabase_key" not in dump(cfg)


@pytest.mark.parametrize(("var", "meant"), [
    ("EVALDESK_READONLY", "EVALDESK_READ_ONLY"),
    ("EVALDESK_POLL_INTERVAL", "EVALDESK_POLL_INTERVAL_S"),
    ("EVALDESK_POLICY_ERROR_FRACTION_MAX", "EVALDESK_POLICY__ERROR_FRACTION_MAX"),
    ("EVALDESK_POLCY__ERROR_FRACTION_MAX", "EVALDESK_POLICY__ERROR_FRACTION_MAX"),
])
def test_a_near_miss_of_a_key_is_an_error_naming_the_key_meant(var: str, meant: str) -> None:
    # a misspelt read-only switch must not leave writes on without a word
    with pytest.raises(ConfigError, match=rf"environment variable {var}: not a config key; did you mean {meant}\?"):
        load_config(environ={var: "1"})


def test_display_switches_reach_the_checklist_and_the_cli_starts(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.harbor_factory import healthy_job
    from widgets.checklist import ASCII_ICONS, PLAIN_ICONS, icon_set

    job = healthy_job(tmp_path).write()
    env = {**os.environ, "EVALDESK_ICONS": "ascii", "EVALDESK_ASCII": "1"}
    p = subprocess.run([sys.executable, "-m", "tui.cli", "--batch", "list", "--format", "json", str(job)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "unknown key" not in p.stderr

    monkeypatch.setenv("TERM", "xterm-256color")
    assert icon_set() == PLAIN_ICONS
    monkeypatch.setenv("EVALDESK_ASCII", "1")
    assert icon_set() == ASCII_ICONS
    monkeypatch.setenv("EVALDESK_ICONS", "plain")
    assert icon_set() == PLAIN_ICONS


def test_invalid_toml_and_missing_explicit_file(tmp_path: Path) -> None:
    p = write(tmp_path, "read_only = \n")
    with pytest.raises(ConfigError, match=r"not valid TOML") as exc:
        load_config(p, environ={})
    assert str(p) in str(exc.value)
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "absent.toml", environ={})
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(environ={"EVALDESK_CONFIG": str(tmp_path / "absent.toml")})


def test_policy_from_config_changes_the_audit(tmp_path: Path) -> None:
    job = JobBuilder(tmp_path / "jobs", n_attempts=1, n_total_trials=10)
    for task in tasks(8):
        job.add(task, 1.0)
    job.add("infra-a", 0.0, "DaytonaError")
    job.add("infra-b", 0.0, "DaytonaError")
    exp = scan_one(job.write())
    default = load_config(environ={})
    assert audit_experiment(exp, default.policy).check("error_gate").status == "fail"
    tuned = load_config(write(tmp_path, TOML), environ={})
    assert audit_experiment(exp, tuned.policy).check("error_gate").status == "pass"
