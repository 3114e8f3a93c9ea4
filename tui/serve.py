"""`evaldesk serve`: the same console in a browser, for a teammate on a jump host's port forward.

textual-serve starts one console process per browser tab and streams its screen over a
websocket; nothing else changes (same sources, same keys, same write path). It listens on
127.0.0.1 unless told otherwise: exposing it on a network means anyone reaching the port
drives the console, writes included — put it behind an SSH port forward, or pass
`--read-only`.
"""

from __future__ import annotations

import argparse
import shlex
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evaldesk serve", description="Serve the console to a web browser.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--public-url", default=None, help="the URL people open, when it is not http://HOST:PORT")
    # the console's own: passed on to each tab's console (so are its other options, see evaldesk --help)
    p.add_argument("--read-only", action="store_true", help="the served console never writes")
    p.add_argument("sources", nargs="*", metavar="SOURCE",
                   help="what the console opens: a Harbor job dir, a folder of job dirs, ssh://[user@]host[:port]/path")
    return p


def serve(argv: list[str]) -> int:
    """`evaldesk serve [--host H] [--port N] [console options and SOURCEs…]`."""
    args, rest = build_parser().parse_known_intermixed_args(argv)
    console_argv = ["--read-only"] * args.read_only + rest + args.sources
    try:
        from textual_serve.server import Server
    except ImportError:
        sys.stderr.write("evaldesk: serving to a browser needs textual-serve (pip install textual-serve)\n")
        return 2
    command = shlex.join([sys.executable, "-m", "tui.cli", *console_argv])
    server = Server(command, host=args.host, port=args.port, title="evaldesk", public_url=args.public_url)
    sys.stderr.write(f"evaldesk: serving the console at {server.public_url} (ctrl+c stops)\n")
    server.serve()
    return 0
