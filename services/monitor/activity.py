"""Signs of life of running trials: the mtime and last line of each one's log.

A Harbor trial writes config.json once at start and result.json once at the end, so the log
is where a live trial shows progress; the monitor's idle times and rule (a) read this.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
from dataclasses import dataclass

from services.core.models import Experiment, Snapshot, State, Trial, TrialStatus, experiment_key
from services.transport.fs import JobFS


@dataclass(frozen=True, slots=True)
class Activity:
    """The newest sign of life of a running trial: its log's mtime and last line."""

    mtime: float | None
    line: str = ""


_LOGGER = re.compile(r"^[A-Za-z_]\w*(?:\.\w+)+:\s+")  # "harbor.trial: " — the logger adds nothing


_LOG_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}[,.]?\d*\s+(?:[A-Z]+\s+)?")


def last_line(tail: bytes) -> str:
    for raw in reversed(tail.decode("utf-8", "replace").splitlines()):
        line = _LOGGER.sub("", _LOG_PREFIX.sub("", raw.strip()).strip())
        if line:
            return line[:160]
    return ""


async def probe_activity(
    exp: Experiment,
    fs: JobFS,
    *,
    log_name: str = "trial.log",
    max_trials: int = 256,
    tail_bytes: int = 2048,
) -> dict[str, Activity]:
    """Stat and tail the log of each running trial: its mtime is the trial's newest sign of life.

    A Harbor trial writes config.json once at start and result.json once at the end, so the
    log is where a live trial shows progress. Bounded by `max_trials` so a huge backlog of
    orphaned trial dirs cannot turn one poll into thousands of reads.
    """
    running = [t for t in exp.trials if t.status == TrialStatus.running and t.copy_of is None]
    running = running[:max_trials]
    sem = asyncio.Semaphore(16)

    async def one(t: Trial) -> tuple[str, Activity] | None:
        path = posixpath.join(exp.path, t.path, log_name)
        async with sem:
            try:
                st = await fs.stat(path)
                if st is None or st.is_dir:
                    return None
                data = await fs.read_bytes(path, max(0, st.size - tail_bytes), tail_bytes) if st.size else b""
            except (OSError, asyncio.TimeoutError):  # noqa: UP041 - asyncssh raises the old name
                return None
        return t.path, Activity(st.mtime, last_line(data))

    results = await asyncio.gather(*(one(t) for t in running))
    return dict(r for r in results if r is not None)


async def probe_snapshot(snapshot: Snapshot, fs: JobFS, **kw: int) -> dict[str, dict[str, Activity]]:
    out: dict[str, dict[str, Activity]] = {}
    for exp in snapshot.experiments:
        if exp.state != State.finished and exp.counts.running:
            out[experiment_key(exp)] = await probe_activity(exp, fs, **kw)  # type: ignore[arg-type]
    return out
