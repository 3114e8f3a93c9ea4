"""The console on a bucket, as a person uses it: the job listed, its audit, dedupe confirmed
from the audit screen, the job then audited clean — on fake-gcs-server and moto."""

from __future__ import annotations

from pathlib import Path

from services.core.config import Config
from services.core.registry import open_source
from tests.services.objectstore.conftest import Emulator
from tests.services.remediations.test_dedupe import duplicated_job
from tests.support.ui_demo import FIXED_NOW, settle, use_utc
from tui.app import EvaldeskApp
from tui.screens.audit import AuditScreen
from tui.screens.confirm import ConfirmScreen
from widgets.checklist import Checklist

PREFIX = "eval_jobs"
JOB = "dev_set_v2_org-M_2026-03-02__09-00-00"


async def test_dedupe_from_the_audit_screen_of_a_bucket(store: Emulator, tmp_path: Path) -> None:
    use_utc()
    d = duplicated_job(tmp_path / "local").write()
    store.upload(d.parent, PREFIX)
    config = Config(journal_path=str(tmp_path / "journal.jsonl"), scan_cache=False)
    src = open_source(store.url(PREFIX), config)
    app = EvaldeskApp([src], config, now=FIXED_NOW, poll=False, cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        keys = [e.key for e in app.screen.shown]  # type: ignore[attr-defined]
        assert len(keys) == 1 and JOB in keys[0]
        await pilot.press("a")
        await settle(pilot, 2)
        assert isinstance(app.screen, AuditScreen)
        checklist = app.screen.query_one(Checklist)
        items = {i.id: i for i in checklist.items}
        assert items["duplicates"].status == "fail" and items["duplicates"].runnable == "dedupe"
        checklist.highlighted = [i.id for i in checklist.items].index("duplicates")
        await pilot.press("x")
        await settle(pilot, 3)
        assert isinstance(app.screen, ConfirmScreen), [e.message for e in app.event_log]
        text = "\n".join(app.screen.lines)
        assert "keep 8 of 12 attempts" in text and "restored/" in text
        await pilot.press("y")
        await settle(pilot, 8)
        assert any(e.message.startswith("dedupe") for e in app.event_log), [e.message for e in app.event_log]
    quarantined = [k for k in store.objects(PREFIX) if "/.evaldesk-quarantine/" in k]
    assert len([k for k in quarantined if k.endswith("/result.json")]) == 6
