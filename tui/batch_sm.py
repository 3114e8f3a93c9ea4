"""`--progress sm`: the runbooks' output protocol for any batch command.

stderr carries `__SM_PROGRESS__=<json>` lines (`{"done", "total", "message"}`) and, unchanged,
evaldesk's own one-line errors; stdout carries exactly one JSON object — the command's JSON
result with `"ok": true|false` added (`{"ok": false, "message": …}` when the command had none) —
and the exit code is 0 exactly when `ok` is true. `monitor` streams and has no final object, so
it refuses this mode.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import IO, Any

from services.core.config import Config

SM_PREFIX = "__SM_PROGRESS__="


class _Tee(io.TextIOBase):
    """stderr as it goes, keeping the lines that are not progress (the errors) for the final JSON."""

    def __init__(self, err: IO[str]) -> None:
        self.err = err
        self.kept: list[str] = []

    def write(self, s: str) -> int:
        self.err.write(s)
        for line in s.splitlines():
            if line and not line.startswith(SM_PREFIX):
                self.kept.append(line)
        return len(s)

    def flush(self) -> None:
        self.err.flush()

    def isatty(self) -> bool:
        return False


def run_sm(args: Any, config: Config, out: IO[str], err: IO[str],
           run: Callable[[Any, Config, IO[str], IO[str]], int]) -> int:
    if args.command == "monitor":
        err.write("evaldesk: monitor streams JSONL; --progress sm has no final object for it\n")
        out.write(json.dumps({"ok": False, "message": "monitor does not support --progress sm"}) + "\n")
        return 2
    args.format = "json"
    buf = io.StringIO()
    tee = _Tee(err)
    code = run(args, config, buf, tee)  # type: ignore[arg-type]
    text = buf.getvalue().strip()
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        message = tee.kept[-1].removeprefix("evaldesk: ") if tee.kept else ""
        data = {"result": data} if data is not None else {"message": message}
    data["ok"] = code == 0
    if code != 0 and not data.get("message") and tee.kept:
        data["message"] = tee.kept[-1].removeprefix("evaldesk: ")
    out.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    out.flush()
    return 0 if code == 0 else code
