"""Every join under a job dir refuses a path that could leave it."""

from __future__ import annotations

import pytest

from services.core.paths import UnsafePath, inside, safe_rel


def test_inside_joins_and_refuses_escapes() -> None:
    assert inside("/jobs/j", "t__abc", "trial.log") == "/jobs/j/t__abc/trial.log"
    assert inside("/jobs/j", "restored/t__abc", "agent/x.txt") == "/jobs/j/restored/t__abc/agent/x.txt"
    for trial, rel in [("../x", "trial.log"), ("/etc", "passwd"), ("t", "../../x"), ("t/../..", "a"),
                       ("t", "a\\..\\..\\b"), ("t\x00", "a")]:
        with pytest.raises(UnsafePath, match="leaves the job dir"):
            inside("/jobs/j", trial, rel)


def test_safe_rel_refuses_empty_and_dot() -> None:
    for rel in ("", ".", "a/.."):
        with pytest.raises(UnsafePath):
            safe_rel(rel)
    assert safe_rel("a/./b") == "a/b"
