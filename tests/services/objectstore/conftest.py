"""Real object-store servers for the tests (servers.py), each started once per session; the
client libraries reach them through their own endpoint variables. Under CI a server that cannot
start fails the test (tests/support/services.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.services.objectstore.servers import CannotStart, start_gcs, start_s3
from tests.support.services import service_missing


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[str]:
    try:
        proc, url = start_gcs()
    except CannotStart as exc:
        service_missing(str(exc))
    yield url
    proc.kill()
    proc.wait()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    try:
        proc, url = start_s3()
    except CannotStart as exc:
        service_missing(str(exc))
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
    return _emulator(request, monkeypatch, request.param)


@pytest.fixture
def s3_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    return _emulator(request, monkeypatch, "s3")


def _emulator(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, scheme: str) -> Emulator:
    if scheme == "gs":
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
    em = Emulator(scheme, endpoint, env)
    em.open()
    return em
