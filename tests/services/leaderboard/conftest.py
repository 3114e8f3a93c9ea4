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


@pytest.fixture
def demo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    """A private copy of the demo jobs (remediations move and write things)."""
    import shutil

    dest = tmp_path / "jobs"
    shutil.copytree(shared_demo(tmp_path_factory), dest, symlinks=True)
    return dest
