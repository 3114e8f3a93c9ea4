"""Paths that come from job dirs are untrusted: every join under a job dir goes through here."""

from __future__ import annotations

import posixpath
from pathlib import PurePosixPath


class UnsafePath(ValueError):
    """A relative path that would leave the dir it is joined under."""


def safe_rel(rel: str) -> str:
    """`rel` normalised, or UnsafePath when it is absolute, empty, holds a NUL or climbs out."""
    if "\x00" in rel:
        raise UnsafePath(f"refused {rel!r}: a NUL byte in a path")
    p = PurePosixPath(rel.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts:
        raise UnsafePath(f"refused {rel!r}: the path leaves the job dir")
    norm = posixpath.normpath(str(p))
    if norm in ("", "."):
        raise UnsafePath(f"refused {rel!r}: not a path inside the job dir")
    return norm


def inside(root: str, *rels: str) -> str:
    """`root/rel/…`, refusing any part that could leave `root`."""
    if not root:
        raise UnsafePath("no root dir to join under")
    parts = []
    for rel in rels:
        try:
            parts.append(safe_rel(rel))
        except UnsafePath:
            raise UnsafePath(f"refused {'/'.join(rels)}: the path leaves the job dir") from None
    return posixpath.join(root, *parts)
