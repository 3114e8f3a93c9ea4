"""Round trips and bytes per refresh of a 10k-trial job read over SSH, against a local scan.

Run: python benchmarks/remote_scan.py [--trials 10000] [--changed 50]
The job is synthetic (benchmarks/synth.py) in a temp dir, served by an asyncssh server on
127.0.0.1 that runs commands in a real shell here, so the remote program really runs.
Figures: cold (nothing held), warm (nothing changed), live (`--changed` results rewritten).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.synth import touch_results, write_job
from services.core.models import Snapshot
from services.harbor.source import HarborSource
from services.harbor.ssh_source import SSHHarborSource
from services.transport.ssh import SSHPool
from tests.support.ssh_server import InProcessSSHServer


def _row(name: str, snap: Snapshot, seconds: float) -> str:
    s = snap.stats
    return (
        f"{name:<22} {s['round_trips']:>6} {s['bytes_up']:>12,} {s['bytes_down']:>12,} "
        f"{s['trials_sent']:>8} {seconds:>9.3f}"
    )


async def main(n_trials: int, n_changed: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="evaldesk-remote-bench-"))
    try:
        t = time.perf_counter()
        job = write_job(tmp / "jobs", n_trials)
        print(f"wrote {n_trials} trials in {time.perf_counter() - t:.1f}s under {tmp}")
        (tmp / "srv").mkdir()
        server = InProcessSSHServer(tmp / "srv")
        await server.start()
        pool = SSHPool()
        src = SSHHarborSource(server.spec(), [str(tmp / "jobs")], pool=pool)
        local = HarborSource(tmp / "jobs")

        head = f"{'trips':>6} {'bytes up':>12} {'bytes down':>12} {'trials':>8} {'seconds':>9}"
        print(f"\n{'harbor+ssh refresh':<22} {head}")
        results: dict[str, float] = {}
        for name in ("cold", "warm", f"live ({n_changed} changed)"):
            if name.startswith("live"):
                touch_results(job, n_changed)
            t = time.perf_counter()
            snap = await src.scan()
            results[name] = time.perf_counter() - t
            assert not snap.errors, snap.errors
            print(_row(name, snap, results[name]))
        remote_exp = snap.experiments[0]

        print(f"\n{'local HarborSource':<22} {'seconds':>9}")
        shutil.rmtree(tmp / "jobs")
        job = write_job(tmp / "jobs", n_trials)
        local = HarborSource(tmp / "jobs")
        for name in ("cold", "warm", f"live ({n_changed} changed)"):
            if name.startswith("live"):
                touch_results(job, n_changed)
            t = time.perf_counter()
            lsnap = await local.scan()
            print(f"{name:<22} {time.perf_counter() - t:>9.3f}")
        local_exp = lsnap.experiments[0]

        # a host with no python3: the same folder read through SFTP alone
        fallback = SSHHarborSource(server.spec(), [str(tmp / "jobs")], pool=pool, python="no-python-here",
                                   slurm=False)
        print(f"\n{'sftp fallback (no python)':<26} {'requests':>9} {'files read':>11} {'seconds':>9}")
        for name in ("cold", "warm", f"live ({n_changed} changed)"):
            if name.startswith("live"):
                touch_results(job, n_changed)
            t = time.perf_counter()
            fsnap = await fallback.scan()
            st = fsnap.stats
            print(f"{name:<26} {st['round_trips']:>9,} {st['files_read']:>11,} {time.perf_counter() - t:>9.3f}")
        same = local_exp.counts == remote_exp.counts and local_exp.score == remote_exp.score
        print(f"\nsame figures local vs remote: {same} (valid {remote_exp.counts.valid}, "
              f"errored {remote_exp.counts.errored}, total {remote_exp.counts.total})")
        print(f"SSH connections opened: {pool.connects}")
        await pool.close()
        await server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--changed", type=int, default=50)
    args = ap.parse_args()
    asyncio.run(main(args.trials, args.changed))
