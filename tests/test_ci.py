"""CI never passes by hiding a failure: `.ci/run` stops at the first failing step, and under
`CI=true` a test whose service cannot start fails instead of skipping."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _executable(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def ci_tree(tmp_path: Path, *, services: str = "exit 0", slurm: str = "", pytest_rc: int = 0) -> tuple[Path, Path]:
    """A copy of `.ci/run` with stand-ins for everything it calls, each writing what it was asked."""
    tree = tmp_path / "repo"
    (tree / ".ci").mkdir(parents=True)
    (tree / "scripts").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tree / ".ci" / "run")
    calls = tmp_path / "calls"
    calls.touch()
    _executable(tree / "scripts" / "ci_services.sh", f'echo "ci_services $*" >>{calls}\n{services}\n')
    slurm = slurm or (f'echo "slurm_up $*" >>{calls}\n'
                      'if [ "${1:-}" != "--stop" ]; then echo starting >&2; echo /tmp/x/slurm.conf; fi\n')
    _executable(tree / "scripts" / "slurm_up.sh", slurm)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "python", f'echo "python $* CI=$CI SLURM_CONF=${{SLURM_CONF:-}}" >>{calls}\n'
                f'case "$*" in *pytest*) exit {pytest_rc};; esac\nexit 0\n')
    for tool in ("ruff", "mypy"):
        _executable(bin_dir / tool, f'echo "{tool} $*" >>{calls}\n')
    # a home of the test's own, where an earlier run left rl-rock's venv (a stand-in that has it)
    _rock_venv(tmp_path / "home" / ".cache" / "evaldesk" / "venvs" / "rock", calls)
    return tree, calls


def _rock_venv(venv: Path, calls: Path) -> None:
    (venv / "bin").mkdir(parents=True)
    _executable(venv / "bin" / "python", f'echo "rock_python $*" >>{calls}\n')


def run_ci(tree: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "ROCK_VENV")}
    env["PATH"] = f"{tmp_path / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["HOME"] = str(tmp_path / "home")
    return subprocess.run(["bash", str(tree / ".ci" / "run")], capture_output=True, text=True, env=env, timeout=60)


def test_ci_runs_every_step_then_the_readme_command_with_ci_set(tmp_path: Path) -> None:
    tree, calls = ci_tree(tmp_path)
    p = run_ci(tree, tmp_path)
    assert p.returncode == 0, p.stderr
    lines = calls.read_text().splitlines()
    assert lines[0] == "ci_services "
    assert [ln.split()[0] for ln in lines] == ["ci_services", "python", "rock_python", "ruff", "mypy", "slurm_up",
                                               "python", "slurm_up"]
    assert lines[-2] == "python -m pytest -q -n 3 --dist loadfile CI=true SLURM_CONF=/tmp/x/slurm.conf"
    assert lines[-1] == "slurm_up --stop /tmp/x"  # stopped on the way out


def test_ci_on_a_fresh_home_makes_the_rock_venv_there(tmp_path: Path) -> None:
    """No rl-rock venv yet: `.ci/run` creates it under $HOME (here the test's own) and installs rl-rock."""
    tree, calls = ci_tree(tmp_path)
    venv = tmp_path / "home" / ".cache" / "evaldesk" / "venvs" / "rock"
    shutil.rmtree(venv)
    # the stand-in python makes a venv whose pip records what it installs
    _executable(tmp_path / "bin" / "python", f'echo "python $*" >>{calls}\n'
                'if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; '
                f'printf \'#!/bin/sh\\necho "rock_pip $*" >>{calls}\\n\' >"$3/bin/pip"; chmod +x "$3/bin/pip"; fi\n')
    p = run_ci(tree, tmp_path)
    assert p.returncode == 0, p.stderr
    lines = calls.read_text().splitlines()
    assert f"python -m venv {venv}" in lines
    assert "rock_pip install -q rl-rock==1.11.0" in lines


def test_ci_fails_when_installing_the_services_fails(tmp_path: Path) -> None:
    tree, calls = ci_tree(tmp_path, services='echo "ci_services: cannot install slurm-wlm" >&2; exit 100')
    p = run_ci(tree, tmp_path)
    assert p.returncode != 0
    assert "cannot install slurm-wlm" in p.stderr
    assert calls.read_text().splitlines() == ["ci_services "], "nothing runs after a failed install"


def test_ci_fails_when_slurm_cannot_start_and_when_a_test_fails(tmp_path: Path) -> None:
    tree, calls = ci_tree(tmp_path, slurm='echo "slurm_up: munged did not start" >&2; exit 4\n')
    p = run_ci(tree, tmp_path)
    assert p.returncode != 0 and "munged did not start" in p.stderr
    assert not any("pytest" in ln for ln in calls.read_text().splitlines())

    tree, calls = ci_tree(tmp_path / "again", pytest_rc=1)
    p = run_ci(tree, tmp_path / "again")
    assert p.returncode == 1
    assert calls.read_text().splitlines()[-1] == "slurm_up --stop /tmp/x"


def test_the_real_ci_scripts_swallow_nothing() -> None:
    for script in (ROOT / ".ci" / "run", ROOT / "scripts" / "ci_services.sh"):
        text = script.read_text(encoding="utf-8")
        assert "set -e" in text, script
        assert "|| echo" not in text and "|| true" not in text, f"{script} hides a failure"


SERVICE_TEST = '''
import pytest
from tests.support.services import service_missing

@pytest.fixture
def sshd():
    service_missing("sshd missing here")

def test_needs_sshd(sshd):
    pass
'''


@pytest.mark.parametrize(("ci", "outcome"), [(None, "1 skipped"), ("true", "1 error")])
def test_a_missing_service_skips_locally_and_fails_under_ci(tmp_path: Path, ci: str | None, outcome: str) -> None:
    (tmp_path / "test_service.py").write_text(SERVICE_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(ROOT)
    if ci is not None:
        env["CI"] = ci
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", str(tmp_path)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert outcome in p.stdout, p.stdout
    assert "sshd missing here" in p.stdout
    # a fixture that fails is an error: the run fails as it does for a failed test
    assert (p.returncode != 0) == bool(ci)
    if ci:
        assert "CI is set" in p.stdout


def test_tests_run_in_a_home_of_their_own(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Nothing a test writes under ~ lands in the user's home (tests/conftest.py moves HOME)."""
    home = Path.home().resolve()
    assert home.is_relative_to(tmp_path_factory.getbasetemp().resolve()), home
