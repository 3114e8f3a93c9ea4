"""The console on a csbench campaign beside the Harbor demo jobs, used with the keyboard: the
campaign in the experiment list, its checklist on the audit screen, the teardown dialog with
the exact command (cancel, then apply through the stand-in csbench), the trials view with the
record's measurements in the diagnose panel and its files in the log panel; SVG snapshots of
each at 80x24 and 120x40.

The teardown dialog shows absolute paths, so the snapshots use a fixed dir
(`/tmp/evaldesk-csbench-ui`) for the csbench config, checkout and stand-in; each test holds it
alone (a lock beside it), whichever worker or run it is on.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from textual.widgets import Button, DataTable

from services.core.config import Config, CsbenchConfig
from services.core.times import DEMO_NOW
from services.csbench.demo import write_demo
from services.csbench.source import ResultsSource
from services.harbor.source import HarborSource
from tests.support.csbench_fixtures import csbench_exe, standin
from tests.support.ui_demo import FIXED_NOW, settle, shared_demo, use_utc
from tui.app import EvaldeskApp
from tui.screens.audit import AuditScreen
from tui.screens.confirm import ConfirmScreen
from tui.screens.trials import TrialsScreen
from widgets.checklist import Checklist
from widgets.diagnose import DiagnosePanel

CID = "camp-5e1f0c2a"
KEY = f"demo/csbench::{CID}"
FIXED = Path("/tmp/evaldesk-csbench-ui")
SIZES = [(80, 24), (120, 40)]
Pilot = object

_campaigns: Path | None = None


@pytest.fixture(autouse=True)
def _fixed_dir_alone() -> Iterator[None]:
    with open(f"{FIXED}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def demo_campaign(factory: pytest.TempPathFactory) -> Path:
    global _campaigns
    if _campaigns is None:
        _campaigns = factory.mktemp("csbench-demo")
        write_demo(_campaigns, DEMO_NOW)
    return _campaigns


def private_campaign(factory: pytest.TempPathFactory, dest: Path) -> Path:
    shutil.copytree(demo_campaign(factory), dest)
    return dest


def fixed_cloud() -> tuple[Path, Path, Path]:
    """(stand-in csbench, its config, the checkout) at fixed paths, so previews never move."""
    shutil.rmtree(FIXED, ignore_errors=True)
    (FIXED / "checkout" / "infra" / "terraform" / "aliyun-iam").mkdir(parents=True)
    exe, yaml = standin(FIXED, FIXED / "bucket")
    return exe, yaml, FIXED / "checkout"


def make_app(factory: pytest.TempPathFactory, state: Path, campaigns: Path | None = None, *,
             with_config: bool = True, read_only: bool = False) -> EvaldeskApp:
    use_utc()
    config = Config(journal_path=str(state / "journal.jsonl"))
    if with_config:
        exe, yaml, checkout = fixed_cloud()
        config.csbench = CsbenchConfig(config=str(yaml), executable=str(exe), workdir=str(checkout),
                                       results_dir=str(FIXED / "results"))
    from services.csbench.cli import settings

    sources = [
        HarborSource(shared_demo(factory), config.policy, label="demo"),
        ResultsSource(str(campaigns or demo_campaign(factory)), label="demo/csbench", settings=settings(config)),
    ]
    return EvaldeskApp(sources, config, read_only, now=FIXED_NOW, poll=False, cursor_blink=False)


async def select_campaign(pilot: Pilot) -> None:
    """Filter the list down to the campaign, as a person would."""
    await settle(pilot)
    await pilot.press("slash", *"camp-", "enter")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


async def open_teardown(app: EvaldeskApp, pilot: Pilot) -> ConfirmScreen:
    await select_campaign(pilot)
    await pilot.press("a")  # type: ignore[attr-defined]
    await settle(pilot, 2)
    assert isinstance(app.screen, AuditScreen)
    checklist = app.screen.query_one(Checklist)
    # the audit opens on the row evaldesk can fix: the teardown
    assert checklist.items[checklist.highlighted or 0].id == "teardown"
    await pilot.press("x")  # type: ignore[attr-defined]
    await settle(pilot, 3)
    assert isinstance(app.screen, ConfirmScreen), [e.message for e in app.event_log]
    return app.screen


async def test_the_campaign_is_listed_beside_harbor_jobs(tmp_path_factory: pytest.TempPathFactory,
                                                         tmp_path: Path) -> None:
    csbench_exe()
    app = make_app(tmp_path_factory, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        keys = [e.key for e in app.screen.shown]  # type: ignore[attr-defined]
        assert KEY in keys and len(keys) == 7
        await select_campaign(pilot)
        table = app.screen.query_one(DataTable)
        row = [str(c) for c in table.get_row_at(0)]
        assert row[1] == CID and "swe-bench" in row[2] and "mock-agent" in row[3]
        await pilot.press("a")
        await settle(pilot, 2)
        screen = app.screen
        assert isinstance(screen, AuditScreen)
        items = {i.id: i for i in screen.query_one(Checklist).items}
        assert items["mock_vs_real"].status == "fail" and "you paid for a mock" in items["mock_vs_real"].evidence
        assert [i for i in items if i[0].isalpha()] == list(items)
        assert {"harness_report", "hf_mirror", "oracle_resolved", "docker_room", "swebench_importable",
                "placement_local", "container_naming", "harness_stderr"} <= set(items)
        assert items["teardown"].status == "warn" and items["teardown"].runnable == "csbench_teardown"


async def test_teardown_dialog_cancel_then_apply(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    csbench_exe()
    campaigns = private_campaign(tmp_path_factory, tmp_path / "campaigns")
    app = make_app(tmp_path_factory, tmp_path, campaigns)
    async with app.run_test(size=(120, 40)) as pilot:
        dialog = await open_teardown(app, pilot)
        text = "\n".join(dialog.lines)
        assert (f"cd {FIXED}/checkout && {FIXED}/bin/csbench teardown {CID} --config {FIXED}/csbench.yaml"
                in text)
        assert "NAT gateway and EIP" in text
        assert dialog.query_one("#cancel", Button).has_focus
        await pilot.press("n")
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        assert not (FIXED / "bucket" / "terraform.log").exists()
        assert any("cancelled" in e.message for e in app.event_log)

        await pilot.press("x")
        await settle(pilot, 3)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        # a write that runs a command shows its output as it comes; esc goes back to the audit
        from tui.screens.command_log import CommandLogScreen

        assert isinstance(app.screen, CommandLogScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        assert (FIXED / "bucket" / "terraform.log").exists()
        report = app.audit(KEY)
        assert report is not None and report.check("teardown").status.value == "pass"
        assert "{'destroyed': True" in report.check("teardown").evidence
        assert any(e.message.startswith("csbench_teardown finished") for e in app.event_log)
        records = list((campaigns / CID / ".evaldesk-quarantine").iterdir())
        assert len(records) == 1 and (records[0] / "record.json").exists()


async def test_teardown_without_a_config_says_what_is_missing(tmp_path_factory: pytest.TempPathFactory,
                                                              tmp_path: Path) -> None:
    app = make_app(tmp_path_factory, tmp_path, with_config=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await select_campaign(pilot)
        await pilot.press("a")
        await settle(pilot, 2)
        await pilot.press("x")
        await settle(pilot, 3)
        # the teardown is planned (its one command) and the dialog says what is missing, with no apply
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen) and dialog.refusal and "[csbench] section" in dialog.refusal
        assert not dialog.query("#confirm")
        await pilot.press("escape")
        await settle(pilot, 1)
        assert isinstance(app.screen, AuditScreen)


async def test_trials_show_the_record(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    app = make_app(tmp_path_factory, tmp_path, with_config=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await select_campaign(pilot)
        await pilot.press("enter")
        await settle(pilot, 3)
        screen = app.screen
        assert isinstance(screen, TrialsScreen)
        await pilot.press("d")
        await settle(pilot, 3)
        text = screen.query_one(DiagnosePanel).text
        assert "swe-bench.resolved" in text and "scaffold mock-agent@slice1" in text
        assert "environment cloud · simulated · cn-hangzhou" in text and "EXECUTE ok" in text
        await pilot.press("1")
        await settle(pilot, 3)
        assert "record.json" in screen.log_tail.title
        await pilot.press("5")
        await settle(pilot, 3)
        assert "controller.log" in screen.log_tail.title


# ---- snapshots ------------------------------------------------------------------------------------

async def quiet(pilot: Pilot) -> None:
    pilot.app.clear_notifications()  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


async def at_list(pilot: Pilot) -> None:
    await settle(pilot)
    await quiet(pilot)


async def at_audit(pilot: Pilot) -> None:
    await select_campaign(pilot)
    await pilot.press("a")  # type: ignore[attr-defined]
    await settle(pilot, 2)
    await quiet(pilot)


async def at_teardown(pilot: Pilot) -> None:
    await at_audit(pilot)
    await pilot.press("x")  # type: ignore[attr-defined]
    await settle(pilot, 3)
    assert isinstance(pilot.app.screen, ConfirmScreen)  # type: ignore[attr-defined]
    await quiet(pilot)


async def at_trials(pilot: Pilot) -> None:
    await select_campaign(pilot)
    await pilot.press("enter")  # type: ignore[attr-defined]
    await settle(pilot, 3)
    await pilot.press("d")  # type: ignore[attr-defined]
    await settle(pilot, 3)
    await quiet(pilot)


SCREENS: dict[str, Callable[[Pilot], Awaitable[None]]] = {
    "list": at_list, "audit": at_audit, "teardown": at_teardown, "trials": at_trials,
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_csbench_snapshot(snap_compare: Callable[..., bool], tmp_path_factory: pytest.TempPathFactory,
                          tmp_path: Path, screen: str, size: tuple[int, int]) -> None:
    csbench_exe()
    app = make_app(tmp_path_factory, tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=SCREENS[screen])


# ---- csbench submit from the console ----------------------------------------------------------------

PLAN_KEY = "csbench::swe-bench-smoke.plan.yaml"


def submit_app(state: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> tuple[EvaldeskApp, Path, Path]:
    """The console on the `[csbench] plans` of a checkout at a fixed path (the dialog shows
    absolute paths), with the stand-in csbench first on PATH. (app, calls log, bucket)"""
    from services.csbench.cli import settings
    from services.csbench.source import CampaignSource
    from tests.support.csbench_fixtures import standin_on_path, submit_checkout

    use_utc()
    shutil.rmtree(FIXED, ignore_errors=True)
    FIXED.mkdir(parents=True)
    log = standin_on_path(FIXED, monkeypatch)
    _, plan, yaml = submit_checkout(FIXED, mode)
    config = Config(journal_path=str(state / "journal.jsonl"), csbench=CsbenchConfig(
        config=str(yaml), results_dir=str(FIXED / "results"), plans=[str(plan)]))
    s = settings(config)
    assert s is not None
    app = EvaldeskApp([CampaignSource(s, label="csbench")], config, False, now=FIXED_NOW, poll=False,
                      cursor_blink=False)
    return app, log, FIXED / "bucket"


async def open_submit(app: EvaldeskApp, pilot: Pilot) -> ConfirmScreen:
    await settle(pilot)
    keys = [e.key for e in app.screen.shown]  # type: ignore[attr-defined]
    assert keys == [PLAN_KEY]
    await pilot.press("a")  # type: ignore[attr-defined]
    await settle(pilot, 2)
    assert isinstance(app.screen, AuditScreen)
    checklist = app.screen.query_one(Checklist)
    assert checklist.items[checklist.highlighted or 0].id == "submitted"
    await pilot.press("x")  # type: ignore[attr-defined]
    await settle(pilot, 3)
    assert isinstance(app.screen, ConfirmScreen), [e.message for e in app.event_log]
    return app.screen


async def test_submit_from_the_console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.csbench_fixtures import calls

    app, log, _ = submit_app(tmp_path, monkeypatch, "real")
    async with app.run_test(size=(120, 40)) as pilot:
        dialog = await open_submit(app, pilot)
        text = "\n".join(dialog.lines)
        assert f"cd {FIXED}/checkout && csbench submit {FIXED}/checkout/configs/swe-bench-smoke.plan.yaml" in text
        assert "--watchdog-timeout 5400" in text and "NAT gateway and an EIP" in text
        assert dialog.query_one("#cancel", Button).has_focus and dialog.word is None
        await pilot.press("n")
        await settle(pilot)
        assert calls(log) == [c for c in calls(log) if c["argv"][1] != "submit"]
        await pilot.press("x")
        await settle(pilot, 3)
        await pilot.press("y")
        await settle(pilot, 6)
        [submit] = [c for c in calls(log) if c["argv"][1] == "submit"]
        assert submit["argv"][-2:] == ["--watchdog-timeout", "5400"]
        assert any(e.message.startswith("csbench_submit") for e in app.event_log)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        await pilot.press("escape")
        await settle(pilot, 3)
        # the campaign it started is followed beside its plan
        keys = [e.key for e in app.screen.shown]  # type: ignore[attr-defined]
        assert len(keys) == 2 and keys[0] == PLAN_KEY and keys[1].startswith("csbench::camp-")


async def test_a_mock_submit_asks_for_the_word(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from tests.support.csbench_fixtures import calls

    app, log, bucket = submit_app(tmp_path, monkeypatch, "mock")
    async with app.run_test(size=(120, 40)) as pilot:
        dialog = await open_submit(app, pilot)
        assert dialog.word == "mock" and not dialog.query("#refusal")
        assert "canned fixtures" in "\n".join(dialog.lines)
        confirm = dialog.query_one("#confirm", Button)
        assert confirm.disabled
        # y is a letter of the box here, not Apply; a wrong word applies nothing
        await pilot.press("y", "enter")
        await settle(pilot)
        assert app.screen is dialog and not [c for c in calls(log) if c["argv"][1] == "submit"]
        await pilot.press("backspace", *"mock")
        await pilot.pause()
        assert not confirm.disabled
        await pilot.press("enter")
        await settle(pilot, 6)
        [submit] = [c for c in calls(log) if c["argv"][1] == "submit"]
        cid = next(p.name for p in (bucket / "clousight-bench" / "control").iterdir())
        launch = json.loads((bucket / "clousight-bench" / "control" / cid / "launch.json").read_text())
        assert launch["target"]["mode"] == "mock" and submit["argv"][1] == "submit"


async def at_submit_word(pilot: Pilot) -> None:
    await open_submit(pilot.app, pilot)  # type: ignore[attr-defined]
    await quiet(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_submit_word_snapshot(snap_compare: Callable[..., bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              size: tuple[int, int]) -> None:
    app, _, _ = submit_app(tmp_path, monkeypatch, "mock")
    assert snap_compare(app, terminal_size=size, run_before=at_submit_word)
