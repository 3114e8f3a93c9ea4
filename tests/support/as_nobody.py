"""Run the real `evaldesk` as the unprivileged user `nobody`, in its own process.

`setpriv --reuid=nobody --regid=<nobody's group> --clear-groups` drops to nobody. When this
Python lives where nobody may not look (a pyenv under /root, mode 0700), its install and this
source tree are bind-mounted into a private mount namespace (`unshare --mount`) at a place
nobody can read, so the interpreter, its packages and evaldesk are the very same files: the
permission checks are the kernel's, nothing is emulated.

Where that is impossible (not root, no setpriv/unshare), the tests skip with the reason — and
fail under CI=true, where they must run.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.writes import ROOT


@dataclass
class Nobody:
    uid: int
    gid: int
    prefix: list[str]  # the command line up to and including the interpreter
    pythonpath: str
    home: Path  # a dir nobody owns: XDG state, config and data go there
    work: Path  # a root-owned dir (0755) nobody can look into: job dirs go there

    def run(self, *argv: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": self.pythonpath,
            "HOME": str(self.home),
            "XDG_STATE_HOME": str(self.home / "state"),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "XDG_DATA_HOME": str(self.home / "data"),
            "LANG": "C.UTF-8",
            "TZ": "UTC",
        }
        return subprocess.run([*self.prefix, "-m", "tui.cli", *argv], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=cwd or self.home)

    def give(self, path: Path) -> None:
        """Make `path` and everything under it nobody's."""
        for dirpath, dirnames, filenames in os.walk(path):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.lchown(name, self.uid, self.gid)


def _fail_or_skip(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"cannot run as nobody here, and CI=true requires it: {reason}")
    pytest.skip(f"cannot run as nobody here: {reason}")


def _setpriv(uid: int, gid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


def _probe(prefix: list[str], pythonpath: str, cwd: Path) -> str | None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": pythonpath}
    probe = subprocess.run([*prefix, "-c", "import os, textual, pydantic, asyncssh, tui.cli; print(os.getuid())"],
                           capture_output=True, text=True, timeout=60, env=env, cwd=cwd)
    if probe.returncode != 0:
        return (probe.stderr.strip().splitlines() or ["no output"])[-1]
    return None


@pytest.fixture
def nobody() -> Iterator[Nobody]:
    if os.geteuid() != 0:
        _fail_or_skip("the tests do not run as root, so they cannot switch to nobody")
    for tool in ("setpriv", "unshare", "mount"):
        if shutil.which(tool) is None:
            _fail_or_skip(f"{tool} is not installed")
    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        _fail_or_skip("there is no user nobody")
    uid, gid = pw.pw_uid, pw.pw_gid
    grp.getgrgid(gid)
    base = Path(tempfile.mkdtemp(prefix="evaldesk-nobody-"))
    base.chmod(0o755)
    home = base / "home"
    home.mkdir()
    os.chown(home, uid, gid)
    work = base / "jobs"
    work.mkdir()
    work.chmod(0o755)
    direct = [*_setpriv(uid, gid), sys.executable]
    why = _probe(direct, str(ROOT), home)
    if why is None:
        yield Nobody(uid, gid, direct, str(ROOT), home, work)
    else:
        if sys.prefix != sys.base_prefix:
            _fail_or_skip(f"nobody cannot run {sys.executable} ({why}), and a virtualenv cannot be bind-mounted")
        py_mnt, src_mnt = base / "python", base / "src"
        py_mnt.mkdir()
        src_mnt.mkdir()
        real_prefix = os.path.realpath(sys.base_prefix)
        exe = os.path.join(str(py_mnt), os.path.relpath(os.path.realpath(sys.executable), real_prefix))
        script = ('mount --bind "$1" "$2" && mount --bind "$3" "$4" && shift 4 && '
                  f'LD_LIBRARY_PATH="{py_mnt}/lib" exec "$@"')
        prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                  real_prefix, str(py_mnt), str(ROOT), str(src_mnt), *_setpriv(uid, gid), exe]
        why2 = _probe(prefix, str(src_mnt), home)
        if why2 is not None:
            shutil.rmtree(base, ignore_errors=True)
            _fail_or_skip(f"nobody cannot run {sys.executable} ({why}), nor a bind-mounted copy ({why2})")
        yield Nobody(uid, gid, prefix, str(src_mnt), home, work)
    shutil.rmtree(base, ignore_errors=True)
