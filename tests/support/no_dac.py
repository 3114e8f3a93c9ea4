"""Run Python code where file permissions hold, as they do for an ordinary user.

Tests here often run as root, for whom a mode-000 dir is readable. The code runs in a child
process: as root, with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped (setpriv), so root
meets the permission bits like anyone else (the project's Python stays reachable, which it may
not be for `nobody`); as any other user, as it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

DROP = "-dac_override,-dac_read_search"


def prefix() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        if os.environ.get("CI") == "true":
            pytest.fail("setpriv (util-linux) is needed to test unreadable files as root")
        pytest.skip("setpriv (util-linux) is needed to test unreadable files as root")
    return [setpriv, f"--bounding-set={DROP}", f"--inh-caps={DROP}"]


def command(*argv: str) -> list[str]:
    return [*prefix(), *argv]


def run_without_dac(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": os.getcwd()}
    return subprocess.run(command(sys.executable, "-c", code, *args), capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)
