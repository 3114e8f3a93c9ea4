"""A stand-in `csbench` for the cloud commands: `submit`, `status`, `logs`, `fetch`, `teardown`.

The real commands talk to Aliyun OSS (oss2) and run terraform. This program is the real
`csbench` CLI (clousight-bench's own argument parser, `prod_submit` functions and printing)
with its cloud seams pointed elsewhere: the OSS bucket is a local dir (`target.blob_bucket`
in the csbench config names it), terraform is a recorder that appends its argv to
`<bucket>/terraform.log` and exits with `$CSBENCH_STANDIN_TF_RC` (default 0), and the private
wheel `submit` uploads is a URL into that dir. So `submit` writes the same launch spec and prints
the campaign id (and csbench's own warning on a mock target), `status` prints the same JSON
line, `teardown` the same Python dict, an unknown id the same empty counts, and `fetch` writes
the same files — from campaign objects that `build_campaign` writes with csbench's own
CampaignChannel and CampaignController (real records of a mock run).

With `$CSBENCH_STANDIN_LOG` set, every call appends `{"argv", "cwd", "env_names"}` to that file:
the names of the ALICLOUD_*/DASHSCOPE_* variables it was given, never their values.

    python tests/support/csbench_standin.py status camp-ab12cd34 --config cfg.yaml
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from clousight_bench.core.blobstore import BlobStore


class DirBlobStore(BlobStore):
    """An OSS bucket as a local dir: object key = relative path."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def put_object(self, key: str, data: bytes) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def get_object(self, key: str) -> bytes:
        path = self.root / key
        if not path.is_file():
            raise KeyError(key)
        return path.read_bytes()

    def list_prefix(self, prefix: str) -> list[str]:
        out = []
        for p in self.root.rglob("*"):
            if p.is_file():
                key = p.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    out.append(key)
        return sorted(out)

    def delete_object(self, key: str) -> None:
        (self.root / key).unlink(missing_ok=True)


# the lines clousight_bench.core.campaign.controller_main writes to the campaign log
BOOT_LOG = [
    "controller boot: python+import+oss OK",
    "claimed campaign; building controller+watchdog",
    "reaper armed (self=i-bp1d3m0c0ntr011er)",
    "built; starting orchestration loop + watchdog",
]


def build_campaign(bucket: Path, results: Path, campaign_id: str, tasks: list[dict[str, Any]],
                   target: dict[str, Any] | None = None, *, platform: str = "aliyun-agentrun",
                   extra_log: list[str] | None = None, heartbeat_age_s: float | None = None,
                   finish: bool = True) -> Any:
    """Run a campaign through csbench's own controller loop against `bucket`, offline: each task
    runs through the real orchestrator (target mode mock by default) and lands in the bucket the
    way a controller on ECS writes it (manifest, heartbeat, results, ledger, DONE/FAILED)."""
    from clousight_bench.core.campaign.channel import CampaignChannel
    from clousight_bench.core.campaign.controller import CampaignController
    from clousight_bench.core.campaign.controller_main import build_run_task
    from clousight_bench.core.campaign.spec import LaunchSpec

    channel = CampaignChannel(DirBlobStore(bucket), campaign_id)
    channel.write_launch(LaunchSpec(campaign_id=campaign_id, tasks=tasks, params={},
                                    target=dict(target or {"mode": "mock", "region": "cn-hangzhou"})))
    for line in BOOT_LOG:
        channel.append_log(line)
    for line in extra_log or []:
        channel.append_log(line)
    if finish:
        manifest = CampaignController(channel, build_run_task(platform, results)).run()
        channel.append_log("watchdog terminal: done")
    else:
        from clousight_bench.core.campaign.spec import CampaignManifest, TaskEntry

        manifest = CampaignManifest(campaign_id=campaign_id,
                                    tasks=[TaskEntry(task_id=str(t["task_id"])) for t in tasks])
        manifest.mark(manifest.tasks[0].task_id, "running")
        channel.write_manifest(manifest)
        channel.write_heartbeat(manifest.tasks[0].task_id, "run")
    if heartbeat_age_s is not None:
        hb_key = channel.prefix + "heartbeat.json"
        hb = json.loads(DirBlobStore(bucket).get_object(hb_key))
        hb["ts"] = hb["ts"] - heartbeat_age_s
        DirBlobStore(bucket).put_object(hb_key, json.dumps(hb).encode())
    return manifest


def write_config(path: Path, bucket: Path) -> Path:
    path.write_text("target:\n  provider: aliyun\n  region: cn-hangzhou\n"
                    f"  blob_bucket: {bucket}\n  mode: real\n", encoding="utf-8")
    return path


def write_executable(bin_dir: Path) -> Path:
    """A `csbench` program in `bin_dir` that runs this stand-in with this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "csbench"
    exe.write_text(f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = 'csbench'\n"
                   f"runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')\n", encoding="utf-8")
    exe.chmod(0o755)
    return exe


def main() -> int:
    from clousight_bench.cli import prod

    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    log = os.environ.get("CSBENCH_STANDIN_LOG")
    if log:
        names = sorted(n for n in os.environ if n.startswith(("ALICLOUD_", "DASHSCOPE_")))
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"argv": ["csbench", *sys.argv[1:]], "cwd": os.getcwd(), "env_names": names}) + "\n")
    if cmd not in ("submit", "status", "logs", "fetch", "teardown"):
        sys.stderr.write(f"csbench stand-in: {cmd!r} is not one of submit/status/logs/fetch/teardown\n")
        return 2

    def terraform() -> Any:
        def run(argv: list[str]) -> int:
            bucket = Path(os.environ.get("CSBENCH_STANDIN_BUCKET", "."))
            with open(bucket / "terraform.log", "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"argv": argv, "cwd": os.getcwd()}) + "\n")
            return int(os.environ.get("CSBENCH_STANDIN_TF_RC", "0"))

        return run

    def oss(target: dict[str, Any]) -> DirBlobStore:
        os.environ["CSBENCH_STANDIN_BUCKET"] = str(target.get("blob_bucket") or ".")
        return DirBlobStore(str(target.get("blob_bucket") or "."))

    def wheel(target: dict[str, Any]) -> Any:
        def build(campaign_id: str, needs_swebench: bool = False) -> tuple[str, list[str]]:
            url = f"file://{target.get('blob_bucket')}/wheels/{campaign_id}/clousight_bench.whl"
            return url, prod._controller_extra_deps(needs_swebench)

        return build

    prod._prod_oss = oss  # type: ignore[assignment]
    prod._terraform_runner = terraform
    prod._prod_wheel_builder = wheel
    prod._prod_runtime_deleter = lambda target: (lambda runtime_id: None)  # type: ignore[assignment]
    from clousight_bench.cli.app import main as csbench_main

    return int(csbench_main(sys.argv[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
