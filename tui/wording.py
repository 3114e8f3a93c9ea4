"""Words the console and the batch commands say alike."""

from __future__ import annotations

# the Harbor walk's words for an empty folder; every kind of source evaldesk reads is named
_NO_JOBS = "no Harbor job dirs found"
NOTHING_FOUND = ("nothing to read here: no Harbor job dir, AISBench task root (outputs/), "
                 "Rock workdir or csbench campaign")


def source_problem(message: str) -> str:
    """A source's error as shown: an empty folder names every kind of source, not one."""
    return NOTHING_FOUND if message == _NO_JOBS else message
