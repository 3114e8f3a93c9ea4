from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep config, state (the journal) and data out of the real home; ignore the caller's EVALDESK_*."""
    base = tmp_path_factory.mktemp("xdg")
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(base / var.lower()))
    for var in [v for v in os.environ if v.startswith("EVALDESK_")]:
        monkeypatch.delenv(var)
    # the console draws as in a modern terminal whatever shell runs the tests (a test of the
    # 16-colour look sets TEXTUAL_COLOR_SYSTEM itself)
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")
