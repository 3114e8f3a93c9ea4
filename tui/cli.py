"""The `evaldesk` entry point: the console, `--batch` headless commands, or `demo`."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

BATCH_COMMANDS = ("list", "audit", "trials", "dedupe", "undo", "finish", "monitor", "fix", "journal", "resume",
                  "launch", "report", "submit")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("evaldesk")
    except PackageNotFoundError:
        return "0+unknown"


class _VersionAction(argparse.Action):
    """--version, looked up only when asked for (importing importlib.metadata costs every run ~12 ms)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: object, values: object,
                 option_string: str | None = None) -> None:
        sys.stdout.write(f"evaldesk {_version()}\n")  # on stdout, as argparse's own version action
        parser.exit(0)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # one line and exit 2, never a traceback or a screenful of usage
        self.exit(2, f"evaldesk: {message} (see evaldesk --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="evaldesk",
        description="A keyboard-driven console for agentic-model evaluations. With no SOURCE it opens the "
        "sources in the config file, or the bundled demo data.",
        epilog="Batch: evaldesk --batch list|audit|trials|dedupe|undo|finish|monitor|resume|report [options] SOURCE…; "
        "fix CHECK_ID [--apply] SOURCE…; journal [--since ISO]; launch …; submit [PLAN…] [--apply] (csbench)  "
        "Demo data: evaldesk demo [DIR].  In a browser: evaldesk serve [--host H] [--port N] [SOURCE…].  "
        "Exit codes: 0 all pass, 1 needs action, 2 usage/unreachable, 130 Ctrl+C, 141 stdout closed early.",
    )
    p.add_argument("sources", nargs="*", metavar="SOURCE",
                   help="a Harbor job dir, a folder of job dirs, or ssh://[user@]host[:port]/path")
    p.add_argument("--version", action=_VersionAction)
    p.add_argument("--config", metavar="PATH", help="config file (default $XDG_CONFIG_HOME/evaldesk/config.toml)")
    p.add_argument("--read-only", action="store_true", help="disable every write")
    p.add_argument("--no-cache", action="store_true",
                   help="read every trial file again: no parse cache ($XDG_CACHE_HOME/evaldesk)")
    p.add_argument("--ssh-config", metavar="FILE", help="read this ssh config instead of ~/.ssh/config (like ssh -F)")
    p.add_argument("--batch", choices=BATCH_COMMANDS, metavar="COMMAND", dest="command",
                   help="run headless: " + ", ".join(BATCH_COMMANDS))
    p.add_argument("--format", choices=("table", "json", "jsonl", "html"),
                   help="batch output (default: table on a terminal, json otherwise; report: html or json)")
    p.add_argument("--wide", action="store_true",
                   help="table on a terminal: every column, every cell whole (default: fit the terminal)")
    p.add_argument("-o", "--output", metavar="FILE", help="report: write the report to FILE (default stdout)")
    p.add_argument("--progress", choices=("none", "text", "json", "sm"),
                   help="batch progress on stderr; sm: __SM_PROGRESS__=<json> lines and one final JSON with ok")
    p.add_argument("--apply", action="store_true",
                   help="dedupe, fix, resume, launch, submit: carry out the plan (default is a dry run)")
    p.add_argument("--since", metavar="ISO", help="journal: only writes at or after this time")
    p.add_argument("--break-lock", action="store_true",
                   help="dedupe --apply, undo, finish: break a stale lock in the way (a dead holder, or "
                        "one older than the limit) and say whose it was; a live holder's lock is never broken")
    p.add_argument("--force", action="store_true",
                   help="undo, finish: go on although the command a resume started may still run, or its "
                        "connection dropped mid-run (look on the host first)")
    p.add_argument("--status", choices=("valid", "errored", "running"), help="trials: only this status")
    p.add_argument("--exception", metavar="TYPE", action="append",
                   help="trials: only this exception type; resume: re-run only these (repeat it, or A,B)")
    p.add_argument("--interval", type=float, default=None, metavar="S", help="monitor: seconds between polls")
    p.add_argument("--until", default=None, metavar="done|COUNT", help="monitor: stop when done or after COUNT polls")
    p.add_argument("--baseline", metavar="FILE",
                   help="monitor, audit, report: this baseline file instead of the config dir's baselines/")
    launch = p.add_argument_group("launch (AISBench tasks; SOURCE is aisbench+ssh://host/task_root or a path)")
    launch.add_argument("--suite", help="gsm8k, mmlu, ceval, math500, aime2024, gpqa, humaneval, perf_gsm8k, …")
    launch.add_argument("--model", help="the served model name")
    launch.add_argument("--api-base", metavar="URL", help="the model API as the eval host reaches it: http://ip:port/v1")
    launch.add_argument("--max-out-len", type=int, metavar="N", help="max output tokens (≤ max-model-len − 8K)")
    launch.add_argument("--batch-size", type=int, metavar="N", help="concurrent requests (≈ the server's max-num-seqs)")
    launch.add_argument("--num-prompts", type=int, metavar="N", help="only the first N prompts (a quick check)")
    launch.add_argument("--api-key-env", metavar="VAR", help="env var holding the API key (never the key itself)")
    launch.add_argument("--task-id", metavar="ID", help="the new task's id (default <suite>-<time>-<hex>)")
    launch.add_argument("--reuse", metavar="TASK_ID", help="launch or resume this task of the task table")
    return p


def _demo(argv: list[str]) -> int:
    from pathlib import Path

    from services.core.registry import write_demo
    from services.core.times import DEMO_NOW
    from services.core.xdg import data_dir

    target = argv[0] if argv else str(data_dir() / "demo")
    paths = write_demo(Path(target), DEMO_NOW)
    print(f"wrote {len(paths)} demo experiments to {target}")
    print(f"try: evaldesk {target}   or   evaldesk --batch audit {target}")
    print(f"alignment: evaldesk --batch audit --baseline {target}/baselines/terminal_bench_2-openthinker-agent-8b.json "
          f"{target}  (or copy the file to the config dir's baselines/)")
    return 0


# Commands that only read and print: once they return, everything they have to say is written
READ_ONLY_COMMANDS = ("list", "audit", "trials")


def entry() -> None:
    """The process entry point (the `evaldesk` script, `python -m tui.cli`)."""
    argv = sys.argv[1:]
    try:
        code = main(argv)
        if _read_only_batch(argv):
            _quick_exit(code)
    except BrokenPipeError:
        from tui.interrupt import exit_reader_gone, reader_gone

        if not reader_gone():
            raise
        exit_reader_gone()  # `| head` took what it wanted
    sys.exit(code)


def _read_only_batch(argv: list[str]) -> bool:
    for i, a in enumerate(argv):
        if a == "--batch":
            return i + 1 < len(argv) and argv[i + 1] in READ_ONLY_COMMANDS
        if a.startswith("--batch="):
            return a.partition("=")[2] in READ_ONLY_COMMANDS
    return False


def _quick_exit(code: int) -> None:
    """Leave without tearing down every module and the objects of a big scan one by one (~50 ms
    after 20k trials). Only for read-only commands: they hold no file or lock that needs closing,
    and the parse cache is SQLite in WAL mode, which a process may leave at any point."""
    sys.stdout.flush()  # (a reader that left: BrokenPipeError, for entry())
    sys.stderr.flush()
    if "logging" in sys.modules:
        import logging

        logging.shutdown()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    # cryptography 51 deprecates DSA, which asyncssh still registers when imported: a line on stderr
    # that no user can act on, and that would break --batch's one-line error contract
    warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")
    try:
        return _main(argv)
    except KeyboardInterrupt:
        from tui.interrupt import exit_interrupted

        exit_interrupted()


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        return _demo(argv[1:])
    if argv[:1] == ["serve"]:
        from tui.serve import serve

        return serve(argv[1:])
    # intermixed: `fix CHECK_ID --apply SOURCE` puts an option between positionals
    args = build_parser().parse_intermixed_args(argv)
    # imported here, not at the top, so a Ctrl+C while they load is caught like any other
    from services.core.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        from services.core.text import term_safe

        sys.stderr.write(f"evaldesk: {term_safe(exc)}\n")
        return 2
    if args.ssh_config:
        config.ssh_config = args.ssh_config
    if args.read_only:
        config.read_only = True
        config.read_only_why = "--read-only"
    if args.no_cache:
        config.scan_cache = False
    if args.command:
        # journal needs no SOURCE; submit's are plan files, else the [csbench] plans
        if not args.sources and args.command not in ("journal", "submit"):
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
    entry()
