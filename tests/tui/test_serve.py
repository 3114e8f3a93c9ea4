"""`evaldesk serve` in a real browser: headless Chromium opens the page, the console's screen
arrives over the websocket, and a screenshot of the experiments table is taken."""

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
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TZ": "UTC"}
    server = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "serve", "--port", str(port), "--read-only", str(jobs)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    browser = Browser(tmp_path)
    try:
        wait_port(port)
        await browser.start()
        await browser.goto(f"http://127.0.0.1:{port}/")
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
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()


def test_serve_help_lists_read_only_and_source_and_passes_them_on() -> None:
    p = subprocess.run([sys.executable, "-m", "tui.cli", "serve", "--help"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert p.returncode == 0
    assert "--read-only" in p.stdout and "SOURCE" in p.stdout
    from tui.serve import build_parser

    args, rest = build_parser().parse_known_intermixed_args(["--port", "9", "/a", "--no-cache", "--read-only"])
    assert (args.port, args.read_only, args.sources, rest) == (9, True, ["/a"], ["--no-cache"])
