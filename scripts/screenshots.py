#!/usr/bin/env python3
"""Regenerate screenshots of every console screen on the demo data, as SVG and PNG, at
80x24 and 120x40, into screenshots/.

The console is the one `evaldesk` opens with no arguments: every backend's demo data (Harbor
jobs, a csbench campaign, AISBench tasks, a Rock run) and the demo's baseline. It lives in a
fixed folder, /tmp/evaldesk-screenshots (remade on every run, and used as XDG_DATA_HOME,
XDG_STATE_HOME, XDG_CONFIG_HOME and XDG_CACHE_HOME), so the paths a screen shows, such as a
retry's working dir or a written report, read the same on every run; the clock is the
demo's, so captures only change when the console does.

Each capture is a line of CAPTURES: its name, what it shows, the steps from the home screen
and the screen it must end on (a capture that ends anywhere else fails rather than being
written). A step is a key name, or (kind, argument):

    ("select", TEXT)  put the list's cursor on the one experiment whose key contains TEXT
    ("check", ID)     put the audit's cursor on the check ID
    ("open", NAME)    open a view the demo cannot reach by keys alone (see OPENERS)
    ("audit", JOB)    open the audit of the demo's Harbor job JOB

The csbench captures add a [csbench] section (csbench's own config, in the fixed folder): a
teardown needs it. The programs previews name (harbor, csbench, xdg-open) are stand-ins on
PATH that run nothing, so a preview does not depend on what this machine has installed.

    python scripts/screenshots.py [--out screenshots] [--only audit,confirm-dedupe] [--no-png] [--list]
    python scripts/screenshots.py --leaderboard http://127.0.0.1:54321 --me alice --only audit-leaderboard

With --leaderboard (a local one: scripts/leaderboard_dev.py --init DIR --seed demo --me NAME)
it also captures the audit of the demo's numeric-model run with the leaderboard's findings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual.worker import WorkerCancelled, WorkerFailed  # noqa: E402

from services.core.config import Config  # noqa: E402
from services.core.plain import validate  # noqa: E402
from services.core.times import DEMO_NOW  # noqa: E402
from services.core.xdg import data_dir  # noqa: E402

SIZES = [(80, 24), (120, 40)]
BASE = Path("/tmp/evaldesk-screenshots")
NOW = DEMO_NOW + timedelta(minutes=5)

SWE = "swebench-verified-random-100_claude-sonnet-4-5"  # the running Harbor job, top of the list
DEV_SET = "dev_set_v2_gpt-5-mini_2026-11-19__08-30-00"  # a Harbor job with duplicate trials
QWEN = "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00"  # a Harbor job to resume
OPENTHINKER = "laion-OpenThinker-Agent-8B"  # the Harbor run the demo's baseline is for
ROCK = "exp-7f3a9c21"
CAMPAIGN = "camp-5e1f0c2a"
LEADERBOARD_JOB = "terminal_bench_2_1774950145766573_2026-11-19__11-20-00"

Step = str | tuple[str, str]


@dataclass(frozen=True)
class Capture:
    name: str
    shows: str
    steps: tuple[Step, ...]
    screen: str  # the class of the screen the capture must end on
    needs: str | None = None  # a module the screen lives in, when not every build has it
    csbench: bool = False  # with a [csbench] config section (teardown needs csbench's own config)


CAPTURES: list[Capture] = [
    Capture("experiments", "the experiment list: every backend's demo runs, verdicts and progress",
            (("select", SWE),), "ExperimentsScreen"),
    Capture("experiments-filtered", "the list filtered with / to \"terminal\"",
            ("slash", *"terminal", "enter", ("select", QWEN)), "ExperimentsScreen"),
    Capture("audit", "the audit of a Harbor job with duplicate trials, on the check evaldesk can fix",
            (("select", DEV_SET), "a", ("check", "duplicates")), "AuditScreen"),
    Capture("confirm-dedupe", "the dedupe preview (x on the duplicates check)",
            (("select", DEV_SET), "a", ("check", "duplicates"), "x"), "ConfirmScreen"),
    # the preview scrolled (down) to the command it will run
    Capture("confirm-resume", "the resume preview of the Qwen3-32B Harbor job (x on valid_count): "
            "trials set aside, the exact harbor command",
            (("select", QWEN), "a", ("check", "valid_count"), "x", *["down"] * 8), "ConfirmScreen"),
    Capture("audit-alignment", "the audit of the run the demo's baseline is for, on its alignment check",
            (("select", OPENTHINKER), "a", ("check", "alignment")), "AuditScreen"),
    Capture("report", "the report dialog (R): where the HTML report was written and its summary",
            (("select", OPENTHINKER), "R"), "ReportScreen", "tui.screens.report"),
    Capture("help", "the key help (?)", (("select", SWE), "question_mark"), "HelpScreen"),
    Capture("log", "the event log (L)", (("select", SWE), "L"), "LogScreen"),
    Capture("trials", "the trials of a Harbor job with its log and diagnosis",
            (("select", DEV_SET), "enter"), "TrialsScreen", "tui.screens.trials"),
    Capture("monitor", "the live monitor of the running Harbor job (m)",
            (("select", SWE), "m"), "MonitorScreen", "tui.screens.monitor"),
    Capture("command", "the output view of a resume's command (as it streams)",
            (("select", QWEN), ("open", "command")), "CommandLogScreen", "tui.screens.command_log"),
    Capture("rock-trials", "a Rock run's errored tasks (s s) with the task log and the diagnosis (d)",
            (("select", ROCK), "enter", "s", "s", "d"), "TrialsScreen", "tui.screens.trials"),
    Capture("rock-retry", "the Rock retry preview (x in the audit of exp-7f3a9c21): the regression.py command",
            (("select", ROCK), "a", ("check", "valid_count"), "x"), "ConfirmScreen"),
    Capture("aisbench-results", "the results view of an AISBench perf run (v): latency percentiles",
            (("select", "perf-gsm8k"), "v"), "ResultsScreen", "tui.screens.results"),
    Capture("aisbench-inputs", "the inputs dialog of an AISBench task that needs them (x in its audit)",
            (("select", "gsm8k-qwen3-32b"), "a", "x"), "InputsScreen", "tui.screens.inputs"),
    Capture("csbench-audit", "the checklist of a csbench cloud campaign",
            (("select", CAMPAIGN), "a"), "AuditScreen", csbench=True),
    Capture("csbench-teardown", "the csbench teardown preview (x on the teardown check): the exact command",
            (("select", CAMPAIGN), "a", ("check", "teardown"), "x"), "ConfirmScreen", csbench=True),
    Capture("recovery", "the dialog for an unfinished write found at start",
            (("select", SWE), ("open", "recovery")), "RecoveryScreen", "tui.screens.recovery"),
    Capture("lock", "the dialog for a target held by a stale lock",
            (("select", SWE), ("open", "lock")), "LockScreen", "tui.screens.recovery"),
]
LEADERBOARD = Capture("audit-leaderboard", "the audit of the numeric-model run with the leaderboard's findings",
                      (("audit", LEADERBOARD_JOB), ("check", "model_name")), "AuditScreen")


# ---- views the demo cannot reach by keys alone ---------------------------------------------

def open_command(app: Any, demo: Path) -> None:
    """A resume's command as it runs, with fixed output: running the real `harbor` would make
    a picture that never repeats."""
    from tui.context import CommandRun

    key = f"demo::{QWEN}"
    output = [("stdout", "Running 85 trial(s) (182 already done of 267)\n"),
              *[("stdout", f"Trial fix-git-history-{i}__AbC{i:04d} finished: reward={float(i % 2)}\n")
                for i in range(14)],
              ("stderr", "Skipping existing trial directory fix-raft-log__Zz9 because result.json could not be "
                         "parsed\n")]
    app.command_runs[key] = CommandRun(
        key, "resume", f"harbor jobs resume -p {demo / QWEN} -f DaytonaError -f EnvironmentStartTimeoutError",
        None, app.now(), output=output, received=len(output))
    app.open_command_log(key)


def open_recovery(app: Any, demo: Path) -> None:
    from services.remediations.recovery import Pending
    from tui.screens.recovery import RecoveryScreen

    pending = Pending(id="20261120T180000000000Z-dedupe-3f9a1c", action="dedupe", target=str(demo / DEV_SET),
                      status="applying", n_done=4, n_steps=22, created_at=app.now() - timedelta(minutes=20),
                      user="alice", machine="ws-17", pid=31337)
    app.push_screen(RecoveryScreen(pending))


def open_lock(app: Any, demo: Path) -> None:
    from services.remediations.errors import LockHeld
    from services.remediations.lock import LockOwner
    from tui.screens.recovery import LockScreen

    job = str(demo / DEV_SET)
    owner = LockOwner(host="login-b", pid=4242, user="bob", started_at=app.now() - timedelta(hours=7),
                      action="dedupe", record="20261120T110500000000Z-dedupe-77aa01")
    held = LockHeld(owner, f"{job}/.evaldesk-lock", "held for 7.0 h, over the 6 h limit", job)
    app.push_screen(LockScreen(f"dedupe of {DEV_SET}", held, app.now()))


OPENERS: dict[str, Callable[[Any, Path], None]] = {
    "command": open_command, "recovery": open_recovery, "lock": open_lock,
}


# ---- the console --------------------------------------------------------------------------

def prepare() -> Path:
    """A fresh fixed folder holding the demo where `evaldesk` writes it; the demo's path."""
    shutil.rmtree(BASE, ignore_errors=True)
    for var, sub in (("XDG_DATA_HOME", "share"), ("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config"),
                     ("XDG_CACHE_HOME", "cache")):
        os.environ[var] = str(BASE / sub)
    from services.core.registry import write_demo

    demo = data_dir() / "demo"
    started = time.time()
    write_demo(demo, DEMO_NOW)
    settle_mtimes(demo, started)
    # csbench's own config and checkout, for the captures of a teardown (nothing runs)
    checkout = BASE / "csbench"
    (checkout / "configs").mkdir(parents=True)
    (checkout / "infra" / "terraform" / "aliyun-iam").mkdir(parents=True)
    (checkout / "configs" / "csbench.yaml").write_text(
        "target:\n  provider: aliyun\n  region: cn-hangzhou\n  blob_bucket: evaldesk-demo\n  mode: real\n",
        encoding="utf-8")
    # the programs the previews name, so a preview reads the same on any machine (whether
    # harbor or a system opener is installed there); the captures never run them
    bin_dir = BASE / "bin"
    bin_dir.mkdir()
    for program in ("harbor", "csbench", "xdg-open"):
        (bin_dir / program).write_text(f"#!/bin/sh\necho '{program}: a stand-in for screenshots, it runs nothing' >&2\n"
                                       "exit 1\n", encoding="utf-8")
        (bin_dir / program).chmod(0o755)
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    return demo


def ready(screen: Any) -> bool:
    """A screen that reads files after it opens has read them (the trials' log and diagnosis)."""
    if type(screen).__name__ != "TrialsScreen":
        return True
    trial = screen.selected_trial()
    info = screen.diagnose.info
    return trial is None or (info is not None and info.title == trial.trial_name and bool(screen.log_tail.lines)
                             and trial.trial_name in screen.log_tail.title)


def settle_mtimes(root: Path, since: float) -> None:
    """Date what the demo wrote without a time of its own at the demo's clock, as if written
    then: plans hash what they read (a resume hashes trial dirs' mtimes into its record id),
    so a preview reads the same on every run."""
    stamp = DEMO_NOW.timestamp()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*filenames, *dirnames]:
            path = os.path.join(dirpath, name)
            if os.lstat(path).st_mtime >= since - 1:
                os.utime(path, (stamp, stamp), follow_symlinks=False)
    os.utime(root, (stamp, stamp))


def make_app(demo: Path, overrides: dict[str, Any]) -> Any:
    from tui.app import EvaldeskApp, demo_sources

    config = validate(Config, overrides)
    return EvaldeskApp(demo_sources(config, demo), config, False, now=NOW, poll=False, cursor_blink=False,
                       baseline_dirs=[str(demo / "baselines")])


async def settle(pilot: Any, rounds: int = 6) -> None:
    """Let workers finish and the messages they posted be handled (they chain). A failure is
    the app's to report; a cancelled worker was replaced by a newer one of its group."""
    for _ in range(rounds):
        with contextlib.suppress(WorkerFailed, WorkerCancelled):
            await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def run_step(pilot: Any, step: Step, demo: Path) -> None:
    app = pilot.app
    if isinstance(step, str):
        await pilot.press(step)
    elif step[0] == "select":
        from textual.widgets import DataTable

        keys = [r.key for r in app.screen.shown]
        found = [i for i, k in enumerate(keys) if step[1] in k]
        if len(found) != 1:
            raise RuntimeError(f"select {step[1]!r}: {len(found)} experiments match")
        app.screen.query_one(DataTable).move_cursor(row=found[0], animate=False)
    elif step[0] == "check":
        from widgets.checklist import Checklist

        checklist = app.screen.query_one(Checklist)
        checklist.highlighted = [i.id for i in checklist.items].index(step[1])
    elif step[0] == "open":
        OPENERS[step[1]](app, demo)
    elif step[0] == "audit":
        app.open_audit(f"demo::{step[1]}")
    else:
        raise ValueError(f"unknown step {step!r}")
    await settle(pilot, 3)


async def capture(demo: Path, cap: Capture, size: tuple[int, int], out: Path, png: bool,
                  overrides: dict[str, Any]) -> Path:
    app = make_app(demo, overrides)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        if "leaderboard" in overrides:
            for _ in range(3):  # the leaderboard is read after the first scan, then the audit re-made
                await settle(pilot)
        for step in cap.steps:
            app.clear_notifications()  # a toast on the screen under a dialog would stay there
            await run_step(pilot, step, demo)
        deadline = time.monotonic() + 10
        while not (type(app.screen).__name__ == cap.screen and ready(app.screen)) and time.monotonic() < deadline:
            await settle(pilot, 1)
        if type(app.screen).__name__ != cap.screen or not ready(app.screen):
            said = "; ".join(e.message for e in app.event_log[-3:])
            raise RuntimeError(f"ended on {type(app.screen).__name__} (ready: {ready(app.screen)}), not {cap.screen} "
                               f"(log: {said})")
        await settle(pilot, 2)
        app.clear_notifications()  # toasts would cover the screen being shown
        await pilot.pause()
        svg_name = f"{cap.name}-{size[0]}x{size[1]}.svg"
        app.save_screenshot(filename=svg_name, path=str(out))
    svg = out / svg_name
    if png:
        import cairosvg

        cairosvg.svg2png(url=str(svg), write_to=str(svg.with_suffix(".png")))
    return svg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "screenshots"))
    parser.add_argument("--only", default="", help="comma-separated capture names")
    parser.add_argument("--no-png", action="store_true")
    parser.add_argument("--leaderboard", metavar="URL", help="also capture the audit with this leaderboard's findings")
    parser.add_argument("--me", default=os.environ.get("USER") or "me", help="--leaderboard: whose rows are yours")
    parser.add_argument("--list", action="store_true", help="print the captures and what they show")
    args = parser.parse_args(argv)
    captures = list(CAPTURES) + ([LEADERBOARD] if args.leaderboard else [])
    if args.list:
        for cap in captures:
            print(f"{cap.name}: {cap.shows}")
        return 0
    os.environ["TZ"] = "UTC"  # Harbor's job times are naive local time
    time.tzset()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    only = {n for n in args.only.split(",") if n}
    unknown = only - {c.name for c in captures}
    if LEADERBOARD.name in unknown:
        parser.error(f"{LEADERBOARD.name} needs --leaderboard URL")
    if unknown:
        parser.error(f"no capture named {', '.join(sorted(unknown))} (see --list)")
    demo = prepare()
    csbench = {"config": str(BASE / "csbench" / "configs" / "csbench.yaml"), "executable": "csbench"}
    failed: list[str] = []
    for cap in captures:
        if only and cap.name not in only:
            continue
        if cap.needs and importlib.util.find_spec(cap.needs) is None:
            print(f"skip {cap.name}: {cap.needs} is not in this build")
            continue
        overrides: dict[str, Any] = {"csbench": csbench} if cap.csbench else {}
        if cap is LEADERBOARD:
            os.environ.setdefault("SUPABASE_KEY", "local-dev-key")
            overrides |= {"usernames": [args.me], "leaderboard": {"url": args.leaderboard}}
        for size in SIZES:
            try:
                svg = asyncio.run(capture(demo, cap, size, out, not args.no_png, overrides))
            except Exception as exc:  # one broken capture must not stop the others
                failed.append(f"{cap.name} {size[0]}x{size[1]}: {exc}")
                print(f"FAILED {failed[-1]}", file=sys.stderr)
                continue
            print(f"wrote {svg.relative_to(ROOT) if svg.is_relative_to(ROOT) else svg}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
