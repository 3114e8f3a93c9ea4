"""A stand-in for a TPU launcher (`launch_eval_iris.py --job_name J`): relaunching a job by its
name makes Harbor run again, inside the same job prefix, the trials it finds missing. Here the
trials it "runs" were made beforehand (in --from) and are written to the bucket as Harbor's
output would be. It refuses a job name it was not given the output of."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--job_name", required=True)
    ap.add_argument("--output", required=True, help="gs://bucket/prefix or s3://bucket/prefix")
    ap.add_argument("--from", dest="source", required=True)
    args = ap.parse_args()
    src = Path(args.source) / args.job_name
    if not src.is_dir():
        print(f"no such job: {args.job_name}", file=sys.stderr)
        return 3
    scheme, _, rest = args.output.partition("://")
    name, _, prefix = rest.partition("/")
    if scheme == "gs":
        from services.objectstore.gcs import GCSBucket

        bucket: object = GCSBucket(name)
    else:
        from services.objectstore.s3 import S3Bucket

        bucket = S3Bucket(name)
    n = 0
    for p in sorted(src.rglob("*")):
        if p.is_file():
            bucket.put(f"{prefix}/{args.job_name}/{p.relative_to(src).as_posix()}", p.read_bytes(), None)  # type: ignore[attr-defined]
            n += 1
    print(f"relaunched {args.job_name}: {n} objects written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
