from __future__ import annotations

import os
from pathlib import Path

import pytest

# rl-rock's venv is read from the user's cache (tests/support/rock_cli.py): found before HOME moves
os.environ.setdefault("ROCK_VENV", str(Path.home() / ".cache" / "evaldesk" / "venvs" / "rock"))


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep config, state (the journal), data and everything else under ~ out of the real home;
    ignore the caller's EVALDESK_*."""
    base = tmp_path_factory.mktemp("xdg")
    (base / "home").mkdir()
    monkeypatch.setenv("HOME", str(base / "home"))
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(base / var.lower()))
    for var in [v for v in os.environ if v.startswith("EVALDESK_")]:
        monkeypatch.delenv(var)
    # the console draws as in a modern terminal whatever shell runs the tests (a test of the
    # 16-colour look sets TEXTUAL_COLOR_SYSTEM itself)
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")
    # pytest-xdist's workers run with COLUMNS=80; a piped table's width is the tests' to set
    for var in ("COLUMNS", "LINES"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def _files_written_by_a_test_count_as_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test's job dirs are milliseconds old, so every one of their files is within the racy
    window (services/harbor/walk.py RACY_S) and read again by every scan: tests that count
    reads would count that. Tests of the rule itself set the window back."""
    from services.harbor import walk

    monkeypatch.setattr(walk, "RACY_S", 0.0)
