"""The engine and the headless commands never import Textual (the console alone does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_a_batch_audit_with_no_config_file_does_not_import_pydantic(tmp_path: Path) -> None:
    """pydantic checks data where it comes in; a run with no config file has none to check, and
    importing it would be a third of a next run's time."""
    code = (
        "import sys\n"
        "from services.harbor.demo import write_demo\n"
        "from tui.cli import main\n"
        f"write_demo({str(tmp_path / 'demo')!r})\n"
        f"main(['--batch', 'audit', '--format', 'json', {str(tmp_path / 'demo')!r}])\n"
        f"main(['--batch', 'audit', '--format', 'json', {str(tmp_path / 'demo')!r}])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALDESK_")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_CACHE_HOME=str(tmp_path / "cache"),
               XDG_STATE_HOME=str(tmp_path / "state"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, env=env)
    assert p.stderr.strip().splitlines()[-1] == "[]", p.stderr


def _import_graph() -> dict[str, set[str]]:
    """Every project module → the project modules it imports, type-checking imports included."""
    import ast

    mods: dict[str, Path] = {}
    for pkg in ("services", "tui", "widgets"):
        for path in (ROOT / pkg).rglob("*.py"):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            mods[".".join(parts)] = path
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if name in mods and name != mod:
                    graph[mod].add(name)
    return graph


def test_no_import_cycles_type_level_included() -> None:
    graph = _import_graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycle = [*stack[stack.index(n):], n]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_console_and_batch_reach_backends_only_through_the_registry() -> None:
    from services.core.registry import BACKENDS

    backend_pkgs = {module.rsplit(".", 1)[0] for _, module in BACKENDS}
    graph = _import_graph()
    leaks = sorted(
        f"{m} imports {n}"
        for m, deps in graph.items() if m.startswith(("tui", "widgets"))
        for n in deps if any(n == p or n.startswith(p + ".") for p in backend_pkgs)
    )
    assert leaks == []


def test_screens_do_not_import_the_app() -> None:
    graph = _import_graph()
    assert [m for m, deps in graph.items() if "tui.app" in deps and m != "tui.cli"] == []


def test_every_package_folder_is_a_regular_package() -> None:
    # setuptools' find_packages (pyproject's packages.find) and pkgutil.walk_packages above both
    # skip a folder without __init__.py: an installed evaldesk would lack it, and this test would
    # not look inside it
    missing = [str(d.relative_to(ROOT)) for top in ("services", "tui", "widgets")
               for d in (ROOT / top).rglob("*") if d.is_dir() and d.name != "__pycache__"
               and any(d.glob("*.py")) and not (d / "__init__.py").exists()]
    assert missing == []


AUDIT_PROBE = """
import sys
from tui.cli import main
code = main(["--batch", "audit", "--format", "json", sys.argv[1]])
others = ("services.csbench", "services.aisbench", "services.rock", "services.objectstore")
# another backend may look (its backend and find modules), but loads nothing more when it finds nothing
heavy = sorted(m for m in sys.modules if m in ("asyncssh", "services.leaderboard.view", "services.report.output")
               or (m.startswith(others) and m not in others and not m.endswith((".backend", ".find"))))
print(code, ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize("what", ["one job dir", "a folder of job dirs"])
def test_a_local_audit_of_harbor_jobs_loads_only_what_it_needs(tmp_path: Path, what: str) -> None:
    # every module here costs a cron job's audit start-up time (benchmarks/targets.py "audit")
    from tests.support.harbor_factory import healthy_job

    folder = tmp_path / "jobs"
    jobs = [healthy_job(folder, f"terminal_bench_2_org-Model-8B_2026-03-0{i + 1}__09-00-00", n_tasks=3, n_rep=1).write()
            for i in range(2)]
    source = jobs[0] if what == "one job dir" else folder
    p = subprocess.run([sys.executable, "-c", AUDIT_PROBE, str(source)], capture_output=True, text=True,
                       cwd=ROOT, timeout=60, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    code, _, heavy = p.stderr.strip().splitlines()[-1].partition(" ")
    assert (code, heavy) == ("0", ""), p.stderr


def test_the_walk_is_the_standard_library_on_python_3_6() -> None:
    # the walk is also the remote program a cluster login node's python3 runs as it is
    walk = ROOT / "services" / "harbor" / "walk.py"
    probe = ("import sys, runpy; before = set(sys.modules); runpy.run_path(sys.argv[1]); "
             "print(' '.join(sorted(m for m in set(sys.modules) - before "
             "if m.split('.')[0] not in sys.stdlib_module_names)))")
    p = subprocess.run([sys.executable, "-c", probe, str(walk)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "", p.stdout + p.stderr
    v = subprocess.run([sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())", "--no-tips",
                        "--violations", "-t=3.6-", str(walk)], capture_output=True, text=True, timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr
