"""A job whose result.json does not parse: its own state and verdict, and a rebuild from the
trials through the write path that undo takes back byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.journal import Journal
from services.core.models import AGGREGATE_UNREADABLE, State
from services.harbor.source import HarborSource
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.records import records_in
from services.transport.fs import LocalFS
from tests.support.harbor_factory import healthy_job, scan_one, tree


async def test_unreadable_aggregate_is_repaired_and_undone(tmp_path: Path) -> None:
    d = healthy_job(tmp_path, n_tasks=4, n_rep=2).write()
    truncated = (d / "result.json").read_bytes()[:57]  # a write cut short
    (d / "result.json").write_bytes(truncated)
    original = tree(d)
    exp = scan_one(d)
    assert exp.state == State.blocked and exp.state_raw == AGGREGATE_UNREADABLE
    report = audit_experiment(exp)
    assert report.verdict == "repair"
    assert report.check("finished").remediation == "rebuild_aggregate"

    src = HarborSource(d)
    exp = (await src.scan()).experiments[0]
    plan = await registry.plan("rebuild_aggregate", exp, src, Config())
    assert "does not parse" in plan.preview[0] and not plan.blocked
    journal = Journal(tmp_path / "journal.jsonl")
    write_path = WritePath(journal)
    record = await registry.apply("rebuild_aggregate", plan, exp.id, src, Config(), write_path)
    assert record.status == "applied"
    rebuilt = json.loads((d / "result.json").read_text())
    assert rebuilt["finished_at"] is not None and rebuilt["stats"]["n_completed_trials"] == 8
    after = audit_experiment(scan_one(d))
    assert after.verdict != "repair" and after.check("finished").status == "pass"

    # a second plan has nothing to do: the file reads now
    again = await registry.plan("rebuild_aggregate", scan_one(d), src, Config())
    assert again.blocked and again.nothing_to_do

    [rec] = [r for r in await records_in(LocalFS(), str(d)) if r.status == "applied"]
    await write_path.undo(rec, registry.context("rebuild_aggregate", src, Config()))
    assert tree(d) == original and (d / "result.json").read_bytes() == truncated
