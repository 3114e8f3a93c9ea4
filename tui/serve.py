"""`evaldesk serve`: the same console in a browser, for a teammate on a jump host's port forward.

textual-serve starts one console process per browser tab and streams its screen over a
websocket; nothing else changes (same sources, same keys, same write path). A console that
can move trial dirs must not be driven by whatever web page a person has open, so:

- each start makes a secret token; the URL printed carries it (`/?token=…`, as Jupyter
  does), the page sets it as a SameSite=Strict cookie (its websocket carries it so), and
  every request without it — the page, the websocket, a download — gets 403;
- the websocket is refused unless its `Origin` is the console's own (the URL printed, or
  this port on loopback): a page elsewhere cannot open it even with the cookie;
- bound beyond loopback it is `--read-only` unless `--allow-writes` is given, and says so;
  the page's websocket and static URLs follow the address the browser used, never 0.0.0.0.
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import secrets
import shlex
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from aiohttp import web

TOKEN_COOKIE = "evaldesk_token"
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evaldesk serve", description="Serve the console to a web browser.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--public-url", default=None, help="the URL people open, when it is not http://HOST:PORT")
    # the console's own: passed on to each tab's console (so are its other options, see evaldesk --help)
    p.add_argument("--read-only", action="store_true", help="the served console never writes")
    p.add_argument("sources", nargs="*", metavar="SOURCE",
                   help="what the console opens: a Harbor job dir, a folder of job dirs, ssh://[user@]host[:port]/path")
    p.add_argument("--allow-writes", action="store_true",
                   help="bound beyond loopback, let the browser console write (it is read-only otherwise)")
    return p


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def allowed_origins(host: str, port: int, public_url: str | None) -> set[str]:
    """The origins a page of this console has: the URL printed, and this port on loopback."""
    out = {f"http://{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")}
    if not (host in ("0.0.0.0", "::") or is_loopback(host)):
        out.add(f"http://{host}:{port}")
    if public_url:
        out.add(origin_of(public_url))
    return out


def make_server(command: str, host: str, port: int, public_url: str | None, token: str) -> Any:
    """A textual-serve Server that wants the token and the console's own Origin."""
    import aiohttp_jinja2
    from aiohttp import web
    from textual_serve.server import Server

    origins = allowed_origins(host, port, public_url)
    cookie = f"{TOKEN_COOKIE}_{port}"  # cookies ignore ports: one name per console

    class GuardedServer(Server):  # type: ignore[misc]
        def _has_token(self, request: web.Request) -> bool:
            given = request.query.get("token") or request.cookies.get(cookie) or ""
            return hmac.compare_digest(given.encode(), token.encode())

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()

            @web.middleware
            async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
                if request.path.startswith("/static/"):
                    return await handler(request)
                if not self._has_token(request):
                    return web.Response(status=403, text="evaldesk: open the URL evaldesk serve printed (it carries "
                                                         "this start's token)\n")
                if request.path == "/ws":
                    origin = request.headers.get("Origin")
                    if origin is not None and origin.lower() not in origins:
                        return web.Response(status=403, text="evaldesk: a page from another origin cannot drive "
                                                             "this console\n")
                response: web.StreamResponse = await handler(request)
                if request.path == "/" and request.query.get("token"):
                    response.set_cookie(cookie, token, httponly=True, samesite="Strict")
                return response

            app.middlewares.append(guard)
            return app

        @aiohttp_jinja2.template("app_index.html")
        async def handle_index(self, request: web.Request) -> dict[str, Any]:
            # the page's URLs follow where the browser reached it (never ws://0.0.0.0)
            base = public_url.rstrip("/") if public_url else f"{request.scheme}://{request.host}"
            ws = ("wss:" if base.startswith("https") else "ws:") + base.split(":", 1)[1]
            try:
                size = int(request.query.get("fontsize", "16"))
            except ValueError:
                size = 16
            # the page's script appends ?width=…: the websocket carries the token in the cookie
            return {"font_size": size, "app_websocket_url": f"{ws}/ws",
                    "config": {"static": {"url": f"{base}/static/"}}, "application": {"name": self.title}}

    return GuardedServer(command, host=host, port=port, title="evaldesk", public_url=public_url)


def serve(argv: list[str]) -> int:
    """`evaldesk serve [--host H] [--port N] [console options and SOURCEs…]`."""
    args, rest = build_parser().parse_known_intermixed_args(argv)
    console_argv = ["--read-only"] * args.read_only + rest + args.sources
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        sys.stderr.write("evaldesk: serving to a browser needs textual-serve (pip install textual-serve)\n")
        return 2
    if not is_loopback(args.host):
        if args.allow_writes:
            sys.stderr.write(f"evaldesk: warning: serving on {args.host}, beyond this machine, with writes allowed: "
                             "anyone with the URL below drives the console\n")
        elif "--read-only" not in console_argv:
            console_argv = ["--read-only", *console_argv]
            sys.stderr.write(f"evaldesk: warning: serving on {args.host}, beyond this machine: the console is "
                             "read-only (--allow-writes lets it write; an SSH port forward to 127.0.0.1 is safer)\n")
    token = secrets.token_urlsafe(24)
    command = shlex.join([sys.executable, "-m", "tui.cli", *console_argv])
    server = make_server(command, args.host, args.port, args.public_url, token)
    shown = args.public_url or f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}"
    sys.stderr.write(f"evaldesk: serving the console at {shown.rstrip('/')}/?token={token} (ctrl+c stops)\n")
    sys.stderr.flush()
    server.serve()
    return 0
