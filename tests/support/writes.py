"""Tools for tests of the write path on real files and real processes: the whole tree of a
job dir (evaldesk's own files included), the real `evaldesk` entry point in a subprocess, and
a job to dedupe with two aggregates to rebuild."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.harbor_factory import T0, JobBuilder

ROOT = Path(__file__).resolve().parents[2]


def full_tree(root: Path) -> dict[str, Any]:
    """Every entry under root — hidden ones, the quarantine, a lock, temporary files — with
    its kind, mode and bytes (or link target): two equal trees are equal byte for byte."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", mode, p.read_bytes())
            else:
                out[rel] = ("other", mode)
    return out


def tree_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What differs between two full trees, for a readable assertion message."""
    out = [f"only before: {k}" for k in sorted(set(a) - set(b))]
    out += [f"only after: {k}" for k in sorted(set(b) - set(a))]
    out += [f"changed: {k}" for k in sorted(set(a) & set(b)) if a[k] != b[k]]
    return out


def evaldesk_cmd() -> list[str]:
    return [sys.executable, "-m", "tui.cli"]


def run_cli(*argv: str, env: dict[str, str] | None = None, timeout: float = 120,
            user_cmd: list[str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`evaldesk ARGV…` in its own process, with this tree on PYTHONPATH."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    cmd = (user_cmd or []) + evaldesk_cmd()
    return subprocess.run([*cmd, *argv], capture_output=True, text=True, timeout=timeout, env=full_env,
                          cwd=cwd or ROOT)


def job_to_dedupe(root: Path, name: str = "dev_set_v2_org-M_2026-03-02__09-00-00") -> Path:
    """n_rep 2: two surplus attempts, one staged copy under restored/, and both aggregates
    (result.json with a narrow mode, which an atomic rewrite must keep)."""
    from datetime import timedelta

    job = JobBuilder(root, name, dataset="dev_set_v2", n_attempts=2, n_total_trials=4, seed=11)
    for task, rewards in {"task-000": [1.0, 0.0, 1.0], "task-001": [None, 1.0, 0.0]}.items():
        for i, r in enumerate(rewards):
            job.add(task, r, None if r is not None else "DaytonaError", started=T0 + timedelta(hours=i))
    first = job.trials[0]
    job.add(first.task, first.reward, first.exception, name=first.name, started=first.started, subdir="restored")
    d = job.write()
    shutil.copyfile(d / "result.json", d / "harbor_result.json")
    (d / "result.json").chmod(0o640)
    return d
