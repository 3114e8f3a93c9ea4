"""One bucket of an object store, as the few calls evaldesk makes on it.

Every backend (GCS, S3) gives the same seven calls; everything above them (the walk's view,
the write path's view) is written once. An object's `version` is what a conditional write
names: the generation on GCS, the ETag on S3. A write names the version it replaces (or
`ABSENT`: the object must not exist), so a concurrent writer is refused by the store itself
(`Conflict`), never by a look-then-write.

Paths above this module are POSIX paths `/<bucket>/<key>`; keys here are the bare object names.
"""

from __future__ import annotations

import errno
import threading
from dataclasses import dataclass

ABSENT = ""  # as a version a write must match: the object does not exist yet


@dataclass(frozen=True, slots=True)
class Obj:
    key: str
    size: int
    mtime_ns: int
    version: str  # GCS generation, S3 ETag
    checksum: str  # what a copy is verified against: GCS crc32c, S3 ETag


class Conflict(OSError):
    """The store refused a conditional write: the object is not the version the write named."""

    def __init__(self, key: str, detail: str = "changed since it was read") -> None:
        super().__init__(errno.ESTALE, f"refused by the store's precondition: {detail}", key)


class Bucket:
    """The calls; subclasses implement them. `requests` counts every call made to the store."""

    scheme = ""

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests = 0
        self._count = threading.Lock()

    def counted(self, n: int = 1) -> None:
        with self._count:
            self.requests += n

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.name}"

    def objects(self, prefix: str) -> list[Obj]:
        """Every object under `prefix`, in name order: one paged listing."""
        raise NotImplementedError

    def list_first(self, prefix: str, n: int) -> list[Obj]:
        """The first `n` objects under `prefix`: one request."""
        raise NotImplementedError

    def head(self, key: str) -> Obj | None:
        raise NotImplementedError

    def get(self, key: str, max_bytes: int) -> tuple[bytes, Obj] | None:
        """The object's bytes (OSError when over `max_bytes`), None when absent."""
        raise NotImplementedError

    def put(self, key: str, data: bytes, match: str | None) -> Obj:
        """Write `data`; `match` the version replaced (ABSENT: none may exist; None: unconditional)."""
        raise NotImplementedError

    def copy(self, src: Obj, dst: str) -> Obj:
        """A server-side copy of exactly version `src.version` to `dst`, which must not exist."""
        raise NotImplementedError

    def same(self, src: Obj, copy: Obj) -> bool:
        """Whether `copy` holds what `src` held: the check before any source is deleted."""
        return copy.size == src.size and copy.checksum == src.checksum

    def delete(self, obj: Obj) -> None:
        """Delete exactly version `obj.version`; Conflict when it is another."""
        raise NotImplementedError
