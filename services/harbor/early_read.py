"""Reading a job's finished trials on a second core while evaldesk still loads.

The child that lists a job early (services/harbor/walk.py `prelist`) goes on to make the cache
record of each finished trial (services/harbor/fast_record.py `early_record`), from the last
trial of the listing backwards, into memory it shares with the scanner. When the scanner gets
there it reads from the first trial forwards and takes the child's records as they come, so the
two meet wherever the work balances, with no fixed split to tune and no waiting at the end but
for the child's last few records.

Claims: the scanner takes indices below `front`, the child those from `back` up; each only ever
moves its own bound towards the other's and stops when they meet. Reading the other's bound late
can make both read one trial (harmless: the scanner keeps the first it has), never neither:
once the scanner sees back <= front, every index is someone's. A record the child could not make
(None), one it never got to (it failed, ran out of room, or was stopped) and anything outside its
listing are read by the scanner itself, so a failing child costs only the saving.

Standard library only (the child imports fast_record, which adds orjson, after listing).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import time
from collections.abc import Iterator, Sequence
from typing import Protocol


class TrialLoc(Protocol):
    """What is read of a services.harbor.walk.TrialLoc (walk imports this module)."""

    job: str
    rel: str
    name: str
    rkey: int | None
    error: str | None


# x86 cores see each other's stores in the order they were made, so a record is whole once the
# slot that publishes it says so; elsewhere that would need barriers Python does not give, and the
# scanner reads every trial itself
ORDERED_STORES = os.uname().machine in ("x86_64", "AMD64", "i386", "i686")
# a first read this big makes its Trials once the parsing is done (services/harbor/scan.py): the
# early records are for the smaller reads, which a batch command on one job mostly is
SETTLE_MIN = 50_000
SHARED_BYTES = 64 << 20  # room for the records (~350 bytes each); pages cost only once written
CHUNK = 32  # trials claimed at a time (~0.7 ms of reading)
_FRONT, _BACK, _END, _ARRIVED = range(4)
_DATA = 64  # the records start after the header's int64 slots
_NONE = 0xFFFFFFFF


def parseable(listed: Sequence[tuple[object, Sequence[TrialLoc]]]) -> list[TrialLoc]:
    """The trials of a listing the child reads, in its order: finished, with a readable dir."""
    return [loc for _, found in listed for loc in found
            if loc.error is None and loc.rkey is not None and loc.rkey >= 0]


def shared_memory() -> mmap.mmap | None:
    try:
        return mmap.mmap(-1, SHARED_BYTES)  # anonymous and shared with a forked child
    except (OSError, ValueError):
        return None


def _slots(shared: mmap.mmap) -> memoryview:
    # aligned 8-byte slots: each store and load is one machine word
    return memoryview(shared)[:_DATA].cast("q")


def offer(shared: mmap.mmap, n: int) -> None:
    """In the child, before the scanner may look: the `n` trials of its listing are the child's
    to read until claimed (left at 0, the scanner reads them all itself)."""
    slots = _slots(shared)
    slots[_BACK] = n
    slots.release()


def read_back(shared: mmap.mmap, locs: Sequence[TrialLoc], parent: int, give_up_at: float) -> None:
    """In the child, after `offer`: make the records of `locs` from the last backwards until the
    scanner's claims meet them, the room runs out, the parent is gone, or `give_up_at` (monotonic)
    passes before the scanner came for them."""
    from services.harbor.fast_record import early_record

    if not locs:
        return
    try:
        job_fd = os.open(locs[0].job, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return  # (the scanner reads them all)
    slots = _slots(shared)
    n = len(locs)
    pos = _DATA
    i = n
    room = len(shared)
    try:
        while i > 0:
            front = slots[_FRONT]
            if i <= front or os.getppid() != parent:
                break
            if not slots[_ARRIVED] and time.monotonic() > give_up_at:
                break  # nobody is coming for them (the command went another way)
            lo = max(front, i - CHUNK)
            slots[_BACK] = lo
            for j in range(i - 1, lo - 1, -1):
                loc = locs[j]
                try:
                    rec = early_record(job_fd, loc.rel, loc.name, loc.rkey)  # type: ignore[arg-type]
                except Exception:
                    rec = None
                size = 8 + (len(rec) if rec is not None else 0)
                if pos + size > room:
                    return  # out of room: the scanner reads the rest
                shared[pos: pos + 4] = j.to_bytes(4, "little")
                shared[pos + 4: pos + 8] = (len(rec) if rec is not None else _NONE).to_bytes(4, "little")
                if rec is not None:
                    shared[pos + 8: pos + size] = rec
                pos += size
                slots[_END] = pos  # (published after the bytes it covers)
            i = lo
    finally:
        slots.release()
        os.close(job_fd)


class EarlyReads:
    """The scanner's side of the child's records: `listed` names the trials (the child's order)
    once the listing is taken, `arrive` tells the child its records will be taken."""

    def __init__(self, pid: int, shared: mmap.mmap) -> None:
        self.pid, self.shared = pid, shared
        self.rels: list[str] | None = None
        self.keys: list[int] = []
        self._slots = _slots(shared)
        self._read = _DATA
        self._front = 0
        self._reaped = False

    def listed(self, listing: Sequence[tuple[object, Sequence[TrialLoc]]]) -> None:
        locs = parseable(listing)
        self.rels = [loc.rel for loc in locs]
        self.keys = [loc.rkey for loc in locs]  # type: ignore[misc]

    def arrive(self) -> None:
        self._slots[_ARRIVED] = 1

    def claim(self) -> range | None:
        """The next indices the scanner reads itself, or None once the claims have met."""
        back = self._slots[_BACK]
        if self._front >= back:
            return None
        hi = min(self._front + CHUNK, back)
        self._slots[_FRONT] = hi
        got = range(self._front, hi)
        self._front = hi
        return got

    def records(self) -> Iterator[tuple[int, bytes | None]]:
        """(index, record or None) for each record the child published since the last call."""
        end = self._slots[_END]
        shared = self.shared
        n = len(self.rels or ())
        pos = self._read
        while pos + 8 <= end:
            j = int.from_bytes(shared[pos: pos + 4], "little")
            size = int.from_bytes(shared[pos + 4: pos + 8], "little")
            if j >= n or (size != _NONE and pos + 8 + size > end):
                pos = end = -1  # (never written so: take nothing more, the scanner reads the rest)
                break
            if size == _NONE:
                pos += 8
                yield j, None
                continue
            rec = shared[pos + 8: pos + 8 + size]
            pos += 8 + size
            yield j, rec
        self._read = pos if pos >= 0 else len(shared)

    def finish(self) -> Iterator[tuple[int, bytes | None]]:
        """Stop the child and wait for it (it is at most one claim from done); then its last records."""
        self.stop()
        return self.records()

    def stop(self) -> None:
        if self._reaped:
            return
        self._slots[_FRONT] = 1 << 62  # every index is claimed: the child leaves
        self._reaped = True
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)

    def close(self) -> None:
        self.stop()
        self._slots.release()
        self.shared.close()
