"""Headless Chromium driven over the DevTools protocol, for tests that need a real browser.

Debian's `chromium` (`.ci/run` installs it). No network: the flags keep Chromium from
reaching for Google's services, and everything it loads is on loopback. With CI=true a
missing browser fails the test instead of skipping it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
]


def chromium_or_skip() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (apt-get install chromium); CI must run the browser tests")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


class Browser:
    """One headless Chromium with one page; `frames` holds every websocket frame the page got."""

    def __init__(self, tmp: Path, size: tuple[int, int] = (1280, 800)) -> None:
        self.tmp = tmp
        self.size = size
        self.proc: subprocess.Popen[bytes] | None = None
        self.session: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self._id = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.frames: list[bytes] = []
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        exe = chromium_or_skip()
        profile = self.tmp / "chromium-profile"
        profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [exe, *CHROMIUM_FLAGS, f"--window-size={self.size[0]},{self.size[1]}", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not start its DevTools endpoint")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().splitlines()[0])
        self.session = aiohttp.ClientSession()
        async with self.session.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json()
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = await self.session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        await self.send("Network.enable")
        await self.send("Page.enable")

    async def _read(self) -> None:
        assert self.ws is not None
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            elif data.get("method") == "Network.webSocketFrameReceived":
                resp = data["params"]["response"]
                payload = resp.get("payloadData", "")
                self.frames.append(base64.b64decode(payload) if resp.get("opcode") == 2 else payload.encode())

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        assert self.ws is not None
        self._id += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._id] = fut
        await self.ws.send_json({"id": self._id, "method": method, "params": params})
        reply = await asyncio.wait_for(fut, 30)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def screenshot(self, path: Path) -> bytes:
        shot = await self.send("Page.captureScreenshot", format="png")
        data = base64.b64decode(shot["data"])
        path.write_bytes(data)
        return data

    async def evaluate(self, expression: str) -> Any:
        res = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return res.get("result", {}).get("value")

    def received_text(self) -> str:
        return b"".join(self.frames).decode("utf-8", "replace")

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self.ws is not None:
            await self.ws.close()
        if self.session is not None:
            await self.session.close()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
