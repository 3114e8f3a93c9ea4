"""Audit time and request count of one synthetic Harbor job read from GCS and S3 emulators,
beside the same job on local disk; and, for the choice of client, the time to list the job's
objects with google-cloud-storage / boto3 and with gcsfs / s3fs when they are installed.

Run: python benchmarks/objectstore.py [--trials 20000]
The job is benchmarks/synth.py's, uploaded into fake-gcs-server and moto's server started
here (tests/services/objectstore/servers.py). Uploading 20k trials takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.synth import write_job
from services.audit.verdict import audit_experiment
from services.harbor.source import HarborSource
from services.objectstore.source import StoreSource
from tests.services.objectstore.servers import start_gcs, start_s3


def _audit(scan: Any) -> tuple[float, int, Any]:
    t0 = time.perf_counter()
    snap = scan()
    for exp in snap.experiments:
        audit_experiment(exp)
    return time.perf_counter() - t0, sum(len(e.trials) for e in snap.experiments), snap


def _upload(bucket: Any, root: Path, prefix: str) -> int:
    files = [p for p in root.rglob("*") if p.is_file()]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: bucket.put(f"{prefix}/{p.relative_to(root).as_posix()}", p.read_bytes(), None),
                      files))
    return len(files)


def _list_fsspec(scheme: str, bucket: str, prefix: str, endpoint: str) -> str:
    try:
        if scheme == "gs":
            import gcsfs

            fs: Any = gcsfs.GCSFileSystem(endpoint_url=endpoint, token="anon")
        else:
            import s3fs

            fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, key="testing", secret="testing")
    except ImportError as exc:
        return f"{exc.name} not installed"
    t0 = time.perf_counter()
    n = len(fs.find(f"{bucket}/{prefix}"))
    return f"{time.perf_counter() - t0:7.2f} s for {n} objects"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20000)
    ap.add_argument("--fsspec", action="store_true", help="also list with gcsfs / s3fs")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evaldesk-objectstore-bench-"))
    procs = []
    try:
        job = write_job(tmp / "jobs", args.trials)
        secs, n, _ = _audit(lambda: HarborSource(tmp / "jobs", cache=False).scan_sync())
        print(f"{'local':6} audit {secs:7.2f} s  {n} trials  (no requests)")
        gcs, gcs_url = start_gcs()
        s3, s3_url = start_s3()
        procs = [gcs, s3]
        os.environ.update(STORAGE_EMULATOR_HOST=gcs_url, AWS_ENDPOINT_URL=s3_url, AWS_ACCESS_KEY_ID="testing",
                          AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
        from services.objectstore.gcs import GCSBucket
        from services.objectstore.s3 import S3Bucket

        for scheme, make, endpoint in (("gs", GCSBucket, gcs_url), ("s3", S3Bucket, s3_url)):
            name = "evaldesk-bench"
            bucket: Any = make(name)
            if scheme == "gs":
                bucket.client.create_bucket(name)
            else:
                bucket.client.create_bucket(Bucket=name)
            t0 = time.perf_counter()
            n_obj = _upload(bucket, tmp / "jobs", "runs")
            print(f"{scheme:6} upload {time.perf_counter() - t0:6.1f} s  {n_obj} objects")
            t0 = time.perf_counter()
            listed = len(bucket.objects("runs/"))
            print(f"{scheme:6} list   {time.perf_counter() - t0:7.2f} s  {listed} objects, "
                  f"{bucket.requests - n_obj} requests ({type(bucket.client).__module__.split('.')[0]})")
            if args.fsspec:
                print(f"{scheme:6} fsspec {_list_fsspec(scheme, name, 'runs', endpoint)}")
            for label in ("cold", "warm"):
                src = StoreSource(make(name), "runs", cache=label == "warm")
                if label == "warm":
                    src.scan_sync()
                    src.bucket.requests = 0
                secs, n, _ = _audit(src.scan_sync)
                print(f"{scheme:6} audit {secs:7.2f} s  {n} trials  {src.bucket.requests} requests ({label})")
        del job
    finally:
        for p in procs:
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
