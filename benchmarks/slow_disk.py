"""A first `--batch audit` on a disk that answers as a network filesystem does: each lookup, open
and read waits --latency seconds (a read-only FUSE passthrough over a synthetic job). Against the
runbook's `json.load` loop, and against evaldesk reading every file one at a time
(walk.overlapped never finds the disk slow), interleaved, page cache dropped before each run.

Needs root (it drops the page cache and mounts), libfuse2 and fusepy, which evaldesk itself does
not use: `apt-get install fuse libfuse2 && pip install fusepy`.

    python benchmarks/slow_disk.py [--dir /tmp/evaldesk-targets] [--trials 5000] [--latency 0.0005]
                                   [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.targets import LOOP, ONE_AT_A_TIME, _drop_caches, _env, _timed, job_dir


def serve(src: str, mountpoint: str, latency: float) -> None:
    from fuse import FUSE, FuseOSError, Operations  # type: ignore[import-not-found]

    def answer(call: Any, *args: Any) -> Any:
        time.sleep(latency)
        try:
            return call(*args)
        except OSError as exc:
            raise FuseOSError(exc.errno) from None

    class Slow(Operations):  # type: ignore[misc]
        def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
            st = answer(os.lstat, src + path)
            return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime",
                                                 "st_nlink", "st_size", "st_uid")}

        def readdir(self, path: str, fh: Any) -> list[str]:
            return [".", "..", *answer(os.listdir, src + path)]

        def readlink(self, path: str) -> str:
            return str(answer(os.readlink, src + path))

        def open(self, path: str, flags: int) -> int:
            return int(answer(os.open, src + path, os.O_RDONLY))

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return bytes(answer(os.pread, fh, size, offset))

        def release(self, path: str, fh: int) -> None:
            os.close(fh)

    FUSE(Slow(), mountpoint, foreground=True, nothreads=False, ro=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--dir", default="/tmp/evaldesk-targets")
    ap.add_argument("--trials", type=int, default=5000)
    ap.add_argument("--latency", type=float, default=0.0005)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--serve", nargs=2, metavar=("SRC", "MOUNTPOINT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], args.latency)
        return
    if os.geteuid() != 0:
        sys.exit("slow_disk: needs root (it drops the page cache and mounts a FUSE filesystem)")
    base = Path(args.dir)
    job = job_dir(base, f"slow{args.trials}", args.trials)
    loop = base / "runbook_loop.py"
    loop.write_text(LOOP)
    mnt = Path(tempfile.mkdtemp(prefix="evaldesk-slow-"))
    server = subprocess.Popen([sys.executable, __file__, "--latency", str(args.latency), "--serve",
                               str(job.parent), str(mnt)])
    try:
        for _ in range(100):
            if (mnt / job.name).exists():
                break
            time.sleep(0.1)
        else:
            sys.exit("slow_disk: the FUSE filesystem did not come up (is fusepy installed, /dev/fuse there?)")
        slow_job = str(mnt / job.name)
        audit = ["--batch", "audit", slow_job, "--format", "json"]
        runs = {
            "json.load loop": [sys.executable, str(loop), slow_job],
            "evaldesk, one file at a time": [*ONE_AT_A_TIME, *audit],
            "evaldesk": [sys.executable, "-m", "tui.cli", *audit],
        }
        took: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, cmd in runs.items():
                cache = tempfile.mkdtemp(prefix="evaldesk-cache-", dir=base)
                _drop_caches()
                took[name].append(_timed(cmd, _env(XDG_CACHE_HOME=cache)))
                shutil.rmtree(cache, ignore_errors=True)
        print(f"{args.trials:,} trials, {1000 * args.latency:g} ms a lookup, open or read, page cache dropped "
              f"before each, medians of {args.repeat}:")
        loop_s = statistics.median(took["json.load loop"])
        for name, times in took.items():
            s = statistics.median(times)
            print(f"  {name:<30} {s:6.1f} s  {s / loop_s:.2f}x the loop")
    finally:
        subprocess.run(["fusermount", "-u", str(mnt)], check=False)
        server.wait(timeout=30)
        mnt.rmdir()


if __name__ == "__main__":
    main()
