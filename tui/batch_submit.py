"""`evaldesk --batch submit [PLAN…] [--apply]`: `csbench submit` of a plan, headless.

PLAN is a csbench submit plan (`configs/*.plan.yaml`); with none, the `[csbench] plans` of the
config. Each is planned through the remediation registry (`csbench_submit`): the runbook's
preflight runs, and the preview names the exact command and what it bills. Without `--apply`
nothing is submitted. A failing preflight item refuses the submit — including suite tasks on a
local config that is not `target.mode: real`, which only the console's dialog can accept (by
typing the word). Exit 0 when every plan was submitted (or the dry run found nothing in the
way), 1 for a refused or failed submit, 2 for usage errors.

`--format json` prints `{"plans": [P, …]}`, each P `{"id", "plan", "command", "cwd", "preflight":
[{"id", "title", "status", "evidence", "fix", "word"}], "blocked", "applied", "record", "campaign",
"message"}`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from services.core.config import Config
from services.core.journal import Journal
from services.core.registry import backend
from services.core.source import Source
from services.core.text import term_safe
from services.remediations import registry
from services.remediations.base import WritePath
from services.remediations.errors import StepFailed, WriteRefused

if TYPE_CHECKING:
    from rich.console import Console

EXIT_OK, EXIT_ACTION, EXIT_USAGE = 0, 1, 2
ProgressFn = Any


def _entry(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": None, "plan": None, "command": None, "cwd": None, "preflight": [], "blocked": None,
                            "applied": False, "record": None, "campaign": None, "message": "", "preview": []}
    base.update(kw)
    return base


async def _one(args: Any, config: Config, csbench: Any, source: Source, path: str, progress: ProgressFn,
               write_path: WritePath) -> dict[str, Any]:
    action = csbench.SUBMIT
    snap = await source.scan()
    exp = next((e for e in snap.experiments if csbench.plan_of(e, path)), None)
    if exp is None:
        return _entry(plan=path, message=f"{path}: not read")
    progress(0, None, f"preflight of {exp.id}")
    plan = await registry.plan(action, exp, source, config, datetime.now(UTC))
    found = _entry(id=exp.id, plan=path, command=plan.meta.get("command"), cwd=plan.meta.get("cwd"),
                   preflight=plan.meta.get("preflight", []), blocked=plan.blocked, preview=list(plan.preview))
    if plan.blocked:
        found["message"] = f"refused, nothing was submitted: {plan.blocked}"
        return found
    if not args.apply:
        found["message"] = "dry run: nothing was submitted; add --apply to submit (it bills from terraform apply on)"
        return found
    try:
        record = await registry.apply(action, plan, exp.id, source, config, write_path,
                                      progress=lambda i, n, m: progress(i, n, m))
    except (WriteRefused, StepFailed) as exc:
        found["message"] = str(exc)
        return found
    result = next(iter(record.results.values()), {})
    cid = csbench.campaign_submitted(str(result.get("stdout_tail", "")))
    found.update(applied=True, record=record.id, campaign=cid,
                 message=(f"submitted as {cid}: follow it with `evaldesk --batch list csbench://{cid}`, tear it down "
                          f"when it is over" if cid else "submitted, but csbench printed no campaign id"))
    return found


async def run_submit(args: Any, config: Config, fmt: str, progress: ProgressFn, console: Console,
                     out: IO[str], err: IO[str]) -> int:
    csbench: Any = backend("csbench")  # its submit helpers are not part of every backend
    sources, why = csbench.submit_sources(config, list(args.sources))
    if why:
        err.write(f"evaldesk: {why}\n")
        return EXIT_USAGE
    write_path = WritePath(Journal(config.journal_path), read_only=bool(args.read_only or config.read_only))
    done = []
    for path, source in sources:
        try:
            done.append(await _one(args, config, csbench, source, path, progress, write_path))
        finally:
            await source.close()
    ok = all(d["applied"] if args.apply else d["blocked"] is None for d in done)
    if fmt in ("json", "jsonl"):
        out.write(json.dumps({"plans": done}, ensure_ascii=False, default=str) + "\n")
    else:
        for d in done:
            for line in d["preview"]:
                console.print(term_safe(line), highlight=False, markup=False)
            console.print(term_safe(f"{d['id'] or d['plan']}: {d['message']}"), highlight=False, markup=False)
    return EXIT_OK if ok else EXIT_ACTION
