"""Commands here and on a real SSH host: argv as data, output streamed, exit codes and a
missing program reported plainly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from services.core.plain import dump
from services.remediations.command import CommandFailed, command_step
from services.remediations.steps import StepContext, do_step
from services.transport.process import CommandNotFound, LocalRunner, SSHRunner, display
from services.transport.ssh import SSHPool
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server

HOSTILE = "a b;$(touch pwned)'\"\n"


async def test_local_runner_streams_and_passes_arguments_as_data(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []
    code = "import sys; print(sys.argv[1]); print('err', file=sys.stderr); sys.exit(3)"
    res = await LocalRunner().run([sys.executable, "-c", code, HOSTILE], cwd=str(tmp_path),
                                  on_output=lambda s, t: seen.append((s, t)))
    assert res.exit_code == 3 and HOSTILE in res.stdout_tail and "err" in res.stderr_tail
    assert {s for s, _ in seen} == {"stdout", "stderr"}
    assert not (tmp_path / "pwned").exists()


async def test_missing_program_is_a_clear_error() -> None:
    with pytest.raises(CommandNotFound, match="no-such-program-x: command not found"):
        await LocalRunner().run(["no-such-program-x"])


async def test_command_step_records_exit_and_sbatch_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALDESK_TEST_SECRET", "s3cret")
    code = "import os; print('Submitted batch job 4242'); assert os.environ['K'][::-1] == 'terc3s'"
    step = command_step([sys.executable, "-c", code], "submit", env_from={"K": "EVALDESK_TEST_SECRET"})
    result = await do_step(step, StepContext())
    assert result["exit_code"] == 0 and result["slurm_job_id"] == "4242"
    assert "s3cret" not in repr(dump(step))
    bad = command_step([sys.executable, "-c", "import sys; sys.exit(2)"], "fails")
    with pytest.raises(CommandFailed, match="exit code 2"):
        await do_step(bad, StepContext())


async def test_ssh_runner_on_a_real_host(ssh_server: InProcessSSHServer, tmp_path: Path) -> None:
    pool = SSHPool(backoff_base_s=0.0, connect_timeout_s=5)
    runner = SSHRunner(pool, ssh_server.spec())
    try:
        seen: list[str] = []
        res = await runner.run(["python3", "-c", "import sys, os; print(sys.argv[1]); print(os.getcwd())", HOSTILE],
                               cwd=str(tmp_path), on_output=lambda s, t: seen.append(t))
        assert res.exit_code == 0 and HOSTILE in res.stdout_tail and str(tmp_path) in res.stdout_tail
        assert seen and not (tmp_path / "pwned").exists()
        with pytest.raises(CommandNotFound, match="on "):
            await runner.run(["no-such-program-x"])
    finally:
        await pool.close()


def test_display_quotes_like_a_shell() -> None:
    assert display(["harbor", "jobs", "resume", "-p", "/j/a b"], cwd="/j", host="h") == \
        "cd /j && harbor jobs resume -p '/j/a b'   (on h)"
