"""A small OpenAI-compatible model server on loopback, speaking the real wire format.

`GET /v1/models`, `POST /v1/chat/completions` (streaming as server-sent events and not) and
`POST /v1/completions`. Every answer is the same canned text, so a benchmark's accuracy follows
from its gold answers (a gsm8k line whose gold is the canned number counts as right). It can
require a bearer key, and records what it was asked so tests can check who called it (never
printing the key). Runs in a thread; also runs standalone for the fixture script:

    python tests/support/openai_server.py --port 8765 [--answer 18] [--api-key KEY]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "fake-model"


class FakeOpenAI:
    def __init__(self, answer: str = "18", api_key: str | None = None, model: str = MODEL,
                 host: str = "127.0.0.1", port: int = 0, models_need_key: bool = True,
                 max_model_len: int = 32768) -> None:
        self.answer = answer
        self.api_key = api_key
        # vLLM's --api-key guards every /v1 route; some servers leave the model list open
        self.models_need_key = models_need_key
        self.max_model_len = max_model_len
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.authorized_calls = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _authorized(self) -> bool:
                if server.api_key is None:
                    return True
                if self.headers.get("Authorization", "") == f"Bearer {server.api_key}":
                    server.authorized_calls += 1
                    return True
                self._json(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
                return False

            def _json(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if (server.models_need_key or not self.path.startswith("/v1/models")) and not self._authorized():
                    return
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    self._json(200, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "created": 0, "owned_by": "evaldesk-tests",
                         "max_model_len": server.max_model_len}]})
                elif self.path in ("/health", "/v1/health"):
                    self._json(200, {"status": "ok"})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                if not self._authorized():
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._json(400, {"error": {"message": "body is not JSON"}})
                    return
                server.requests.append({"path": self.path, "body": body})
                chat = self.path.endswith("/chat/completions")
                if not chat and not self.path.endswith("/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                text = f"Let me think step by step. The result is {server.answer}.\nanswer:{server.answer}"
                if body.get("stream"):
                    self._stream(text, chat, body)
                else:
                    self._whole(text, chat)

            def _usage(self, text: str) -> dict[str, int]:
                out = max(1, len(text.split()))
                return {"prompt_tokens": 32, "completion_tokens": out, "total_tokens": 32 + out}

            def _whole(self, text: str, chat: bool) -> None:
                choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
                if chat:
                    choice["message"] = {"role": "assistant", "content": text}
                else:
                    choice["text"] = text
                self._json(200, {"id": f"cmpl-{uuid.uuid4().hex[:12]}",
                                 "object": "chat.completion" if chat else "text_completion",
                                 "created": int(time.time()), "model": server.model, "choices": [choice],
                                 "usage": self._usage(text)})

            def _stream(self, text: str, chat: bool, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
                words = text.split(" ")
                for i, word in enumerate(words):
                    piece = word if i == 0 else " " + word
                    choice: dict[str, Any] = {"index": 0, "finish_reason": None}
                    if chat:
                        choice["delta"] = {"content": piece} if i else {"role": "assistant", "content": piece}
                    else:
                        choice["text"] = piece
                    self._event({"id": cid, "object": "chat.completion.chunk" if chat else "text_completion",
                                 "created": int(time.time()), "model": server.model, "choices": [choice]})
                    time.sleep(0.002)
                last: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
                last["delta" if chat else "text"] = {} if chat else ""
                self._event({"id": cid, "object": "chat.completion.chunk" if chat else "text_completion",
                             "created": int(time.time()), "model": server.model, "choices": [last],
                             "usage": self._usage(text)})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _event(self, data: dict[str, Any]) -> None:
                self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--answer", default="18")
    p.add_argument("--api-key", default=None)
    args = p.parse_args()
    srv = FakeOpenAI(answer=args.answer, api_key=args.api_key, port=args.port)
    print(f"serving {srv.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        srv.httpd.serve_forever()


if __name__ == "__main__":
    main()
