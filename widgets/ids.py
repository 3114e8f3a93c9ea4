"""Ids that fit a column and still tell rows apart.

Run dirs and trial names share long prefixes and suffixes (`terminal_bench_2_…_2026-11-19__…`,
`scikit-learn__scikit-learn-…__xiruUEG`); cut at the right edge, every row reads the same.
`distinguishing` drops what all the given ids share at the front and at the back (whole
tokens only, so `-14B` is never cut to `4B`), keeps the middle that differs, and shortens that
only as far as the column needs — from the end first, then from the front if rows would
collide. The full id always stays available to the caller (detail lines show it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_TOKEN = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]+")
ELLIPSIS = "…"


def _tokens(s: str) -> list[str]:
    return _TOKEN.findall(s)


def _common_prefix_tokens(token_lists: Sequence[list[str]]) -> int:
    n = 0
    for group in zip(*token_lists, strict=False):
        if len(set(group)) != 1:
            break
        n += 1
    return n


def _strip_separators(s: str) -> str:
    return s.strip("_-./: ")


def shorten(text: str, width: int) -> str:
    """`text` cut at the end to `width` cells, with an ellipsis when cut."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + ELLIPSIS


def distinguishing(ids: Sequence[str], width: int, min_affix: int = 3) -> list[str]:
    """Each id shortened to at most `width` cells, keeping the part that tells it apart.

    With one id (nothing to compare with) it is only cut at the end.
    """
    if not ids:
        return []
    if len(set(ids)) <= 1:
        return [shorten(i, width) for i in ids]
    toks = [_tokens(i) for i in ids]
    pre = _common_prefix_tokens(toks)
    # never eat a whole id: leave at least one token of the shortest
    pre = min(pre, min(len(t) for t in toks) - 1)
    if len("".join(toks[0][:pre])) < min_affix:
        pre = 0
    rest = [t[pre:] for t in toks]
    suf = _common_prefix_tokens([list(reversed(t)) for t in rest])
    suf = min(suf, min(len(t) for t in rest) - 1)
    if suf and len("".join(rest[0][len(rest[0]) - suf:])) < min_affix:
        suf = 0
    middles = [_strip_separators("".join(t[: len(t) - suf] if suf else t)) for t in rest]
    middles = [m or i for m, i in zip(middles, ids, strict=True)]
    out = [shorten(m, width) for m in middles]
    if len(set(out)) < len(set(ids)):
        # cutting at the end made rows collide: show their ends instead
        out = [m if len(m) <= width else ELLIPSIS + m[-(width - 1):] for m in middles]
    return out
