"""`env_from` on a host served by a stock OpenSSH sshd (no AcceptEnv, so SSH's channel
environment is dropped): the command sees the value, which never touches the host's disk nor
its process list; a variable missing here refuses the resume before anything moves."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.services.remediations.test_resume_ssh import sandbox_job
from tests.support.harbor_factory import tree
from tests.support.ssh_server import OpenSSHServer, start_openssh, write_known_hosts
from tests.support.ssh_server import client_key as client_key
from tests.support.writes import run_cli

SECRET = "sk-test-3f9a 'quoted' $HOME `x` ünï"


@pytest.fixture
def sshd(tmp_path: Path, client_key: tuple[Path, str]):  # type: ignore[no-untyped-def]
    server = start_openssh(tmp_path, client_key[1])
    assert "AcceptEnv" not in server.conf.read_text()
    yield server
    server.stop()


def host_config(tmp_path: Path, server: OpenSSHServer, key: Path, seen: Path) -> Path:
    known = tmp_path / "known_hosts"
    write_known_hosts(known, [("127.0.0.1", server.port, server.host_key)])
    # the site's command: what it saw, as a digest, and how long it lives
    script = 'printf %s "$OPENAI_API_KEY" | sha256sum | cut -c1-64 >"$0"; sleep 1'
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        "[[hosts]]\n"
        'name = "cluster"\n'
        'host = "127.0.0.1"\n'
        f"port = {server.port}\n"
        f'user = "{os.environ.get("USER") or "root"}"\n'
        f'identity_file = "{key}"\n'
        f'known_hosts = "{known}"\n'
        "[hosts.commands]\n"
        f"resume = [\"sh\", \"-c\", '{script}', \"{seen}\", \"{{job_dir}}\"]\n"
        "[hosts.commands.env_from]\n"
        'OPENAI_API_KEY = "MY_TEST_KEY"\n')
    return cfg


def test_env_from_reaches_the_command_through_a_stock_sshd(
        sshd: OpenSSHServer, client_key: tuple[Path, str], tmp_path: Path) -> None:
    job = sandbox_job(tmp_path / "cluster" / "jobs")
    seen = tmp_path / "seen.sha256"
    cfg = host_config(tmp_path, sshd, client_key[0], seen)
    url = f"ssh://127.0.0.1:{sshd.port}{job}"
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "MY_TEST_KEY": SECRET}
    p = run_cli("--batch", "resume", "--config", str(cfg), "--apply", "--format", "json", url, env=env)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)["plans"][0]
    assert plan["exit_code"] == 0 and plan["applied"]
    assert seen.read_text().strip() == hashlib.sha256(SECRET.encode()).hexdigest()
    # the value is nowhere on disk but in what the command itself chose to write (a digest)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in p.stdout + p.stderr


def test_a_missing_variable_refuses_before_anything_moves(
        sshd: OpenSSHServer, client_key: tuple[Path, str], tmp_path: Path) -> None:
    job = sandbox_job(tmp_path / "cluster" / "jobs")
    cfg = host_config(tmp_path, sshd, client_key[0], tmp_path / "seen")
    before = tree(job.parent)
    url = f"ssh://127.0.0.1:{sshd.port}{job}"
    assert "MY_TEST_KEY" not in os.environ
    p = run_cli("--batch", "resume", "--config", str(cfg), "--apply", "--format", "json", url,
                env={"XDG_STATE_HOME": str(tmp_path / "state")})
    assert p.returncode == 1, p.stderr
    assert "MY_TEST_KEY are not set here" in p.stderr and "nothing moved" in p.stderr
    assert tree(job.parent) == before
    assert not (job.parent / ".evaldesk-quarantine").exists()
