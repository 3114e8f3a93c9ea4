"""Untrusted text made safe for a terminal, and for JSON read on one.

Names and fields come from job dirs anyone can write: a trial dir may be called
`x\\x1b]0;owned` (an OSC that sets the window title and, left open, swallows what follows),
hold a newline, or not be UTF-8 at all (Python keeps such bytes as lone surrogates,
`surrogateescape`). `term_safe` is the one function every table, progress line and widget
passes such text through: nothing it returns can start an escape sequence, move the cursor
or split a row, and what was there stays visible.
"""

from __future__ import annotations

import json
import re
from typing import Any

NEWLINE_MARK = "⏎"

# C0 and C1 controls, DEL, lone surrogates, the line/paragraph separators some terminals and
# `str.splitlines` treat as newlines, and the bidi controls that reorder what is shown
# (a name that reads differently from what it is).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_KEEP_NEWLINES = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED = {"\t": "\\t", "\r": "\\r", "\x1b": "\\x1b"}
# Whole sequences only: a CSI (colours, erase line) and an OSC closed by BEL or ST (a hyperlink,
# a title). An OSC left open is not one of them, so its ESC stays and is shown, not obeyed.
_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)")
# What JSON may carry raw but a terminal must not see: C1 controls, DEL, bidi controls and
# the separators. Inside a JSON document they can only sit in strings, so a `\\uXXXX`
# escape keeps the value exact.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(ch: str, newline: str) -> str:
    if ch == "\n":
        return newline
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        # a byte that was not UTF-8, kept by surrogateescape: show the byte itself
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def strip_sequences(text: str) -> str:
    """Drop whole CSI and OSC sequences (a log's colours); anything else is left as it is."""
    return _SEQUENCE.sub("", text) if "\x1b" in text else text


def term_safe(text: object, *, keep_newlines: bool = False, newline: str = NEWLINE_MARK,
              drop_sequences: bool = False) -> str:
    """`text` as a terminal may show it: every control character (C0, C1, DEL, ESC, so every
    CSI/OSC/DCS start) and lone surrogate becomes a visible escape (`\\x1b`, `\\x9b`, `\\xff`),
    a newline becomes `⏎` (or stays one with `keep_newlines`, for multi-line panels).

    `drop_sequences` first removes whole colour/hyperlink sequences, for file content such as
    logs, where showing every `\\x1b[32m` would bury the text; what is left is escaped as above.
    Anything that is not a str is shown through `str()` first; None shows as "".
    """
    if text is None:
        return ""
    s = text if isinstance(text, str) else str(text)
    if drop_sequences:
        s = strip_sequences(s)
    pattern = _UNSAFE_KEEP_NEWLINES if keep_newlines else _UNSAFE
    if pattern.search(s) is None:
        return s
    return pattern.sub(lambda m: _escape(m.group(), newline), s)


def is_term_safe(text: str) -> bool:
    """True when `text` holds nothing `term_safe` would escape (newlines allowed)."""
    return _UNSAFE_KEEP_NEWLINES.search(text) is None


def json_safe(encoded: str) -> str:
    """A JSON document (as `json.dumps` wrote it) with every character a terminal could act on
    escaped as `\\uXXXX`: same value for any JSON reader, valid UTF-8 even when a name held
    bytes that are not (lone surrogates become `\\udcXX`, which Python reads back exactly)."""
    if _JSON_UNSAFE.search(encoded) is None:
        return encoded
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)


def dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps` for output a person may read on a terminal: non-ASCII text stays readable,
    control characters and undecodable bytes are escaped (see `json_safe`)."""
    kwargs.setdefault("ensure_ascii", False)
    kwargs.setdefault("default", str)
    return json_safe(json.dumps(obj, **kwargs))


class SafeLines:
    """A text stream whose writes reach the terminal through `term_safe` (newlines kept).

    Batch commands write error and progress lines from many modules; wrapping the stream once
    keeps a name read from a job dir from ever reaching the terminal raw, whoever writes it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return int(self._stream.write(term_safe(text, keep_newlines=True)) or 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
