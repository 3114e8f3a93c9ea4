"""A Hub-compatible HTTP server on loopback for `huggingface_hub.HfApi(endpoint=…)`.

It speaks the REST paths HfApi uses for datasets (see TESTING.md): repo info (404 with
`X-Error-Code: RepoNotFound` when absent), the file tree, create repo, preupload and the
ndjson commit, and keeps what it is sent in memory so tests can read it back. A token is
required for writes (401 otherwise) and every Authorization header seen is kept, so a test
can check which token travelled. `fail_next` makes the next matching request answer 500.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit


@dataclass
class Repo:
    id: str
    private: bool = False
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)

    @property
    def sha(self) -> str:
        return self.commits[-1] if self.commits else "0" * 40


class HubServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repos: dict[str, Repo] = {}
        self.lock = threading.Lock()
        self.auth_seen: list[str] = []
        self.fail_next: list[str] = []  # substrings of paths whose next request answers 500
        self.requests: list[str] = []

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def add_dataset(self, repo_id: str, files: dict[str, bytes] | None = None) -> Repo:
        with self.lock:
            repo = self.repos.setdefault(repo_id, Repo(repo_id))
            repo.files.update(files or {})
            if files:
                repo.commits.append(hashlib.sha1(repr(sorted(repo.files)).encode()).hexdigest())
            return repo


DATASET = re.compile(r"^/api/datasets/(?P<id>[^/]+/[^/]+)(?P<rest>/.*)?$")


class _Handler(BaseHTTPRequestHandler):
    server: HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _not_found(self, repo_id: str) -> None:
        self._json(404, {"error": f"Repository not found: {repo_id}"},
                   {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _authorized(self) -> bool:
        auth = self.headers.get("Authorization") or ""
        if auth:
            with self.server.lock:
                self.server.auth_seen.append(auth)
        return auth.startswith("Bearer ") and len(auth) > len("Bearer ")

    def _fail(self) -> bool:
        with self.server.lock:
            self.server.requests.append(f"{self.command} {self.path}")
            for i, frag in enumerate(self.server.fail_next):
                if frag in self.path:
                    del self.server.fail_next[i]
                    return True
        return False

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        self._body()
        if self._fail():
            self._json(500, {"error": "injected"})
            return
        url = urlsplit(self.path)
        m = DATASET.match(unquote(url.path))
        if not m:
            self._json(404, {"error": "not found"})
            return
        repo_id, rest = m.group("id"), m.group("rest") or ""
        repo = self.server.repos.get(repo_id)
        if repo is None:
            self._not_found(repo_id)
            return
        if rest in ("", "/revision/main"):
            self._json(200, {
                "id": repo_id, "_id": hashlib.md5(repo_id.encode()).hexdigest(), "sha": repo.sha,
                "private": repo.private, "disabled": False, "gated": False, "downloads": 0, "likes": 0,
                "tags": [], "lastModified": "2026-11-20T18:00:00.000Z", "createdAt": "2026-11-20T18:00:00.000Z",
                "siblings": [{"rfilename": p} for p in sorted(repo.files)], "cardData": {},
            })
            return
        if rest.startswith("/tree/"):
            entries = [{"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data), "path": p}
                       for p, data in sorted(repo.files.items())]
            self._json(200, entries)
            return
        self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        raw = self._body()
        if self._fail():
            self._json(500, {"error": "injected"})
            return
        if not self._authorized():
            self._json(401, {"error": "Invalid credentials in Authorization header"})
            return
        path = unquote(urlsplit(self.path).path)
        if path == "/api/repos/create":
            body = json.loads(raw or b"{}")
            repo_id = f"{body['organization']}/{body['name']}" if body.get("organization") else body["name"]
            with self.server.lock:
                if repo_id in self.server.repos:
                    self._json(409, {"error": "You already created this dataset repo", "url": self._url(repo_id)})
                    return
                self.server.repos[repo_id] = Repo(repo_id, private=bool(body.get("private")))
            self._json(200, {"url": self._url(repo_id), "name": repo_id})
            return
        m = DATASET.match(path)
        if not m:
            self._json(404, {"error": "not found"})
            return
        repo_id, rest = m.group("id"), m.group("rest") or ""
        repo = self.server.repos.get(repo_id)
        if repo is None:
            self._not_found(repo_id)
            return
        if rest.startswith("/preupload/"):
            body = json.loads(raw or b"{}")
            files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                     for f in body.get("files", [])]
            self._json(200, {"files": files, "commitOid": repo.sha})
            return
        if rest.startswith("/commit/"):
            added: dict[str, bytes] = {}
            deleted: list[str] = []
            summary = ""
            for line in raw.decode().splitlines():
                if not line.strip():
                    continue
                op = json.loads(line)
                key, value = op.get("key"), op.get("value", {})
                if key == "header":
                    summary = value.get("summary", "")
                elif key == "file":
                    added[value["path"]] = base64.b64decode(value["content"])
                elif key in ("deletedFile", "deletedFolder"):
                    deleted.append(value["path"])
                else:
                    self._json(400, {"error": f"unsupported commit operation {key!r} in this test server"})
                    return
            with self.server.lock:
                repo.files.update(added)
                for p in deleted:
                    repo.files = {k: v for k, v in repo.files.items() if k != p and not k.startswith(p + "/")}
                oid = hashlib.sha1(f"{repo.sha}{summary}{sorted(added)}".encode()).hexdigest()
                repo.commits.append(oid)
            self._json(200, {"success": True, "commitOid": oid,
                             "commitUrl": f"{self.server.url}/datasets/{repo_id}/commit/{oid}"})
            return
        self._json(404, {"error": "not found"})

    def _url(self, repo_id: str) -> str:
        return f"{self.server.url}/datasets/{repo_id}"


@contextlib.contextmanager
def hub_server() -> Iterator[HubServer]:
    server = HubServer()
    thread = threading.Thread(target=server.serve_forever, name="hub-test-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
