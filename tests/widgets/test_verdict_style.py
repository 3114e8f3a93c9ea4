"""A verdict's colour follows what it asks of a person, one rule for every verdict."""

from __future__ import annotations

from typing import get_args

from services.audit.verdict import FIX_VERDICT, VERDICT_KIND, verdict_kind
from services.core.models import Verdict
from widgets.verdict_style import KIND_STYLES, verdict_style


def test_every_verdict_has_a_kind_and_a_colour_of_its_own_kind() -> None:
    assert set(VERDICT_KIND) == set(get_args(Verdict))
    for v in get_args(Verdict):
        assert verdict_style(v) == KIND_STYLES[VERDICT_KIND[v]]
        assert verdict_style(v, bold=True).startswith("bold ")
    assert len(set(KIND_STYLES.values())) == len(KIND_STYLES)  # no two kinds look alike


def test_a_verdict_that_names_a_fix_asks_to_act_unless_a_person_must_look() -> None:
    assert VERDICT_KIND["input"] == "input" and VERDICT_KIND["finalize"] == "done"
    assert {VERDICT_KIND[v] for v in FIX_VERDICT.values()} == {"act", "look"}
    assert [v for v in FIX_VERDICT.values() if VERDICT_KIND[v] == "look"] == ["repair"]


def test_a_word_this_evaldesk_does_not_know_asks_for_a_look() -> None:
    assert verdict_kind("from-a-newer-evaldesk") == "look"
    assert verdict_style("from-a-newer-evaldesk") == KIND_STYLES["look"]
