"""Command templates from the config become argv, element by element: nothing a job dir's name
holds is ever read by a shell. Which host's or source's commands apply, and Harbor's own
error-policy table that decides the default resume."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from services.core.config import CommandConfig, Config, ConfigError, SourceConfig, load_config
from services.core.plain import dump, validate
from services.core.policy import ERROR_POLICIES, UNKNOWN_ERROR_POLICY, error_policy, should_retry
from services.harbor.source import HarborSource
from services.harbor.ssh_source import SSHHarborSource
from services.remediations.job_commands import TemplateError, commands_for, expand, printable, runner_of
from services.transport.process import LocalRunner, SSHRunner
from services.transport.ssh import HostSpec

VALUES = {"job_dir": "/data/my jobs/run; rm -rf ~", "job_name": "run; rm -rf ~", "jobs_dir": "/data/my jobs",
          "new_job_name": "n", "new_job_dir": "/data/my jobs/n"}


def test_the_default_resume_gets_one_f_per_type_set_aside() -> None:
    argv = expand(CommandConfig().resume, VALUES, ["CancelledError", "DaytonaError"])
    assert argv == ["harbor", "jobs", "resume", "-p", "/data/my jobs/run; rm -rf ~",
                    "-f", "CancelledError", "-f", "DaytonaError"]
    assert expand(CommandConfig().resume, VALUES, []) == ["harbor", "jobs", "resume", "-p", VALUES["job_dir"]]


def test_a_string_is_split_before_placeholders_are_filled_so_a_path_stays_one_argument() -> None:
    argv = expand("sbatch --export=ALL,JOB_DIR={job_dir},TYPES={types} 'eval harbor.sbatch' --resume {types}",
                  VALUES, ["A", "B"])
    assert argv == ["sbatch", "--export=ALL,JOB_DIR=/data/my jobs/run; rm -rf ~,TYPES=A,B", "eval harbor.sbatch",
                    "--resume", "A", "B"]
    assert expand(["x", "--filter-error-type={type}"], VALUES, ["A", "B"]) == [
        "x", "--filter-error-type=A", "--filter-error-type=B"]


@pytest.mark.parametrize(("template", "match"), [
    ("harbor jobs resume -p {jobdir}", "unknown placeholder {jobdir}"),
    ("harbor 'unclosed", "cannot split"),
    ("", "the command is empty"),
])
def test_a_bad_template_is_an_error_naming_it(template: str, match: str) -> None:
    with pytest.raises(TemplateError, match=match):
        expand(template, VALUES, [], where="the resume command")


def test_commands_come_from_the_host_or_the_source_else_the_defaults(tmp_path: Path) -> None:
    site = CommandConfig(resume="sbatch x.sbatch", cwd="/e")
    mine = CommandConfig(resume="my-resume {job_dir}")
    cfg = validate(Config, {
        "hosts": [{"name": "cluster", "host": "login-a", "commands": dump(site)}],
        "sources": [{"path": str(tmp_path), "name": "mine", "commands": dump(mine)}],
    })
    ssh = SSHHarborSource(HostSpec("login-a"), ["/e/jobs"], label="cluster:/e/jobs", slurm=False)
    other = SSHHarborSource(HostSpec("login-b"), ["/e/jobs"], slurm=False)
    assert commands_for(ssh, cfg) == site
    assert commands_for(other, cfg) == cfg.commands
    assert commands_for(HarborSource(tmp_path, label="mine"), cfg) == mine
    assert commands_for(HarborSource(tmp_path / "elsewhere", label="x"), cfg) == cfg.commands
    assert isinstance(runner_of(ssh), SSHRunner) and runner_of(ssh).host == "login-a"
    assert isinstance(runner_of(HarborSource(tmp_path)), LocalRunner)


def test_commands_in_toml(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[commands]\nresume = ["harbor", "jobs", "resume", "-p", "{job_dir}", ["-f", "{type}"]]\n'
                    '[[hosts]]\nname = "c"\nhost = "h"\n[hosts.commands]\n'
                    'resume = "sbatch --export=ALL,JOB_DIR={job_dir} eval_harbor.sbatch --resume"\n'
                    'env_from = {OPENAI_API_KEY = "MY_KEY"}\n')
    cfg = load_config(path, environ={})
    assert cfg.hosts[0].commands is not None and cfg.hosts[0].commands.env_from == {"OPENAI_API_KEY": "MY_KEY"}
    assert SourceConfig(path="/x").commands is None
    path.write_text("[commands]\nresum = 'x'\n")
    with pytest.raises(ConfigError, match=r"unknown key 'commands\.resum'"):
        load_config(path, environ={})
    assert tomllib.loads('[commands]\nresume = "a"\n')  # a plain string is fine too


def test_printable_drops_escapes_and_control_characters() -> None:
    assert printable("\x1b[31mred\x1b[0m\r\n50%\r100%\x07\tok\n") == "red\n50%\n100%\tok\n"


def test_harbors_error_policy_table_is_mirrored() -> None:
    # one or more per group of harbor/models/trial/error_policy.py (0.26)
    assert error_policy("DaytonaError") == UNKNOWN_ERROR_POLICY and should_retry("DaytonaError")
    assert should_retry("VerificationNotCompletedError")  # not in Harbor's table: retried
    for name in ("EnvironmentStartTimeoutError", "ApiRateLimitError", "Timeout"):
        assert should_retry(name), name
    for name in ("VerifierOutputParseError", "BadRequestError", "ModelNotFoundError", "CancelledError",
                 "NonZeroAgentExitCodeError", "AgentTimeoutError", "ContentPolicyViolationError"):
        assert not should_retry(name), name
    assert ERROR_POLICIES["AgentTimeoutError"].has_valid_reward
    assert not ERROR_POLICIES["ApiRateLimitError"].has_valid_reward and ERROR_POLICIES["ApiRateLimitError"].should_grade
    assert len(ERROR_POLICIES) == 58
