"""Regenerate the csbench campaign of the demo data (services/csbench/demo_campaign.json).

The runbook's smoke plan (suite:swe-bench, oracle, three SWE-bench Verified instances) is run
through clousight-bench's own campaign controller and orchestrator, offline: the OSS bucket is a
local dir and the target is `mode: mock` — which is exactly the campaign the runbook warns about
("you paid for a mock"). Then csbench's own `fetch` and `logs` functions write what
`csbench fetch --dest` and `csbench logs` would. The clock is pinned with libfaketime so the demo
is dated before the demo's "now" (services.core.times.DEMO_NOW).

Needs: pip install clousight-bench; apt-get install faketime.

    python scripts/csbench_demo.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "services" / "csbench" / "demo_campaign.json"
CAMPAIGN = "camp-5e1f0c2a"
CLOCK = "2026-11-20 14:12:00"
SMOKE_TASKS = [{"task_id": "suite:swe-bench", "params": {
    "agent_kind": "oracle",
    "instance_ids": ["django__django-11099", "sympy__sympy-20590", "pytest-dev__pytest-7205"]}}]


def generate() -> None:
    sys.path.insert(0, str(ROOT))
    from clousight_bench.core.campaign import prod_submit
    from clousight_bench.core.campaign.channel import CampaignChannel

    from tests.support.csbench_standin import DirBlobStore, build_campaign

    with tempfile.TemporaryDirectory() as tmp:
        bucket, results, dest = Path(tmp, "bucket"), Path(tmp, "controller-results"), Path(tmp, "fetched")
        build_campaign(bucket, results, CAMPAIGN, SMOKE_TASKS)
        channel = CampaignChannel(DirBlobStore(bucket), CAMPAIGN)
        prod_submit.fetch(channel, dest)
        files = {p.name: p.read_text(encoding="utf-8") for p in sorted(dest.iterdir()) if p.suffix == ".json"}
        files["controller.log"] = "".join(line + "\n" for line in prod_submit.logs(channel))
        BUNDLE.write_text(json.dumps({"campaign_id": CAMPAIGN, "clock": CLOCK, "files": files}, indent=1,
                                     ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {BUNDLE} ({len(files)} file(s))")


def main() -> int:
    if os.environ.get("CSBENCH_DEMO_CLOCKED") == "1":
        generate()
        return 0
    faketime = shutil.which("faketime")
    if faketime is None:
        sys.stderr.write("csbench_demo: needs libfaketime's `faketime` (apt-get install faketime)\n")
        return 2
    env = {**os.environ, "TZ": "UTC", "CSBENCH_DEMO_CLOCKED": "1"}
    return subprocess.call([faketime, CLOCK, sys.executable, __file__], env=env)


if __name__ == "__main__":
    raise SystemExit(main())
