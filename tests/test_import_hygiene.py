"""The engine and the headless commands never import Textual (the console alone does)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import importlib, pkgutil, sys
import services
names = ["services"] + [m.name for m in pkgutil.walk_packages(services.__path__, "services.")]
for name in names:
    importlib.import_module(name)
import tui.batch, tui.cli
leaked = sorted(m for m in sys.modules if m == "textual" or m.startswith("textual."))
print(len(names))
print(",".join(leaked))
"""


def test_services_and_batch_do_not_import_textual() -> None:
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    n_modules, leaked = p.stdout.splitlines()[:2] if p.stdout.count("\n") >= 2 else (p.stdout.strip(), "")
    assert int(n_modules) >= 10
    assert leaked == "", f"textual imported by the headless side: {leaked}"


def test_cli_batch_run_does_not_import_textual(tmp_path: Path) -> None:
    """A whole `--batch audit` run in one process, then check what got imported."""
    code = (
        "import sys\n"
        "from services.harbor.demo import write_demo\n"
        "from tui.cli import main\n"
        f"write_demo({str(tmp_path / 'demo')!r})\n"
        f"rc = main(['--batch', 'list', '--format', 'json', {str(tmp_path / 'demo')!r}])\n"
        "print('textual' in sys.modules, rc, file=sys.stderr)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.stderr.strip().splitlines()[-1] == "False 1", p.stderr
