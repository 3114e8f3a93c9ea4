"""The one way evaldesk reads a file it is handed: the config, baselines, a backend's own
records. Regular files only (a fifo, a device or a dir is refused without waiting on it), at
most a size cap, within a deadline (a hung mount gives up instead of hanging the console), and
for JSON and TOML at most a nesting depth — so no input hangs evaldesk or takes it down with a
RecursionError; each refusal is an `InputFileError` naming the file and why.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

MAX_BYTES = 64 * 1024 * 1024
MAX_CONFIG_BYTES = 1024 * 1024
MAX_DEPTH = 200  # deeper than any real record; well inside Python's recursion limit
DEADLINE_S = 30.0


class InputFileError(ValueError):
    """A file evaldesk will not read, or cannot make sense of; the message names it."""


def _read(path: str, max_bytes: int) -> bytes:
    # O_NONBLOCK: opening a fifo must not wait for a writer that never comes
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a fifo" if stat.S_ISFIFO(st.st_mode) else "a dir" if stat.S_ISDIR(st.st_mode) else "special"
        raise InputFileError(f"{path}: not a regular file ({kind}); evaldesk reads only regular files")
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > max_bytes:
            raise InputFileError(f"{path}: {st.st_size:,} bytes, over the {max_bytes:,} byte limit")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputFileError(f"{path}: grew past the {max_bytes:,} byte limit while being read")
    return data


def read_bytes(path: str | Path, *, max_bytes: int = MAX_BYTES, deadline_s: float = DEADLINE_S) -> bytes:
    """The whole of a regular file. Raises FileNotFoundError when it is absent, InputFileError
    for anything else that stops it."""
    where = str(path)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["data"] = _read(where, max_bytes)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="evaldesk-read", daemon=True)
    worker.start()
    worker.join(deadline_s)
    if worker.is_alive():
        raise InputFileError(f"{where}: gave no answer in {deadline_s:.0f} s (a hung mount?)")
    if "error" in box:
        raise box["error"]
    data: bytes = box["data"]
    return data


def read_text(path: str | Path, **kw: Any) -> str:
    data = read_bytes(path, **kw)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def check_depth(value: Any, where: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse data nested deeper than `max_depth` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise InputFileError(f"{where}: nested deeper than {max_depth} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))


def parse_json(data: bytes | str, where: str, max_depth: int = MAX_DEPTH) -> Any:
    import orjson

    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "recursion" in str(exc).lower():
            raise InputFileError(f"{where}: nested deeper than {max_depth} levels") from None
        raise InputFileError(f"{where}: not valid JSON ({exc})") from None
    check_depth(value, where, max_depth)
    return value


def parse_toml(text: str, where: str, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    import tomllib

    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputFileError(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:
        raise InputFileError(f"{where}: nested deeper than {max_depth} levels") from None
    check_depth(value, where, max_depth)
    return value


def read_json(path: str | Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    return parse_json(read_bytes(path, max_bytes=max_bytes), str(path), max_depth)


def read_toml(path: str | Path, *, max_bytes: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    return parse_toml(read_text(path, max_bytes=max_bytes), str(path))


def loads_json(data: bytes | str, where: str = "the file", max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` (NaN and big integers as the stdlib reads them), bounded in depth: a
    ValueError (InputFileError) instead of a RecursionError."""
    import json

    try:
        value = json.loads(data)
    except RecursionError:
        raise InputFileError(f"{where}: nested deeper than {max_depth} levels") from None
    check_depth(value, where, max_depth)
    return value
