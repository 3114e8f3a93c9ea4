"""`evaldesk --batch monitor SOURCE… --interval S [--until done|COUNT] [--baseline FILE]`.

Streams JSON lines on `out`: one ``{"type": "snapshot", …}`` per experiment per poll, one
``{"type": "warning", …}`` when a fake-execution rule starts to hold, and
``{"type": "error", …}`` when a poll of a source fails (the source is retried with backoff).
Exit code: 1 when any rule fired, else 0; 2 for a bad ``--until`` or a source that cannot be
read on the first poll. No Textual import here: this runs on the same engine as the console.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import IO, Any

from services.core.baselines import Baseline, BaselineError, baselines_for, load_baseline
from services.core.config import Config
from services.core.models import Snapshot, State, experiment_key
from services.core.policy import Policy
from services.core.source import Source, SourceUnavailable
from services.core.text import dumps, term_safe
from services.core.times import utc_now
from services.monitor.activity import probe_snapshot
from services.monitor.poller import Poller
from services.monitor.state import Clock, MonitorState

Sleep = Callable[[float], Awaitable[None]]


class UntilError(ValueError):
    pass


def parse_until(until: str | int | None) -> int | None:
    """None means "until every experiment is finished"; an int is a number of polls."""
    if until is None or (isinstance(until, str) and until.strip().lower() in ("", "done")):
        return None
    try:
        n = int(until)
    except (TypeError, ValueError):
        raise UntilError(f"--until takes 'done' or a number of polls, not {until!r}") from None
    if n < 1:
        raise UntilError(f"--until needs at least 1 poll, not {n}")
    return n


def _emit(out: IO[str], obj: dict[str, object]) -> None:
    # names may hold terminal controls or bytes that are not UTF-8: escaped, values kept
    out.write(dumps(obj, separators=(",", ":")) + "\n")
    out.flush()


def _say(err: IO[str], message: str) -> None:
    err.write(f"evaldesk: {term_safe(message)}\n")


async def run_monitor(
    sources: list[Source],
    interval: float,
    until: str,
    policy: Policy | None,
    baselines: Sequence[Baseline] | Baseline | None,
    out: IO[str] = sys.stdout,
    *,
    clock: Clock = utc_now,
    sleep: Sleep = asyncio.sleep,
    err: IO[str] = sys.stderr,
) -> int:
    try:
        max_polls = parse_until(until)
    except UntilError as exc:
        _say(err, str(exc))
        return 2
    if interval < 0:
        err.write("evaldesk: --interval must be ≥ 0 seconds\n")
        return 2
    if not sources:
        err.write("evaldesk: monitor needs at least one SOURCE\n")
        return 2
    if isinstance(baselines, Baseline):
        baselines = [baselines]
    policy = policy or Policy()
    state = MonitorState(policy, list(baselines or ()), clock=clock)
    fired = False
    finished: dict[str, bool] = {}
    # each snapshot is handled right here, in poll order, so the handler has nothing to do
    pollers = [Poller(src, _ignore, interval=interval, clock=clock) for src in sources]
    next_round = [1] * len(sources)
    polls = 0
    while True:
        polls += 1
        for i, (src, poller) in enumerate(zip(sources, pollers, strict=True)):
            if polls < next_round[i]:
                continue
            snap = await poller.poll_once()
            if snap is None:
                if polls == 1:
                    _say(err, f"cannot read {src.label}: {poller.last_error}")
                    return 2
                # a failing source sits out the rounds its backoff delay covers
                next_round[i] = polls + (max(1, round(poller.next_delay / interval)) if interval > 0 else 1)
                _emit(out, {"type": "error", "source": src.label, "at": _iso_now(clock),
                            "message": poller.last_error, "retry_in_s": poller.next_delay})
                continue
            activity = await probe_snapshot(snap, src.fs())
            new = state.feed(snap, activity)
            for exp in snap.experiments:
                reading = state.reading(experiment_key(exp))
                if reading is not None:
                    _emit(out, reading.as_json())
                finished[experiment_key(exp)] = exp.state == State.finished
            for se in snap.errors:
                _emit(out, {"type": "error", "source": se.source, "at": _iso_now(clock),
                            "where": se.where, "message": se.message})
            for w in new:
                fired = True
                _emit(out, w.as_json())
        if max_polls is not None and polls >= max_polls:
            break
        if max_polls is None and finished and all(finished.values()):
            break
        await sleep(interval)
    return 1 if fired else 0


def _ignore(snap: Snapshot) -> None:
    return None


def _iso_now(clock: Clock) -> str:
    return clock().isoformat().replace("+00:00", "Z")


def run_monitor_cli(args: Any, config: Config, out: IO[str]) -> int:
    """The `--batch monitor` entry: argparse namespace in, exit code out."""
    from services.core.registry import open_sources

    err = sys.stderr
    if getattr(args, "format", None) not in (None, "jsonl"):
        err.write(f"evaldesk: monitor streams JSON lines; --format {args.format} is not available for it "
                  "(use --format jsonl, or leave --format out)\n")
        return 2
    if not args.sources:
        err.write("evaldesk: monitor needs at least one SOURCE\n")
        return 2
    # --baseline FILE, else the config's and the SOURCEs' baselines (as the console and the audit read them)
    baselines: list[Baseline] = []
    if getattr(args, "baseline", None):
        try:
            baselines.append(load_baseline(args.baseline))
        except BaselineError as exc:
            _say(err, f"--baseline {exc}")
            return 2
    else:
        baselines, problems = baselines_for(config, args.sources)
        for p in problems:
            err.write(f"evaldesk: {p}\n")
    interval = args.interval if args.interval is not None else config.poll_interval_s
    try:
        sources = [src for s in args.sources for src in open_sources(s, config)]
    except SourceUnavailable as exc:
        _say(err, f"cannot read {exc.where}: {exc.message}")
        return 2
    except ValueError as exc:
        _say(err, str(exc))
        return 2

    async def main() -> int:
        try:
            return await run_monitor(sources, interval, args.until or "done", config.policy, baselines, out)
        finally:
            for src in sources:
                with contextlib.suppress(Exception):
                    await src.close()

    from tui import interrupt

    # Ctrl+C: KeyboardInterrupt goes up to the entry point, which says so once and exits 130
    return interrupt.run(main())
