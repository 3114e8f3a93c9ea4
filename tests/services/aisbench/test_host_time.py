"""Run dir names are the eval host's local time (ais_bench/benchmark/cli/utils.py
`datetime.now().strftime("%Y%m%d_%H%M%S")`): read in the host's zone — the hosts entry's `tz`,
else what the host itself says over SSH (`date +%z`) — not as UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.aisbench.backend import source_for_host
from services.aisbench.formats import HostEntry, parse_tz
from services.aisbench.models import TaskExperiment
from services.aisbench.source import AISBenchSource
from services.core.config import Config
from services.core.plain import validate
from tests.support.ais_bench_standin import copy_fixture_root
from tests.support.ssh_server import InProcessSSHServer
from tests.support.ssh_server import ssh_server as ssh_server

RUN = "20261130_103907"  # the fixture's run dir: 10:39:07 on the eval host's clock


def runbook_style(root: Path) -> None:
    """Without evaldesk's task.json only the run dir's name dates the task."""
    for task in root.iterdir():
        (task / "task.json").unlink(missing_ok=True)


async def started(src: AISBenchSource, task_id: str = "gsm8k-accuracy") -> datetime | None:
    snap = await src.scan()
    exp = next(e for e in snap.experiments if e.id == task_id)
    assert isinstance(exp, TaskExperiment)
    return exp.started_at


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = copy_fixture_root(tmp_path / "task_root")
    runbook_style(r)
    return r


def test_a_zone_is_an_iana_name_or_an_offset() -> None:
    assert parse_tz("+0800").utcoffset(None).total_seconds() == 8 * 3600  # type: ignore[union-attr]
    assert parse_tz("-05:30").utcoffset(None).total_seconds() == -(5 * 3600 + 1800)  # type: ignore[union-attr]
    assert datetime(2026, 11, 30, tzinfo=parse_tz("Asia/Shanghai")).utcoffset().total_seconds() == 8 * 3600  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="not a time zone"):
        parse_tz("Mars/Olympus")
    with pytest.raises(ValueError):
        HostEntry(host="h", benchmark_src="/s", tz="China time")


async def test_the_hosts_tz_reads_a_run_dir_in_china_time(root: Path) -> None:
    entry = HostEntry(name="local", host="local", benchmark_src=str(root), task_root=str(root), tz="Asia/Shanghai")
    src = source_for_host(entry, Config())
    assert (root / "gsm8k-accuracy" / "outputs" / RUN).is_dir()
    assert await started(src) == datetime(2026, 11, 30, 2, 39, 7, tzinfo=UTC)  # 8 h before, not 10:39 UTC


async def test_a_host_without_tz_is_asked_over_ssh(ssh_server: InProcessSSHServer, root: Path,
                                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the eval host's clock is China time: commands run there see TZ (the host's own `date +%z`)
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    config = validate(Config, {"ssh_config": str(ssh_server.ssh_config_path)})
    entry = HostEntry(name="eval-a", host="127.0.0.1", port=ssh_server.port,
                      identity_file=str(ssh_server.client_key_path), known_hosts=str(ssh_server.known_hosts_path),
                      benchmark_src=str(tmp_path), task_root=str(root))
    src = source_for_host(entry, config)
    try:
        assert await started(src) == datetime(2026, 11, 30, 2, 39, 7, tzinfo=UTC)
        asked = sum(c.startswith("date") for c in ssh_server.commands)
        assert asked == 1
        await src.scan()
        assert sum(c.startswith("date") for c in ssh_server.commands) == asked  # asked once
    finally:
        await src.close()


async def test_a_host_that_cannot_say_its_zone_is_read_as_utc_and_says_so(
        ssh_server: InProcessSSHServer, root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "date").write_text("#!/bin/sh\necho 'date: no such zone' >&2\nexit 1\n")
    (bin_dir / "date").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    config = validate(Config, {"ssh_config": str(ssh_server.ssh_config_path)})
    entry = HostEntry(name="eval-a", host="127.0.0.1", port=ssh_server.port,
                      identity_file=str(ssh_server.client_key_path), known_hosts=str(ssh_server.known_hosts_path),
                      benchmark_src=str(tmp_path), task_root=str(root))
    src = source_for_host(entry, config)
    try:
        snap = await src.scan()
        exp = next(e for e in snap.experiments if e.id == "gsm8k-accuracy")
        assert exp.started_at == datetime(2026, 11, 30, 10, 39, 7, tzinfo=UTC)
        assert any("cannot tell the host's time zone" in e.message and "set `tz`" in e.message for e in snap.errors)
    finally:
        await src.close()
