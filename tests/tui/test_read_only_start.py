"""`--read-only` with nothing to open writes nothing: no demo data, a clear message, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_read_only_with_no_source_and_no_demo_writes_nothing_and_exits_2(tmp_path: Path) -> None:
    data, config, state = tmp_path / "data", tmp_path / "config", tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(data), "XDG_CONFIG_HOME": str(config),
           "XDG_STATE_HOME": str(state)}
    for argv in (["--read-only"], []):
        env_ro = dict(env, EVALDESK_READ_ONLY="1") if not argv else env  # the flag, or read_only from the env
        p = subprocess.run([sys.executable, "-m", "tui.cli", *argv], capture_output=True, text=True, env=env_ro,
                           timeout=60, stdin=subprocess.DEVNULL, cwd=tmp_path)
        assert p.returncode == 2, p.stderr
        assert "Traceback" not in p.stderr
        lines = p.stderr.strip().splitlines()
        assert "--read-only does not write it" in lines[0] and str(data / "evaldesk" / "demo") in lines[0]
        assert "evaldesk --read-only PATH" in lines[1] and "evaldesk demo" in lines[1]
        assert not data.exists() or not any(data.rglob("*")), "nothing written"
