"""The trials screen driven by keys on the demo jobs (real files in a tmp dir, the real app)."""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

from pytest import MonkeyPatch, TempPathFactory
from textual.pilot import Pilot

from services.core.diagnosis import score_effect
from tests.support.ui_demo import copy_job, make_demo_app, settle, shared_demo, wait_for
from tui.screens.trials import TrialsScreen
from widgets.log_tail import LogTail
from widgets.trial_table import VirtualTable

SERA = "terminal_bench_2_laion-SERA-14B_2026-11-19__10-45-00"
SWE = "swebench-verified-random-100_claude-sonnet-4-5_2026-11-20__16-00-00"
QWEN = "terminal_bench_2_laion-Qwen3-32B-agentic_2026-11-19__09-15-00"


async def open_trials(pilot: Pilot[object], job: str) -> TrialsScreen:
    app = pilot.app
    await settle(pilot)
    app.open_trials(f"demo::{job}")  # type: ignore[attr-defined]
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, TrialsScreen)
    await wait_for(pilot, lambda: screen.diagnose.info is not None)
    return screen


def shown(screen: TrialsScreen) -> list[list[str]]:
    table = screen.query_one(VirtualTable)
    return [table.row_text(i) for i in range(table.row_count)]


def title(screen: TrialsScreen) -> str:
    return str(screen.query_one("#trials-title").render())


async def test_status_filter_cycles_valid_errored_running(tmp_path: Path, tmp_path_factory: TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_trials(pilot, SERA)
        assert len(shown(screen)) == 267
        assert "267 attempts" in title(screen)
        await pilot.press("s")
        assert {r[3] for r in shown(screen)} == {"valid"} and len(shown(screen)) == 255
        await pilot.press("s")
        rows = shown(screen)
        assert {r[3] for r in rows} == {"errored"} and len(rows) == 12
        assert "status errored" in title(screen)
        await pilot.press("s")
        assert shown(screen) == []
        assert screen.table.empty_text == "no trials match"
        await pilot.press("s")
        assert len(shown(screen)) == 267


async def test_group_by_exception_then_drill_into_a_group(tmp_path: Path, tmp_path_factory: TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_trials(pilot, QWEN)
        await pilot.press("E")
        groups = [(r[0], r[1]) for r in shown(screen)]
        assert groups == [("DaytonaError", "65"), ("EnvironmentStartTimeoutError", "20"),
                          ("(no exception)", "182")]
        assert "grouped by exception" in title(screen)
        await pilot.press("down", "enter")
        rows = shown(screen)
        assert len(rows) == 20 and {r[4] for r in rows} == {"EnvironmentStartTimeoutError"}
        assert "same failure as EnvironmentStartTimeoutError" in title(screen)
        await pilot.press("escape")
        assert len(shown(screen)) == 267
        await pilot.press("escape")  # nothing left to clear: back to the experiments
        assert not isinstance(app.screen, TrialsScreen)


async def test_diagnose_and_same_failure_filter(tmp_path: Path, tmp_path_factory: TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_trials(pilot, SERA)
        await pilot.press("s", "s")  # errored only: all VerifierOutputParseError without reward
        await wait_for(pilot, lambda: screen.diagnose.info is not None
                       and screen.diagnose.info.exception_type == "VerifierOutputParseError")
        text = screen.diagnose.text
        assert "VerifierOutputParseError: Could not parse reward" in text
        assert "Traceback (most recent call last)" in text
        assert "verifier_failed" in text and "true score is ≈ 0" in text
        assert "11 other trials failed the same way (VerifierOutputParseError)" in text
        await pilot.press("escape", "f")
        rows = shown(screen)
        assert len(rows) == 12 and {r[4] for r in rows} == {"VerifierOutputParseError"}

        # a reward with a non-benign exception: Harbor counts the reward, the error gate counts the error
        await pilot.press("escape", "E", "enter")  # NonZeroAgentExitCodeError, all with a reward
        await wait_for(pilot, lambda: screen.diagnose.info is not None
                       and screen.diagnose.info.exception_type == "NonZeroAgentExitCodeError")
        assert "invalid error" in screen.diagnose.text


async def test_other_attempts_of_a_task(tmp_path: Path, tmp_path_factory: TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_trials(pilot, SERA)
        await pilot.press("down", "down", "down", "down")
        task = shown(screen)[4][0]
        await pilot.press("a")
        rows = shown(screen)
        assert [r[0] for r in rows] == [task] * 3 and [r[1] for r in rows] == ["1", "2", "3"]
        assert rows[screen.table.cursor][0] == task
        await pilot.press("a")
        assert len(shown(screen)) == 267
        assert shown(screen)[screen.table.cursor][0] == task  # the cursor stays on the trial


async def test_a_key_before_the_selection_catches_up_acts_on_the_row_under_the_cursor(
        tmp_path: Path, tmp_path_factory: TempPathFactory, monkeypatch: MonkeyPatch) -> None:
    from tui.screens import trials

    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_trials(pilot, SERA)
        monkeypatch.setattr(trials, "SELECT_DELAY", 30.0)  # the diagnose panel never catches up here
        await pilot.press("down", "down", "down", "down", "down", "down")
        trial = shown(screen)[6]
        await pilot.press("a")
        assert {r[0] for r in shown(screen)} == {trial[0]}
        await pilot.press("a")
        assert shown(screen)[screen.table.cursor] == trial


async def test_running_trial_log_follows_pauses_and_resumes(tmp_path: Path, tmp_path_factory: TempPathFactory) -> None:
    jobs = copy_job(tmp_path_factory, tmp_path, SWE)
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_trials(pilot, SWE)
        await pilot.press("s", "s", "s")  # running
        tail = screen.query_one(LogTail)
        await wait_for(pilot, lambda: tail.title.endswith("/trial.log") and bool(tail.lines))
        trial = screen.selected_trial()
        assert trial is not None and trial.status.value == "running"
        log = jobs / SWE / trial.path / "trial.log"
        with log.open("a") as fh:
            fh.write("2026-11-20 18:01:00,000 INFO    harbor.trial: episode 99: appended live\n")
        await wait_for(pilot, lambda: "appended live" in tail.visible_lines()[-1])

        await pilot.press("enter")  # into the log
        assert tail.view.has_focus
        await pilot.press("up")
        assert not tail.follow
        with log.open("a") as fh:
            fh.write("second live line\n")
        await wait_for(pilot, lambda: tail.lines[-1] == "second live line")
        await pilot.pause()
        assert "second live line" not in "\n".join(tail.visible_lines())
        await pilot.press("end")
        assert tail.follow
        await wait_for(pilot, lambda: tail.visible_lines()[-1] == "second live line")


async def test_search_wrap_and_the_other_files(tmp_path: Path, tmp_path_factory: TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_trials(pilot, SERA)
        await pilot.press("s", "s")
        tail = screen.query_one(LogTail)
        await wait_for(pilot, lambda: bool(tail.lines))
        await pilot.press("slash", *"episode 1", "enter")
        assert tail.current_match is not None
        first = tail.current_match[0]
        assert "episode 1" in tail.lines[first]
        await pilot.press("N")
        assert tail.current_match[0] < first
        await pilot.press("n")
        assert tail.current_match[0] == first
        await pilot.press("w")
        assert tail.wrap
        await pilot.press("w")
        assert not tail.wrap

        await pilot.press("2")
        await wait_for(pilot, lambda: tail.title.endswith("/exception.txt") and bool(tail.lines))
        assert tail.lines[0] == "Traceback (most recent call last):"
        await pilot.press("3")
        await wait_for(pilot, lambda: tail.title.endswith("/verifier/test-stdout.txt"))
        await wait_for(pilot, lambda: bool(tail.notice) or bool(tail.lines))
        assert "no such file" in tail.notice  # no reward, no verifier output
        await pilot.press("5")
        await wait_for(pilot, lambda: tail.title.endswith("/agent/trajectory.json") and bool(tail.lines))
        assert '"schema_version": "ATIF-v1.2",' in "\n".join(tail.lines)
        await pilot.press("1")
        await wait_for(pilot, lambda: tail.title.endswith("/trial.log"))


async def test_compact_layout_toggles_panels(tmp_path: Path, tmp_path_factory: TempPathFactory) -> None:
    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_trials(pilot, SERA)
        assert screen.has_class("-compact")
        assert screen.log_tail.display and not screen.diagnose.display
        await pilot.press("d")
        assert screen.diagnose.display and not screen.log_tail.display
        await pilot.press("slash")  # searching shows the log again
        assert screen.log_tail.display and screen.log_tail.has_class("-searching")
        await pilot.press("escape")  # closes the search box, not the screen
        assert not screen.log_tail.has_class("-searching")
        assert app.screen is screen


async def test_bad_inputs_missing_binary_and_escaping_paths(tmp_path: Path, tmp_path_factory: TempPathFactory) -> None:
    jobs = copy_job(tmp_path_factory, tmp_path, SERA)
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_trials(pilot, SERA)
        tail = screen.log_tail
        trials = screen.trials
        job = jobs / SERA
        (job / trials[1].path / "trial.log").unlink()
        (job / trials[2].path / "trial.log").write_bytes(b"\x7fELF\x00\x00\x01" * 500)
        await pilot.press("down")
        await wait_for(pilot, lambda: "no such file" in tail.notice)
        await pilot.press("down")
        await wait_for(pilot, lambda: "binary" in tail.notice)
        assert "binary" in tail.visible_lines()[0]

        # a path that leaves the job dir is refused before any read
        exp = app.experiment(f"demo::{SERA}")
        assert exp is not None
        exp.trials[3].path = "../../../etc"
        screen.load_experiment()
        screen.table.cursor = next(n for n, i in enumerate(screen.rows) if screen.trials[i].path == "../../../etc")
        await wait_for(pilot, lambda: "leaves the job dir" in tail.notice)
        await wait_for(pilot, lambda: screen.diagnose.info is not None
                       and any("leaves the job dir" in p for p in screen.diagnose.info.problems))


def test_score_effect_is_decided_by_reward_presence() -> None:
    from services.core.models import Trial, TrialStatus

    timeout_scored = Trial(trial_name="a__1", task_name="a", path="a__1", status=TrialStatus.valid, reward=0.0,
                           exception_type="AgentTimeoutError", failure_class="agent_exhausted_budget")
    timeout_unscored = dataclasses.replace(timeout_scored, reward=None, status=TrialStatus.errored)
    infra = dataclasses.replace(timeout_unscored, exception_type="DaytonaError", failure_class="unclassified")
    assert "valid measurement" in score_effect(timeout_scored)
    assert "verifier never ran" in score_effect(timeout_unscored)
    assert "~unbiased" in score_effect(dataclasses.replace(infra, failure_class="sandbox_failed"))
    # a reward does not excuse a non-benign exception: the error gate counts it
    crashed = dataclasses.replace(timeout_scored, exception_type="NonZeroAgentExitCodeError")
    assert "invalid error" in score_effect(crashed)


async def test_snapshot_update_refreshes_the_table(tmp_path: Path, tmp_path_factory: TempPathFactory) -> None:
    jobs = copy_job(tmp_path_factory, tmp_path, SERA)
    app = make_demo_app(jobs, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_trials(pilot, SERA)
        gone = screen.trials[-1]
        shutil.rmtree(jobs / SERA / gone.path)
        app.refresh_sources()
        await wait_for(pilot, lambda: len(shown(screen)) == 266)
        assert gone.path not in {t.path for t in screen.trials}


async def test_a_large_experiment_opens_at_once(tmp_path: Path) -> None:
    from benchmarks.ui_trials import TrialsBenchApp, synthetic_experiment

    exp = synthetic_experiment(50_000)
    app = TrialsBenchApp(exp)
    async with app.run_test(size=(80, 24)) as pilot:
        t0 = time.perf_counter()
        screen = TrialsScreen("bench::x", poll_interval=60)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.table.row_count == 50_000 and bool(app.frames)
                       and app.frames[-1] > t0)
        assert app.frames[-1] - t0 < 3.0  # ~0.3 s measured; generous for a loaded CI box
        await pilot.press("end")
        assert screen.table.cursor == 49_999
        last = screen.trials[-1]
        assert screen.table.row_text(49_999)[-1] == last.trial_name
        await pilot.press("s", "s")  # errored only
        assert {r[3] for r in (screen.table.row_text(i) for i in range(screen.table.row_count))} == {"errored"}


async def test_marked_trials_are_drawn_marked(tmp_path: Path, tmp_path_factory: TempPathFactory) -> None:
    """space marks a trial and the table shows ✓ before its task; * inverts; ctrl+space clears."""
    from tests.tui.test_ui_layout import screen_text

    app = make_demo_app(shared_demo(tmp_path_factory), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_trials(pilot, SERA)
        first, second = (screen.trials[screen.rows[n]].task_name for n in (0, 1))
        body = lambda: screen_text(app).splitlines()[3:]  # noqa: E731  (below the header and title)
        assert not any("✓" in line for line in body())
        await pilot.press("space")
        await settle(pilot, 2)
        lines = body()
        marked = [line for line in lines if "✓" in line]
        assert len(marked) == 1 and f"✓ {first[:10]}" in marked[0], "\n".join(lines)
        assert any(f"  {second[:10]}" in line for line in lines)  # the unmarked rows keep their place
        assert "1 marked" in screen_text(app)
        assert screen.table.cursor == 1  # space moves on to the next trial
        await pilot.press("space")
        await settle(pilot, 2)
        assert sum("✓" in line for line in body()) == 2 and "2 marked" in screen_text(app)
        await pilot.press("asterisk")  # every other trial shown is marked now
        await settle(pilot, 2)
        assert f"{len(screen.rows) - 2} marked" in screen_text(app)
        lines = body()
        rows = lines[next(n for n, line in enumerate(lines) if " task " in line) + 1:]
        assert rows[0].startswith(f"  {first}") and rows[1].startswith(f"  {second}"), "\n".join(lines)
        assert rows[2].startswith("✓ "), "\n".join(lines)
        await pilot.press("ctrl+space")
        await settle(pilot, 2)
        assert not any("✓" in line for line in body()) and "marked" not in screen_text(app)
