"""The README's quick start is what CI runs: keep the two in step."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme.split("## Quick start", 1)[1], flags=re.S)
    assert len(blocks) >= 2, "the quick start has an install command and a test command"
    test_cmd = blocks[1].strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_cmd in [line.strip() for line in ci.splitlines()], f"{test_cmd!r} must be a line of .ci/run"


def test_quick_start_installs_the_dev_extra_and_opens_the_app() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.findall(r"```sh\n(.*?)```", readme.split("## Quick start", 1)[1], flags=re.S)[0]
    assert "pip install -e '.[dev]'" in first and first.strip().endswith("evaldesk")


def test_the_readme_is_a_manual_and_what_it_shows_exists() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 400, "developer notes belong in docs/"
    for heading in ("## Quick start", "## Screens", "## `:`", "## Marks", "## Sources", "## Batch mode",
                    "## What evaldesk guarantees"):
        assert heading in readme, heading
    for shot in re.findall(r"\]\((screenshots/[^)]+\.png)\)", readme):
        assert (ROOT / shot).is_file(), shot
    for doc in re.findall(r"\]\((docs/[^)]+\.md)\)", readme):
        # every page but the ones the write path, verdicts, AISBench and object stores keep themselves
        if doc not in ("docs/write-path.md", "docs/verdicts.md", "docs/objectstores.md", "docs/aisbench.md"):
            assert (ROOT / doc).is_file(), doc
