"""What a test does when a system service it needs (sshd, SLURM) cannot start.

On a developer's machine it skips with the reason. Under CI (`CI=true`, as `.ci/run` and
every CI system set it) it fails: a green run must mean the SSH and SLURM tests ran.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def service_missing(reason: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"{reason} (CI is set: a test whose service cannot start fails, it does not skip)",
                    pytrace=False)
    pytest.skip(reason)
