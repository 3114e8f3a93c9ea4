"""`evaldesk serve` in a real browser: headless Chromium opens the page, the console's screen
arrives over the websocket, and a screenshot of the experiments table is taken. A websocket
client without this start's token, or from a foreign Origin, gets nothing of the console;
bound beyond loopback it is read-only and its page points at the address the browser used."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.browser import Browser, chromium_or_skip
from tests.support.ui_demo import shared_demo

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def served_url(server: subprocess.Popen[bytes]) -> str:
    """The URL `evaldesk serve` printed (with its token)."""
    assert server.stderr is not None
    lines = []
    while True:
        line = server.stderr.readline().decode()
        lines.append(line)
        if not line:
            raise AssertionError("no URL printed: " + "".join(lines))
        if "serving the console at " in line:
            return line.split("serving the console at ", 1)[1].split(" ", 1)[0]


def start_serve(jobs: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TZ": "UTC"}
    return subprocess.Popen([sys.executable, "-m", "tui.cli", "serve", "--port", str(port), *extra, str(jobs)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(15)
    except subprocess.TimeoutExpired:
        server.kill()


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"evaldesk serve did not listen on {port}")


async def test_serve_shows_the_experiments_table_in_chromium(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    chromium_or_skip()
    jobs = shared_demo(tmp_path_factory)
    port = free_port()
    server = start_serve(jobs, port, "--read-only")
    browser = Browser(tmp_path)
    try:
        url = served_url(server)
        assert url.startswith(f"http://127.0.0.1:{port}/?token=")
        wait_port(port)
        await browser.start()
        await browser.goto(url)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = browser.received_text()
            if "Experiments" in text and "gpt-5-mini" in text and "SERA-14B" in text:
                break
            await asyncio.sleep(0.5)
        text = browser.received_text()
        assert "Experiments" in text and "gpt-5-mini" in text, text[-2000:]
        await asyncio.sleep(1.0)  # let the terminal paint what arrived
        shot = await browser.screenshot(tmp_path / "serve.png")
        assert shot.startswith(b"\x89PNG") and len(shot) > 10_000
        # the page hosts a terminal element the console draws into
        assert await browser.evaluate("document.querySelectorAll('.textual-terminal').length") == 1
    finally:
        await browser.close()
        stop(server)


async def _ws(url: str, origin: str | None, keys: str = "", want: bytes = b"") -> tuple[int, bytes]:
    """(HTTP status of the handshake — 101 when it opened —, what the console sent in 5 s);
    with `keys`, they are typed once the table is there, and it reads until `want` came."""
    import aiohttp

    headers = {"Origin": origin} if origin else {}
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, headers=headers) as ws:
                await ws.send_json(["resize", {"width": 80, "height": 24}])
                got, typed = b"", 0.0
                deadline = time.monotonic() + (60 if want else 5)
                while time.monotonic() < deadline and (want not in got if want else len(got) < 2000):
                    if keys and b"6 experiments" in got and time.monotonic() >= typed + 3:
                        await ws.send_json(["stdin", keys])  # again every 3 s: a key sent while it starts is lost
                        typed, got = time.monotonic(), b""
                    try:
                        msg = await ws.receive(timeout=1)
                    except TimeoutError:
                        continue
                    if msg.type == aiohttp.WSMsgType.BINARY:
                        got += msg.data
                    elif msg.type == aiohttp.WSMsgType.TEXT:
                        got += msg.data.encode()
                    elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                        break
                return 101, got
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status, b""


async def test_without_the_token_or_from_a_foreign_origin_nothing_of_the_console_is_sent(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    import aiohttp

    jobs = shared_demo(tmp_path_factory)
    port = free_port()
    server = start_serve(jobs, port)
    try:
        url = served_url(server)
        token = url.split("token=", 1)[1]
        wait_port(port)
        own = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{own}/") as r:
                assert r.status == 403
            async with session.get(f"{own}/?token=wrong") as r:
                assert r.status == 403
        assert await _ws(f"ws://127.0.0.1:{port}/ws", own) == (403, b"")
        assert await _ws(f"ws://127.0.0.1:{port}/ws?token={token}", "http://evil.example.com") == (403, b"")
        status, got = await _ws(f"ws://127.0.0.1:{port}/ws?token={token}", own)
        assert status == 101 and len(got) > 100
        # `!` in a browser tab: no terminal to hand over, said on the console, which runs on
        status, got = await _ws(f"ws://127.0.0.1:{port}/ws?token={token}", own, keys="!", want=b"from a browser")
        assert status == 101 and b"from a browser" in got, got[-3000:]
    finally:
        stop(server)


async def test_beyond_loopback_it_is_read_only_and_its_page_follows_the_browsers_address(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    import aiohttp

    jobs = shared_demo(tmp_path_factory)
    port = free_port()
    server = start_serve(jobs, port, "--host", "0.0.0.0")
    try:
        assert server.stderr is not None
        first = server.stderr.readline().decode()
        assert "warning: serving on 0.0.0.0, beyond this machine: the console is read-only" in first
        url = served_url(server)
        wait_port(port)
        async with aiohttp.ClientSession() as session, session.get(url) as r:
            assert r.status == 200
            page = await r.text()
            assert "evaldesk_token" in r.headers.get("Set-Cookie", "")
        token = url.split("token=", 1)[1]
        assert f'"ws://127.0.0.1:{port}/ws"' in page and "0.0.0.0" not in page
        status, got = await _ws(f"ws://127.0.0.1:{port}/ws?token={token}", f"http://127.0.0.1:{port}")
        assert status == 101 and b"READ-ONLY" in got.replace(b"\x1b", b"")
    finally:
        stop(server)


def test_serve_help_lists_read_only_and_source_and_passes_them_on() -> None:
    p = subprocess.run([sys.executable, "-m", "tui.cli", "serve", "--help"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert p.returncode == 0
    assert "--read-only" in p.stdout and "SOURCE" in p.stdout
    from tui.serve import build_parser

    args, rest = build_parser().parse_known_intermixed_args(["--port", "9", "/a", "--no-cache", "--read-only"])
    assert (args.port, args.read_only, args.sources, rest) == (9, True, ["/a"], ["--no-cache"])
