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


# ---- runs: <benchmark>_<model>_<timestamp> ------------------------------------------------------

_STAMP = re.compile(r"[_-]?(\d{4})-(\d{2})-(\d{2})(?:__(\d{2})-(\d{2})-(\d{2}))?$")


def abbreviate(name: str) -> str:
    """`terminal_bench_2` → `tb2`, `swebench-verified-random-100` → `svr100`: each word's first
    letter, numbers whole — short, and still the benchmark to anyone who runs it."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", name) if w]
    if len(words) < 2:
        return name
    return "".join(w[0] + w[1:].lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for w in words)


def _run_parts(run_id: str, benchmark: str | None, model: str | None) -> tuple[str, str, str, str] | None:
    """(benchmark, model part, date, time) of a Harbor-style run id, or None for any other id."""
    stamp = _STAMP.search(run_id)
    if not benchmark or not run_id.startswith(benchmark) or stamp is None:
        return None
    middle = _strip_separators(run_id[len(benchmark):stamp.start()])
    # the model's org is often repeated in the dir (`laion-Qwen3-…` for hosted_vllm/laion/Qwen3-…)
    for org in (model or "").split("/")[:-1]:
        if org and middle.startswith(org + "-") and len(middle) > len(org) + 1:
            middle = middle[len(org) + 1:]
    _y, mo, d, h, mi, _s = stamp.groups()
    return benchmark, middle, f"{mo}-{d}", f"{h}:{mi}" if h else ""


def run_labels(runs: Sequence[tuple[str, str | None, str | None]], width: int) -> list[str]:
    """A label of at most `width` cells for each run (id, benchmark prefix, model) that keeps
    what tells runs apart: the benchmark, the model and the date (the time too where two runs
    share a date). The one rule for the console's list and the batch tables; an id of another
    shape (AISBench tasks, Rock experiments) keeps the part that differs (`distinguishing`)."""
    parts = [_run_parts(i, b, m) for i, b, m in runs]
    ids = [i for i, _, _ in runs]
    if all(len(i) <= width for i in ids):
        return list(ids)
    out = [""] * len(ids)
    other = [n for n, p in enumerate(parts) if p is None]
    for n, label in zip(other, distinguishing([ids[n] for n in other], width), strict=True):
        out[n] = label
    shaped = [(n, p) for n, p in enumerate(parts) if p is not None]
    days: dict[tuple[str, str, str], int] = {}
    for _, (b, m, day, _t) in shaped:
        days[(b, m, day)] = days.get((b, m, day), 0) + 1
    for n, (bench, middle, day, hm) in shaped:
        when = f"{day} {hm}" if hm and days[(bench, middle, day)] > 1 else day
        for b in (bench, abbreviate(bench)):
            label = f"{b} {middle} {when}"
            if len(label) <= width:
                break
        else:
            b = abbreviate(bench)
            room = width - len(b) - len(when) - 2
            if room >= 4:
                label = f"{b} {shorten(middle, room)} {when}"
            elif width - len(when) - 1 >= 4:
                label = f"{shorten(middle, width - len(when) - 1)} {when}"
            else:
                label = shorten(f"{middle} {when}", width)
        out[n] = label
    groups: dict[str, list[int]] = {}
    for n, label in enumerate(out):
        groups.setdefault(label, []).append(n)
    for members in groups.values():
        if len(members) > 1 and len({ids[n] for n in members}) > 1:
            # the rule made these rows read alike: show the parts of their ids that differ
            for n, label in zip(members, distinguishing([ids[n] for n in members], width), strict=True):
                out[n] = label
    return out


def trial_label(name: str, width: int) -> str:
    """A trial's name at most `width` cells with its task always in it: `<task>__<suffix>` loses
    the repeated owner of a SWE-bench task (`scikit-learn__scikit-learn-26104` →
    `scikit-learn-26104`), then the suffix's tail, the suffix, then the task's front — never the
    task's end."""
    if len(name) <= width:
        return name
    task, sep, suffix = name.rpartition("__")
    if not sep:
        return ELLIPSIS + name[-(width - 1):] if width > 1 else shorten(name, width)
    owner, sep2, repo = task.partition("__")
    if sep2 and repo.startswith(owner):
        task = repo
    for label in (f"{task}__{suffix}", f"{task}__{suffix[:4]}", task):
        if len(label) <= width:
            return label
    room = width - len(suffix[:4]) - 2
    if room >= 4:
        return f"{ELLIPSIS}{task[-(room - 1):]}__{suffix[:4]}"
    return ELLIPSIS + task[-(width - 1):] if width > 1 else shorten(task, width)
