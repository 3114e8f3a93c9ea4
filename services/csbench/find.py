"""Finding csbench results dirs on local disk: a few `stat`s and none of csbench's models, so
a folder of a thousand Harbor job dirs is cheap to look through (the backend registry asks every
backend of every local folder)."""

from __future__ import annotations

import os

KIND = "csbench"  # the Experiment.source of what it finds
MAX_JSON_BYTES = 32 * 1024 * 1024
# csbench's domain dirs of a results dir: each DomainPack's `domain` (tests/services/csbench/test_contract.py)
DOMAINS = ("agent-runtime", "data-warehouse", "key-value", "llm", "transactional-db")


def is_record_name(name: str) -> bool:
    return name.endswith(".json") and ("--run-" in name or "-run-" in name)


def is_results_dir(path: str) -> bool:
    """A `run-plan --results` or `fetch --dest` dir: it holds `campaigns/`, `.progress/`, a
    domain dir, or a top-level record file."""
    if not os.path.isdir(path):
        return False
    if os.path.isdir(os.path.join(path, "campaigns")) or os.path.isdir(os.path.join(path, ".progress")):
        return True
    if any(os.path.isdir(os.path.join(path, d)) for d in DOMAINS):
        return True
    try:
        with os.scandir(path) as it:
            names = [e.path for e in it if is_record_name(e.name) and e.is_file(follow_symlinks=False)]
    except OSError:
        return False
    if not names:
        return False
    from services.core.input_files import InputFileError, read_bytes
    from services.csbench.formats import parse_record

    for name in names:
        try:
            if parse_record(read_bytes(name, max_bytes=MAX_JSON_BYTES))[0] is not None:
                return True
        except (OSError, InputFileError):
            return False
    return False


def find_results_dirs(root: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """`root` when it is a results dir, else its results-dir children (depth 1), sorted."""
    root = os.path.abspath(root)
    if root in skip:
        return []
    if is_results_dir(root):
        return [root]
    found: list[str] = []
    try:
        with os.scandir(root) as it:
            entries = sorted(it, key=lambda e: e.name)
    except (NotADirectoryError, FileNotFoundError):
        return []
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        if entry.path in skip:
            continue
        if is_results_dir(entry.path):
            found.append(entry.path)
    return found
