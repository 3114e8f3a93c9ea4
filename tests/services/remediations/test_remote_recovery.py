"""The write path over SFTP (a real SSH server on loopback, evaldesk in its own process):
killed mid-dedupe, the remote job is undone byte for byte or finished; the lock and the
record live on the remote job dir, the record's host names where."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server
from tests.support.writes import ROOT, full_tree, job_to_dedupe, tree_diff


def ssh_config(server: InProcessSSHServer, path: Path) -> Path:
    path.write_text(
        "Host evalhost\n"
        "  HostName 127.0.0.1\n"
        f"  Port {server.port}\n"
        "  User evaluser\n"
        f"  IdentityFile {server.client_key_path}\n"
        f"  UserKnownHostsFile {server.known_hosts_path}\n"
    )
    return path


async def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    # asyncio's subprocess: the SSH server runs on this test's event loop, which must keep turning
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui.cli", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, cwd=ROOT)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode if proc.returncode is not None else 0, out.decode(), err.decode()


@pytest.mark.parametrize("point", ["step:1", "write:result.json", "applied"])
async def test_a_remote_dedupe_killed_midway_is_undone_byte_for_byte(
        ssh_server: InProcessSSHServer, tmp_path: Path, point: str) -> None:
    d = job_to_dedupe(tmp_path / "jobs")
    cfg = str(ssh_config(ssh_server, tmp_path / "ssh_config"))
    url = f"ssh://evalhost{d}"
    before = full_tree(d)
    code, _, err = await cli("--batch", "dedupe", "--apply", "--ssh-config", cfg, url, env={"EVALDESK_CRASH_AT": point})
    assert code == -signal.SIGKILL, err
    assert (d / ".evaldesk-lock" / "owner.json").is_file()
    [record] = [p.name for p in (d / ".evaldesk-quarantine").iterdir()]
    code, _, err = await cli("--batch", "list", "--format", "json", "--ssh-config", cfg, url)
    if point != "applied":
        assert f"unfinished dedupe {record} on {d} (evalhost)" in err, err
    code, out, err = await cli("--batch", "undo", "--format", "json", "--ssh-config", cfg, record)
    assert code == 0, err
    assert json.loads(out)["status"] == "undone"
    assert full_tree(d) == before, tree_diff(before, full_tree(d))


async def test_a_remote_dedupe_killed_midway_is_finished(ssh_server: InProcessSSHServer, tmp_path: Path) -> None:
    d = job_to_dedupe(tmp_path / "jobs")
    cfg = str(ssh_config(ssh_server, tmp_path / "ssh_config"))
    url = f"ssh://evalhost{d}"
    code, _, err = await cli("--batch", "dedupe", "--apply", "--ssh-config", cfg, url,
                             env={"EVALDESK_CRASH_AT": "step:3:backup"})
    assert code == -signal.SIGKILL, err
    code, out, err = await cli("--batch", "finish", "--format", "json", "--ssh-config", cfg, url)
    assert code == 0, err
    assert json.loads(out)["status"] == "applied"
    assert not (d / ".evaldesk-lock").exists()
    assert not [p for p in d.rglob("*") if ".evaldesk-tmp-" in p.name]
    code, out, err = await cli("--batch", "dedupe", "--format", "json", "--ssh-config", cfg, url)
    assert code == 0 and json.loads(out)["plans"][0]["remove"] == [], err
