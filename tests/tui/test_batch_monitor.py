"""`evaldesk --batch monitor`: JSON lines per poll, warnings when rules fire, exit codes."""

from __future__ import annotations

import importlib
import io
import json
import subprocess
import sys
from pathlib import Path

from services.core.baselines import Baseline
from services.core.models import Snapshot
from services.core.policy import Policy
from services.core.source import ProgressFn
from services.harbor.source import HarborSource
from services.transport.fs import JobFS
from tests.support.playback import JobPlayback, Script
from tui.batch_monitor import run_monitor

REPO = Path(__file__).resolve().parents[2]


class SteppedSource:
    """A real HarborSource whose every scan first plays the next step of a script."""

    kind = "harbor"

    def __init__(self, root: Path, script: Script) -> None:
        self.inner = HarborSource(root)
        self.label = self.inner.label
        self.script = script

    async def scan(self, progress: ProgressFn | None = None) -> Snapshot:
        self.script.step()
        return await self.inner.scan(progress)

    def fs(self) -> JobFS:
        return self.inner.fs()

    async def close(self) -> None:
        await self.inner.close()


async def _no_sleep(seconds: float) -> None:
    return None


async def _monitor(tmp_path: Path, steps, until: str, baselines=None) -> tuple[int, list[dict]]:  # type: ignore[no-untyped-def]
    pb = JobPlayback(tmp_path / "jobs", planned=6)
    src = SteppedSource(tmp_path / "jobs", Script(pb, steps))
    out = io.StringIO()
    try:
        rc = await run_monitor([src], 30, until, Policy(), baselines, out, clock=pb.clock, sleep=_no_sleep)
    finally:
        await src.close()
    return rc, [json.loads(line) for line in out.getvalue().splitlines()]


def _start_silent(pb: JobPlayback) -> None:
    pb.start_many(["a", "b"])
    pb.advance(400)


def _tick(pb: JobPlayback) -> None:
    pb.advance(60)


async def test_stuck_dispatch_streams_snapshots_and_a_warning_exit_1(tmp_path: Path) -> None:
    rc, lines = await _monitor(tmp_path, [_start_silent, _tick, _tick, _tick], until="4")
    assert rc == 1
    assert [ln["type"] for ln in lines] == ["snapshot", "snapshot", "snapshot", "warning", "snapshot"]
    snap = lines[0]
    assert set(snap) >= {"type", "id", "at", "counts", "pass_rate", "eta_s", "throughput_per_min", "tokens",
                         "cost_usd"}
    assert snap["id"] == "terminal_bench_2_playback-model_2026-11-20__16-00-00"
    assert snap["at"] == "2026-11-20T16:06:40Z"
    assert snap["counts"] == {"pending": 4, "dispatched": 2, "running": 0, "valid": 0, "errored": 0}
    assert snap["pass_rate"] is None and snap["eta_s"] is None
    warning = lines[3]
    assert warning == {
        "type": "warning",
        "id": snap["id"],
        "at": "2026-11-20T16:08:40Z",
        "rule": "a",
        "evidence": "dispatched 2 → 2 → 2 over 3 polls (2 min), no trial finished (still 0); "
        "idle ≥ 5 min counts as dispatched",
    }


def _healthy(i: int):  # type: ignore[no-untyped-def]
    def step(pb: JobPlayback) -> None:
        if i == 0:
            pb.start_many(["a", "b", "c"])
        pb.advance(60)
        for n in pb.running():
            pb.log(n, f"episode {i}")
        if i >= 1:
            pb.finish(pb.running()[0], reward=1.0)
            pb.start(f"next-{i}")

    return step


async def test_healthy_run_until_count_exits_0(tmp_path: Path) -> None:
    rc, lines = await _monitor(tmp_path, [_healthy(i) for i in range(4)], until="4")
    assert rc == 0
    assert [ln["type"] for ln in lines] == ["snapshot"] * 4
    last = lines[-1]
    assert last["counts"]["valid"] == 3 and last["pass_rate"] == 1.0
    assert last["throughput_per_min"] == 0.75 and last["eta_s"] == 240.0
    assert last["tokens"] == 3 * 10_500


async def test_until_done_stops_when_the_job_finishes(tmp_path: Path) -> None:
    def finish_all(pb: JobPlayback) -> None:
        pb.advance(60)
        for n in pb.running():
            pb.finish(n, reward=0.0)
        pb.end_job()

    steps = [_healthy(0), _healthy(1), finish_all, _tick, _tick]
    rc, lines = await _monitor(tmp_path, steps, until="done",
                               baselines=Baseline(name="ref", pass_rate=0.9))
    assert rc == 0  # 4 finished: too few for rule c to judge
    assert len(lines) == 3 and lines[-1]["state"] == "finished" and lines[-1]["eta_s"] == 0.0
    assert lines[-1]["expected_pass_rate"] == 0.9


async def test_usage_and_unreachable_exit_2(tmp_path: Path) -> None:
    err = io.StringIO()
    src = HarborSource(tmp_path / "missing")
    assert await run_monitor([src], 1, "soon", None, None, io.StringIO(), err=err) == 2
    assert "--until takes 'done' or a number of polls" in err.getvalue()
    assert await run_monitor([src], 1, "0", None, None, io.StringIO(), err=err) == 2
    out = io.StringIO()
    assert await run_monitor([src], 1, "1", None, None, out, err=err) == 2
    assert "cannot read" in err.getvalue() and "no such directory" in err.getvalue()
    assert out.getvalue() == ""
    await src.close()


def test_cli_end_to_end(tmp_path: Path) -> None:
    pb = JobPlayback(tmp_path / "jobs", planned=2)
    for n in pb.start_many(["a", "b"]):
        pb.finish(n, reward=1.0)
    pb.end_job()
    base = tmp_path / "ref.json"
    base.write_text('{"pass_rate": 0.5}')
    cmd = [sys.executable, "-m", "tui.cli", "--batch", "monitor", str(tmp_path / "jobs"), "--interval", "0",
           "--until", "done", "--baseline", str(base)]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    (line,) = res.stdout.splitlines()
    assert json.loads(line)["counts"]["valid"] == 2
    base.write_text('{"pass_rate": 5}')
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("evaldesk: --baseline ") and "Traceback" not in res.stderr


def test_no_textual_in_the_headless_monitor() -> None:
    code = (
        "import sys, tui.batch_monitor, services.monitor.state, services.monitor.poller, services.core.baselines; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
    assert importlib.util.find_spec("tui.batch_monitor") is not None
