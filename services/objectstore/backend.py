"""Object stores as a backend of the source registry: `gs://bucket/prefix`, `s3://bucket/prefix`
and `[[stores]]` entries. The client libraries (the `cloud` extra) load only when a store is read."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from services.core.config import Config, StoreConfig
from services.core.models import AuditReport, Experiment
from services.core.plain import copy_with
from services.core.policy import Policy
from services.core.source import Source, SourceUnavailable

if TYPE_CHECKING:
    from services.objectstore.store import Bucket

NAME = "objectstore"
SCHEMES: tuple[str, ...] = ("gs", "s3")
KINDS: tuple[str, ...] = ("harbor+gs", "harbor+s3")


def parse_url(spec: str) -> tuple[str, str, str]:
    """(scheme, bucket, prefix); ValueError for a malformed URL."""
    parts = urlsplit(spec)
    if parts.scheme not in SCHEMES or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"{spec}: expected gs://bucket/prefix or s3://bucket/prefix")
    if len(parts.netloc) < 3:
        raise ValueError(f"{spec}: a bucket name has at least 3 characters")
    return parts.scheme, parts.netloc, parts.path.strip("/")


def open_store(sc: StoreConfig, config: Config) -> Source:
    from services.objectstore.source import StoreSource

    scheme, name, prefix = parse_url(sc.url)
    bucket: Bucket
    try:
        if scheme == "gs":
            from services.objectstore.gcs import GCSBucket

            bucket = GCSBucket(name, sc.endpoint, sc.project)
        else:
            from services.objectstore.s3 import PART, S3Bucket

            part = PART if sc.copy_part_mib is None else sc.copy_part_mib << 20
            bucket = S3Bucket(name, sc.endpoint, sc.region, part_size=part)
    except ImportError as exc:
        raise SourceUnavailable(sc.url, f"{exc.name} is not installed: pip install 'evaldesk[cloud]'") from None
    except Exception as exc:  # the library found no credentials, or a bad endpoint
        raise SourceUnavailable(sc.url, f"{type(exc).__name__}: {exc}") from None
    return StoreSource(bucket, prefix, config.policy, sc.name or sc.url.rstrip("/"), cache=config.scan_cache,
                       commands=sc.commands, status=sc.status)


def open_url(spec: str, config: Config) -> Source:
    """A URL takes the settings (endpoint, commands) of the `[[stores]]` entry it lies under."""
    parse_url(spec)
    for sc in config.stores:
        if spec.rstrip("/") == sc.url.rstrip("/") or spec.startswith(sc.url.rstrip("/") + "/"):
            return open_store(copy_with(sc, url=spec, name=None), config)
    return open_store(StoreConfig(url=spec), config)


def open_path(path: str, config: Config) -> Source:
    raise SourceUnavailable(path, "not an object-store URL")


def find_local(path: str, config: Config) -> list[Source]:
    return []


def claims(path: str) -> bool:
    return False


def configured(config: Config) -> list[Source]:
    return [open_store(sc, config) for sc in config.stores]


def write_demo(root: Path, now: datetime) -> list[Path]:
    return []


def audit(exp: Experiment, policy: Policy, now: datetime) -> AuditReport | None:
    return None  # DESIGN 3's checks, as for a local job dir
