"""The `evaldesk` entry point: the console, `--batch` headless commands, or `demo`."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version

from services.core.config import ConfigError, load_config

BATCH_COMMANDS = ("list", "audit", "trials", "dedupe", "undo", "monitor", "report")


def _version() -> str:
    try:
        return version("evaldesk")
    except PackageNotFoundError:
        return "0+unknown"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # one line and exit 2, never a traceback or a screenful of usage
        self.exit(2, f"evaldesk: {message} (see evaldesk --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="evaldesk",
        description="A keyboard-driven console for agentic-model evaluations. With no SOURCE it opens the "
        "sources in the config file, or the bundled demo data.",
        epilog="Batch: evaldesk --batch list|audit|trials|dedupe|undo|monitor|report [options] SOURCE…  "
        "Demo data: evaldesk demo [DIR].  Exit codes: 0 all pass, 1 needs action, 2 usage/unreachable.",
    )
    p.add_argument("sources", nargs="*", metavar="SOURCE",
                   help="a Harbor job dir, a folder of job dirs, or ssh://[user@]host[:port]/path")
    p.add_argument("--version", action="version", version=f"evaldesk {_version()}")
    p.add_argument("--config", metavar="PATH", help="config file (default $XDG_CONFIG_HOME/evaldesk/config.toml)")
    p.add_argument("--read-only", action="store_true", help="disable every write")
    p.add_argument("--ssh-config", metavar="FILE", help="read this ssh config instead of ~/.ssh/config (like ssh -F)")
    p.add_argument("--batch", choices=BATCH_COMMANDS, metavar="COMMAND", dest="command",
                   help="run headless: " + ", ".join(BATCH_COMMANDS))
    p.add_argument("--format", choices=("table", "json", "jsonl", "html"),
                   help="batch output (default: table on a terminal, json otherwise; report: html or json)")
    p.add_argument("-o", "--output", metavar="FILE", help="report: write the report to FILE (default stdout)")
    p.add_argument("--progress", choices=("none", "text", "json"), help="batch progress on stderr")
    p.add_argument("--apply", action="store_true", help="dedupe: carry out the plan (default is a dry run)")
    p.add_argument("--status", choices=("valid", "errored", "running"), help="trials: only this status")
    p.add_argument("--exception", metavar="TYPE", help="trials: only this exception type")
    p.add_argument("--interval", type=float, default=None, metavar="S", help="monitor: seconds between polls")
    p.add_argument("--until", default=None, metavar="done|COUNT", help="monitor: stop when done or after COUNT polls")
    p.add_argument("--baseline", metavar="FILE",
                   help="monitor, audit, report: this baseline file instead of the config dir's baselines/")
    return p


def _demo(argv: list[str]) -> int:
    from pathlib import Path

    from services.core.config import data_dir
    from services.core.registry import write_demo
    from services.core.times import DEMO_NOW

    target = argv[0] if argv else str(data_dir() / "demo")
    paths = write_demo(Path(target), DEMO_NOW)
    print(f"wrote {len(paths)} demo experiments to {target}")
    print(f"try: evaldesk {target}   or   evaldesk --batch audit {target}")
    print(f"alignment: evaldesk --batch audit --baseline {target}/baselines/terminal_bench_2-openthinker-agent-8b.json "
          f"{target}  (or copy the file to the config dir's baselines/)")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        return _demo(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        sys.stderr.write(f"evaldesk: {exc}\n")
        return 2
    if args.ssh_config:
        config.ssh_config = args.ssh_config
    if args.read_only:
        config.read_only = True
    if args.command:
        if not args.sources:
            sources = [s.path for s in config.sources]
            if not sources:
                sys.stderr.write(f"evaldesk: --batch {args.command} needs a SOURCE (a job dir or folder)\n")
                return 2
            args.sources = sources
        from tui.batch import run_batch

        return run_batch(args, config)
    from tui.app import run_app

    return run_app(args.sources, config, read_only=config.read_only)


if __name__ == "__main__":
    raise SystemExit(main())
