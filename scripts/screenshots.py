#!/usr/bin/env python3
"""Regenerate screenshots of every console screen on the demo data, as SVG and PNG, at
80x24 and 120x40, into screenshots/.

Each capture is (name, keys pressed from the home screen, module the screen needs); add a
screen by adding a line to CAPTURES. The clock is fixed to the demo's, so captures only
change when the console does.

    python scripts/screenshots.py [--out screenshots] [--only audit,confirm] [--no-png]
    python scripts/screenshots.py --leaderboard http://127.0.0.1:54321 --me alice --only audit-leaderboard

With --leaderboard (a local one: scripts/leaderboard_dev.py --init DIR --me NAME) it also
captures the audit of the demo's numeric-model run with the leaderboard's findings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual.worker import WorkerFailed  # noqa: E402

from services.core.config import Config  # noqa: E402
from services.core.times import DEMO_NOW  # noqa: E402
from services.harbor.demo import write_demo  # noqa: E402
from services.harbor.source import HarborSource  # noqa: E402
from tui.app import EvaldeskApp  # noqa: E402

SIZES = [(80, 24), (120, 40)]
# Home is sorted by age: row 1 is the running swebench job, row 2 the dev_set_v2 job with
# duplicates; the audit opens on the check evaldesk can fix (duplicates).
CAPTURES: list[tuple[str, list[str], str | None]] = [
    ("experiments", [], None),
    ("experiments-filtered", ["slash", *"terminal", "enter"], None),
    ("audit", ["down", "a"], None),
    ("confirm-dedupe", ["down", "a", "x"], None),
    ("help", ["question_mark"], None),
    ("log", ["L"], None),
    ("trials", ["down", "enter"], "tui.screens.trials"),
    ("monitor", ["m"], "tui.screens.monitor"),
]


async def settle(pilot: object) -> None:
    app = pilot.app  # type: ignore[attr-defined]
    for _ in range(4):
        with contextlib.suppress(WorkerFailed):
            await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]


LEADERBOARD_JOB = "terminal_bench_2_1774950145766573_2026-11-19__11-20-00"


async def capture(jobs: Path, state: Path, name: str, keys: list[str], size: tuple[int, int],
                  out: Path, png: bool, leaderboard: dict[str, object] | None = None) -> Path:
    config = Config(journal_path=str(state / "journal.jsonl"))
    if leaderboard:
        config = Config.model_validate({"journal_path": str(state / "journal.jsonl"), **leaderboard})
    app = EvaldeskApp([HarborSource(jobs, config.policy, label="demo")], config, read_only=False,
                      now=DEMO_NOW + timedelta(minutes=5), poll=False, cursor_blink=False)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        if leaderboard:
            for _ in range(3):  # the leaderboard is read after the first scan, then the audit re-made
                await settle(pilot)
            app.open_audit(f"demo::{LEADERBOARD_JOB}")
            await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        app.clear_notifications()  # toasts would cover the screen being shown
        await pilot.pause()
        svg_name = f"{name}-{size[0]}x{size[1]}.svg"
        app.save_screenshot(filename=svg_name, path=str(out))
    svg = out / svg_name
    if png:
        import cairosvg

        cairosvg.svg2png(url=str(svg), write_to=str(svg.with_suffix(".png")))
    return svg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "screenshots"))
    parser.add_argument("--only", default="", help="comma-separated capture names")
    parser.add_argument("--no-png", action="store_true")
    parser.add_argument("--leaderboard", metavar="URL", help="also capture the audit with this leaderboard's findings")
    parser.add_argument("--me", default=os.environ.get("USER") or "me", help="--leaderboard: whose rows are yours")
    args = parser.parse_args(argv)
    os.environ["TZ"] = "UTC"
    time.tzset()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = {n for n in args.only.split(",") if n}
    with tempfile.TemporaryDirectory() as tmp:
        jobs = Path(tmp) / "jobs"
        write_demo(jobs)
        captures: list[tuple[str, list[str], str | None]] = list(CAPTURES)
        lb: dict[str, object] | None = None
        if args.leaderboard:
            os.environ.setdefault("SUPABASE_KEY", "local-dev-key")
            lb = {"usernames": [args.me], "leaderboard": {"url": args.leaderboard}}
            captures.append(("audit-leaderboard", [], None))
        for name, keys, needs in captures:
            if only and name not in only:
                continue
            if needs and importlib.util.find_spec(needs) is None:
                print(f"skip {name}: {needs} is not in this build")
                continue
            for size in SIZES:
                svg = asyncio.run(capture(jobs, Path(tmp), name, keys, size, out, not args.no_png,
                                          lb if name == "audit-leaderboard" else None))
                print(f"wrote {svg.relative_to(out.parent) if svg.is_relative_to(out.parent) else svg}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
