"""term_safe: nothing it returns can act on a terminal, and what was there stays visible;
dumps: JSON that keeps every value exactly and holds no raw control either."""

from __future__ import annotations

import json
import os
import random

import pytest

from services.core.text import dumps, is_term_safe, json_safe, strip_sequences, term_safe


@pytest.mark.parametrize(("raw", "shown"), [
    ("plain name-1.2_x", "plain name-1.2_x"),
    ("é 日本 ✓", "é 日本 ✓"),
    ("a\x1b]0;title", "a\\x1b]0;title"),  # an OSC left open: shown, and nothing after it is swallowed
    ("a\x1b[2Jb", "a\\x1b[2Jb"),
    ("line1\nline2", "line1⏎line2"),
    ("cr\rtab\tbell\x07nul\x00del\x7f", "cr\\rtab\\tbell\\x07nul\\x00del\\x7f"),
    ("c1 csi\x9b31m osc\x9d0;t nel\x85", "c1 csi\\x9b31m osc\\x9d0;t nel\\x85"),
    (os.fsdecode(b"bytes\xff\xfe"), "bytes\\xff\\xfe"),
    ("lone\ud800", "lone\\ud800"),
    ("bidi\u202eexe.txt", "bidi\\u202eexe.txt"),
    ("sep\u2028x", "sep\\u2028x"),
    ("$(rm -rf ~)`id`", "$(rm -rf ~)`id`"),  # not a terminal control: shown as it is
])
def test_controls_become_visible_escapes(raw: str, shown: str) -> None:
    assert term_safe(raw) == shown
    assert is_term_safe(term_safe(raw))
    assert term_safe(term_safe(raw)) == term_safe(raw)  # safe text passes through untouched


def test_every_code_point_that_could_act_on_a_terminal_is_escaped() -> None:
    unsafe = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *range(0xD800, 0xE000)]
    for cp in unsafe:
        out = term_safe(chr(cp))
        assert (out != chr(cp) and out.isascii()) or out == "⏎", hex(cp)
        assert is_term_safe(out)
    # printable text is left exactly as it is
    rng = random.Random(7)
    for _ in range(2000):
        cp = rng.randrange(0xA0, 0x2FFFF)
        ch = chr(cp)
        if 0xD800 <= cp < 0xE000 or cp in (0x2028, 0x2029, 0x061C, 0x200E, 0x200F) or 0x202A <= cp <= 0x202E \
                or 0x2066 <= cp <= 0x2069:
            continue
        assert term_safe(ch) == ch, hex(cp)


def test_options_keep_newlines_and_drop_whole_sequences() -> None:
    assert term_safe("a\nb\x1b[31m", keep_newlines=True) == "a\nb\\x1b[31m"
    assert term_safe(None) == "" and term_safe(3) == "3"
    # a log's colours and hyperlinks go; an unfinished sequence stays visible
    assert term_safe("\x1b[31mred\x1b[0m", drop_sequences=True) == "red"
    assert term_safe("\x1b]8;;http://x\x07link\x1b]8;;\x1b\\", drop_sequences=True) == "link"
    assert term_safe("\x1b]0;open title\nnext", keep_newlines=True, drop_sequences=True) == "\\x1b]0;open title\nnext"
    assert strip_sequences("no escapes") == "no escapes"


HOSTILE = ["\x1b]0;t", "a\nb", "\x9b6n", os.fsdecode(b"\xff\xfe"), "\u202e", "é日本", "\x00\x7f", "q\"\\"]


def test_dumps_keeps_values_exactly_and_the_text_clean() -> None:
    doc = {"names": HOSTILE, "nested": {k: k for k in HOSTILE}}
    text = dumps(doc)
    assert is_term_safe(text) and "\n" not in text
    text.encode("utf-8")  # valid UTF-8: the undecodable bytes are \udcXX escapes
    assert json.loads(text) == doc
    assert "é日本" in text  # readable, not \u-escaped
    assert os.fsencode(json.loads(text)["names"][3]) == b"\xff\xfe"
    assert json_safe(json.dumps("plain")) == '"plain"'
