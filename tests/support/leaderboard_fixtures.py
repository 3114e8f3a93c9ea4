"""pytest fixtures for tests that need the leaderboard: import them by name into a test module."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from services.core.times import DEMO_NOW
from tests.support.hub_server import HubServer, hub_server
from tests.support.leaderboard import Leaderboard, secrets_env, start_leaderboard
from tests.support.ui_demo import shared_demo

SEEDED_AT = DEMO_NOW + timedelta(minutes=5)


@pytest.fixture
def lb() -> Iterator[Leaderboard]:
    yield from start_leaderboard(SEEDED_AT)


@pytest.fixture
def hub() -> Iterator[HubServer]:
    with hub_server() as server:
        yield server


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets_env(monkeypatch)


class Jobs:
    """A private folder of demo jobs, each copied in when a test first needs it (remediations
    move and write things; copying all six costs seconds on a busy disk)."""

    def __init__(self, shared: Path, root: Path) -> None:
        self.shared = shared
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def need(self, *jobs: str) -> Path:
        import subprocess

        for job in jobs:
            if not (self.root / job).exists():
                subprocess.run(["cp", "-a", str(self.shared / job), str(self.root / job)], check=True)
        return self.root


@pytest.fixture
def demo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Jobs:
    return Jobs(shared_demo(tmp_path_factory), tmp_path / "jobs")
