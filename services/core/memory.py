"""What evaldesk asks of glibc's allocator, so a console that has read 100k trials stays small.
Both are no-ops off Linux or without glibc."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

M_ARENA_MAX = -8  # glibc's mallopt parameter


def _libc(name: str) -> Callable[..., Any] | None:
    if sys.platform != "linux":
        return None
    try:
        import ctypes

        return getattr(ctypes.CDLL(None), name)  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # not glibc
        return None


def give_back_memory() -> None:
    """Hand the heap pages a big read freed back to the system: glibc keeps them otherwise
    (~12 MB after a first read of 100k trials)."""
    trim = _libc("malloc_trim")
    if trim is not None:
        trim(0)


def one_heap_arena() -> None:
    """One malloc arena for the whole process. glibc gives each thread that allocates its own
    (the scan, parse and audit workers), and each keeps its high-water mark: ~6 MiB of a 100k
    first read. Python's GIL already serialises most allocation, so sharing one costs nothing
    measurable. Call before the first worker thread starts."""
    mallopt = _libc("mallopt")
    if mallopt is not None:
        mallopt(M_ARENA_MAX, 1)
