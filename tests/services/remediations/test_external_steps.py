"""An ExternalStep through the write path, the way a leaderboard row write will go: its handler
reports the row before and after, the journal carries both (swapped by undo), undo refuses
over a row changed since, and a record kept on this machine is found when unfinished."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import pytest

from services.core.journal import Journal
from services.remediations.base import WritePath
from services.remediations.errors import WriteRefused
from services.remediations.records import Plan, RecordIndex, new_record_id
from services.remediations.recovery import from_index
from services.remediations.steps import ExternalStep, StepContext, register_handler


class JsonRowHandler:
    """Sets one key of a JSON file (a stand-in for one leaderboard row), as real file writes."""

    @staticmethod
    def _read(step: ExternalStep) -> dict[str, Any]:
        return json.loads(Path(step.args["file"]).read_text())

    async def state(self, step: ExternalStep, ctx: StepContext) -> Literal["done", "not_done", "conflict"]:
        now = self._read(step).get(step.args["key"])
        if now == step.args["value"]:
            return "done"
        return "not_done" if now == step.args["expect"] else "conflict"

    async def do(self, step: ExternalStep, ctx: StepContext) -> dict[str, Any]:
        data = self._read(step)
        before = dict(data)
        data[step.args["key"]] = step.args["value"]
        Path(step.args["file"]).write_text(json.dumps(data))
        return {"before": before, "after": data}

    async def undo_check(self, step: ExternalStep, ctx: StepContext) -> str | None:
        now = self._read(step).get(step.args["key"])
        return None if now == step.args["value"] else f"{step.label}: the row changed since (now {now!r})"

    async def undo(self, step: ExternalStep, ctx: StepContext) -> None:
        data = self._read(step)
        data[step.args["key"]] = step.args["expect"]
        Path(step.args["file"]).write_text(json.dumps(data))


register_handler("test-json-row", JsonRowHandler())


def row_plan(row: Path) -> Plan:
    step = ExternalStep(handler="test-json-row", label="set score", inverse=True,
                        args={"file": str(row), "key": "score", "expect": 0.25, "value": 0.5})
    return Plan(id=new_record_id("register"), action="register", title="Register M on B", target="leaderboard M×B",
                input_hash="h", steps=[step], preview=["set score 0.25 → 0.5"])


async def test_a_row_write_is_journaled_with_the_row_before_and_after(tmp_path: Path) -> None:
    row = tmp_path / "row.json"
    row.write_text(json.dumps({"id": 7, "score": 0.25}))
    journal = Journal(tmp_path / "journal.jsonl")
    wp = WritePath(journal)
    record = await wp.apply(row_plan(row), StepContext())
    assert record.status == "applied" and json.loads(row.read_text())["score"] == 0.5
    begin, done = journal.entries()
    assert begin.action == "register:begin" and done.action == "register:apply"
    # the step's own account, by step index: the row before and after
    assert done.before is None
    assert done.after["0"]["before"] == {"id": 7, "score": 0.25}
    assert done.after["0"]["after"] == {"id": 7, "score": 0.5}
    # the record lives on this machine, with the step's result
    entry = RecordIndex().get(record.id)
    assert entry is not None and not entry["location"]["on_target"]
    loaded = await wp.load(record.id, StepContext())
    assert loaded.results[0]["after"]["score"] == 0.5

    # a row changed since is never overwritten by undo
    row.write_text(json.dumps({"id": 7, "score": 0.75}))
    with pytest.raises(WriteRefused, match="the row changed since"):
        await wp.undo(loaded, StepContext())
    row.write_text(json.dumps({"id": 7, "score": 0.5}))
    undone = await wp.undo(loaded, StepContext())
    assert undone.status == "undone" and json.loads(row.read_text())["score"] == 0.25
    last = journal.entries()[-1]
    # an undo entry carries the same account of each step (the reader turns it round)
    assert last.action == "register:undo" and last.after == done.after


async def test_an_unfinished_local_record_is_found_at_start(tmp_path: Path) -> None:
    row = tmp_path / "row.json"
    row.write_text(json.dumps({"id": 7, "score": 0.25}))
    wp = WritePath(Journal(tmp_path / "journal.jsonl"))
    plan = row_plan(row)
    record = await wp.apply(plan, StepContext())
    # as if its process had died before the last mark: the index and the record say "applying"
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    where = Path(RecordIndex().get(record.id)["location"]["record_dir"])  # type: ignore[index]
    raw = json.loads((where / "record.json").read_text())
    raw["pid"] = dead.pid
    (where / "record.json").write_text(json.dumps(raw))
    log = where / "steps.log"
    log.write_text("\n".join(ln for ln in log.read_text().splitlines() if '"status"' not in ln) + "\n")
    entry = json.loads((RecordIndex().root / f"{record.id}.json").read_text())
    entry["status"] = "applying"
    (RecordIndex().root / f"{record.id}.json").write_text(json.dumps(entry))
    [pending] = await from_index(RecordIndex())  # a live writer's record would not be listed
    assert pending.id == record.id and pending.progress() == "1 of 1 step done"
    finished = await wp.finish(await wp.load(record.id, StepContext()), StepContext())
    assert finished.status == "applied"
    assert await from_index(RecordIndex()) == []
