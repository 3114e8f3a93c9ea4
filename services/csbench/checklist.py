"""The audit of a csbench campaign: the smoke runbook's 8-item real-run checklist, mock-vs-real,
the state of the campaign and its tasks, artifact hashes, and the teardown reminder.

Every check reads what the scan gathered (records, their manifests and artifact hashes, the
controller log, `csbench status`, evaldesk's teardown records) and says pass/warn/fail/skip
with the evidence a person can verify. A check that cannot be decided from what evaldesk can
read says skip and where to look instead. Pure: no file is read here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from datetime import datetime

from services.core.models import AuditReport, Check, CheckStatus, Experiment, State, report_trials
from services.core.policy import Policy
from services.csbench.formats import Record
from services.csbench.model import CampaignExperiment, CampaignFacts, PlanExperiment, RunFacts, RunTrial

PASS, WARN, FAIL, SKIP = CheckStatus.pass_, CheckStatus.warn, CheckStatus.fail, CheckStatus.skip
TEARDOWN = "csbench_teardown"
FETCH = "csbench_fetch"
SUBMIT = "csbench_submit"

# the runbook's expectations (seed 002)
MODEL_LABELS = {"oracle": "csbench-oracle-agent", "llm": "csbench-qwen-agent"}
SCAFFOLD_KIND = {"oracle@slice2": "oracle", "qwen-llm@slice2": "llm", "mock-agent@slice1": "mock"}
DISK_GIB = 120  # driver.system_disk_size in the smoke plan
REPORT_KEYS = ("resolved_instances", "total_instances", "resolved_ids")

_HF_MIRROR = re.compile(r"hf-mirror\.com|HF_ENDPOINT", re.I)
_HF_DIRECT = re.compile(r"huggingface\.co", re.I)
_NET_FAIL = re.compile(r"timed? ?out|timeout|max retries|connectionerror|unreachable|connection (refused|reset)|"
                       r"\b(403|429|502|503)\b", re.I)
_DATASET = re.compile(r"SWE-bench(_Verified|_Lite|_Multimodal)?", re.I)
_NO_SPACE = re.compile(r"no space left on device", re.I)
_DOCKER_IMAGES = re.compile(r"^\s*Images\s+(\d+)\s+(\d+)\s+([\d.]+)\s*([kKMGT]?)i?B\b")
_CONTAINER = re.compile(r"sweb\.eval\.([A-Za-z0-9_.\-]+?)\.(csbench-[0-9a-f]{8})\b")
_HARNESS_FAILED = re.compile(r"swebench harness failed \(exit (-?\d+)\): \.\.\.(.*)", re.S)
_UNITS = {"": 1 / 1024**3, "K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0, "T": 1024.0}


def harness_run_id(instance_ids: Iterable[str]) -> str:
    """The harness run id csbench derives for a set of instances (`csbench-<8 hex>`): the
    container names and teardown filter `sweb.eval.<iid>.<run_id>` carry it."""
    return "csbench-" + hashlib.sha256(json.dumps(sorted(instance_ids)).encode()).hexdigest()[:8]


def _c(check_id: str, title: str, status: CheckStatus, evidence: str, action: str | None = None,
       remediation: str | None = None) -> Check:
    return Check(id=check_id, title=title, status=status, evidence=evidence, action=action, remediation=remediation)


def _runs(exp: CampaignExperiment) -> list[RunFacts]:
    return [t.run for t in exp.trials if isinstance(t, RunTrial)]


def _records(exp: CampaignExperiment) -> list[Record]:
    return [r.record for r in _runs(exp) if r.record is not None]


def _swe(records: list[Record]) -> list[Record]:
    return [r for r in records if r.suite_id.startswith("swe-bench")]


def _lines(facts: CampaignFacts, pattern: re.Pattern[str]) -> list[str]:
    return [ln for ln in (facts.logs or []) if pattern.search(ln)]


def _quote(line: str, n: int = 110) -> str:
    line = " ".join(line.split())
    return f"“{line[:n]}{'…' if len(line) > n else ''}”"


def _all_errors(records: list[Record]) -> list[str]:
    return [f"{e.stage} {e.code}: {e.message}" for r in records for e in r.errors]


def _error_with(records: list[Record], needle: str) -> str | None:
    return next((m for m in _all_errors(records) if needle in m), None)


def _simulated(records: list[Record]) -> list[Record]:
    return [r for r in records if r.environment.execution == "simulated"]


def _live(records: list[Record]) -> list[Record]:
    return [r for r in records if r.environment.execution == "live"]


def _meant_real(facts: CampaignFacts) -> bool:
    return bool(facts.expect_real) or facts.cloud


# ---- campaign and tasks ------------------------------------------------------------------------

def check_state(exp: CampaignExperiment) -> Check:
    f = exp.facts
    title = "Campaign finished"
    st = f.status
    if f.origin == "cloud" and st is None:
        return _c("campaign_state", title, FAIL, f"csbench status failed: {f.status_error or 'no answer'}",
                  "fix the csbench config (target.blob_bucket, target.region, credentials) and refresh")
    counts = ", ".join(f"{k} {v}" for k, v in sorted((st.counts if st else {}).items())) or "no counts"
    said = ""
    if f.origin == "fetched" and st is not None and f.fetch is not None and f.fetch.at is not None:
        said = f" (csbench status when evaldesk fetched it, {f.fetch.at:%Y-%m-%d %H:%M} UTC)"
    no_campaign = f.origin == "run-plan" and not f.tasks
    if exp.state == State.finished and no_campaign and not exp.counts.total:
        # 0 of 0 is not a finished campaign: nothing was read that says what ran
        why = "; ".join(exp.problems[:3]) or "no campaign file and no record"
        return _c("campaign_state", title, FAIL, f"nothing measured to finalize: {why}",
                  "look at the files named (a campaign file lists its tasks), or point evaldesk at the results dir "
                  "of a run-plan that has started")
    if exp.state == State.finished:
        where = f"DONE marker; {counts}{said}" if st else (
            "fetched results" if f.origin == "fetched" else
            f"no campaign file, {exp.counts.valid} of {exp.counts.expected} measured run(s) completed (csbench "
            "progress finds no campaign here)" if no_campaign else f"every task slot of {exp.id} completed")
        return _c("campaign_state", title, WARN if no_campaign else PASS, where,
                  "nothing says whether the plan had more tasks: read the run-plan's output" if no_campaign else None)
    if f.stale:
        word = "killed" if exp.state_raw == "killed" else "stale"
        return _c("campaign_state", title, FAIL, f"{word}: {f.stale}" + (f"; {counts}" if st else ""),
                  "read the controller log (csbench logs), then tear the campaign down" if f.cloud else
                  "re-run the unfinished tasks (csbench run-plan; a plan's finished runs are kept with "
                  "csbench run --plan-id PLAN --resume)")
    if exp.state == State.failed:
        where = f"FAILED marker; {counts}{said}" if st else f"{exp.counts.errored} task run(s) failed"
        return _c("campaign_state", title, FAIL, where, "read the failed tasks' errors (trials), fix and re-run")
    if exp.state == State.pending:
        return _c("campaign_state", title, WARN,
                  f"no task has started ({counts})" if st else "no task has started",
                  "wait for the controller to claim the campaign, then re-audit")
    hb = f" · heartbeat {st.heartbeat_age_s:.0f} s ago" if st and st.heartbeat_age_s is not None else ""
    current = f" · current task {st.current_task}" if st and st.current_task else ""
    return _c("campaign_state", title, WARN, f"running: {counts}{current}{hb}" if st else "running",
              "wait for DONE/FAILED, then re-audit")


def _warmups(exp: CampaignExperiment) -> str:
    n = len(exp.facts.warmups)
    return f" ({n} warm-up run(s) left out, as csbench's status_counts leave them)" if n else ""


def check_tasks(exp: CampaignExperiment) -> Check:
    title = "Every task completed"
    runs = _runs(exp)
    bad = [r for r in runs if r.record is not None and not r.record.ok]
    no_record = [r for r in runs if r.record is None and r.task_status in ("failed", "completed", "killed")]
    expected = exp.counts.expected or 0
    done = exp.counts.total
    valid = exp.counts.valid
    what = "task(s)" if exp.facts.cloud else "measured run(s)"
    if not runs and not expected:
        return _c("tasks", title, SKIP, "no task runs yet")
    if bad or no_record or exp.counts.errored:
        parts = []
        for r in bad[:3]:
            first = r.record.errors[0] if r.record and r.record.errors else None
            why = f"{first.stage} {first.code}: {first.message[:120]}" if first else "no error recorded"
            parts.append(f"{r.record.identity.task_id if r.record else '?'} {r.task_status} ({why})")
        for r in no_record[:3]:
            parts.append(f"{r.key} {r.task_status}: {(r.task_error or r.stale or r.note or '')[:140]}")
        n = max(len(bad) + len(no_record), exp.counts.errored)
        return _c("tasks", title, FAIL, f"{valid} of {expected} {what} completed, {n} did not: " + "; ".join(parts)
                  + _warmups(exp), "read each failure in the trials view (diagnose), fix the cause, re-run")
    if valid < expected:
        if exp.facts.stale:
            return _c("tasks", title, FAIL, f"{valid} of {expected} {what} completed; the rest will not run: "
                      f"{exp.facts.stale}" + _warmups(exp), "re-run the unfinished tasks")
        return _c("tasks", title, WARN, f"{valid} of {expected} {what} completed ({done} finished)" + _warmups(exp),
                  "wait, then re-audit")
    return _c("tasks", title, PASS, f"{valid} of {expected} {what} completed" + _warmups(exp))


def check_artifacts(exp: CampaignExperiment) -> Check:
    title = "Artifacts match their sha256"
    runs = [r for r in _runs(exp) if r.record is not None]
    checks = [a for r in runs for a in r.artifacts]
    if not checks:
        manifests = sum(len(r.record.observations.manifest) for r in runs if r.record)
        if manifests and not any(r.artifacts_local for r in runs):
            return _c("artifacts", title, SKIP, f"{manifests} artifact(s) in the manifests, none on this disk "
                      "(csbench fetch brings records and parquet only)")
        return _c("artifacts", title, SKIP, "no artifact manifest to check")
    bad = [a for a in checks if a.status == "mismatch"]
    gone = [a for a in checks if a.status in ("missing", "unreadable")]
    if bad:
        first = bad[0]
        return _c("artifacts", title, FAIL,
                  f"{len(bad)} of {len(checks)} artifact(s) differ from the manifest: {first.rel} is "
                  f"{(first.actual or '')[:19]}…, the record says {first.expected[:19]}…",
                  "the artifact changed after the run: treat the record's numbers as unverified; re-run")
    if gone:
        return _c("artifacts", title, WARN, f"{len(gone)} of {len(checks)} artifact(s) missing or unreadable: "
                  + ", ".join(a.rel for a in gone[:3]), "restore the artifacts/ tree or re-run")
    return _c("artifacts", title, PASS, f"{len(checks)} artifact(s) of {len(runs)} run(s) hash as recorded")


def check_fetched(exp: CampaignExperiment) -> Check | None:
    f = exp.facts
    if f.origin != "cloud":
        return None
    title = "Results fetched"
    completed = f.status.counts.get("completed", 0) if f.status else 0
    have = sum(1 for r in _runs(exp) if r.record is not None)
    if not completed:
        return _c("fetched", title, SKIP, "no completed task to fetch yet")
    if have >= completed:
        return _c("fetched", title, PASS, f"{have} record(s) in {f.results_dir}")
    return _c("fetched", title, WARN, f"{completed} task(s) completed on the controller, {have} record(s) fetched",
              f"csbench fetch {f.campaign_id} --dest {f.results_dir}", FETCH)


# ---- mock vs real ------------------------------------------------------------------------------

def check_mock(exp: CampaignExperiment) -> Check:
    title = "A real run, not a mock"
    f = exp.facts
    records = _records(exp)
    if not records:
        return _c("mock_vs_real", title, SKIP, "no record yet")
    sim = _simulated(records)
    scaff = sorted({r.provenance.scaffold for r in sim if r.provenance.scaffold})
    if not _meant_real(f):
        if sim:
            return _c("mock_vs_real", title, SKIP, f"{len(sim)} of {len(records)} run(s) simulated on "
                      f"{f.platform or 'a local platform'}: a dev run, where mock is the point")
        return _c("mock_vs_real", title, PASS, f"{len(records)} run(s) live")
    if sim:
        where = ", ".join(sorted({f'{r.environment.mode}/{r.identity.adapter}' for r in sim}))
        return _c("mock_vs_real", title, FAIL,
                  f"you paid for a mock: {len(sim)} of {len(records)} run(s) have environment.execution = "
                  f"simulated ({where}; scaffold {', '.join(scaff) or '?'}) — target.mode was not real",
                  "set target.mode: real in the local csbench config and submit again")
    return _c("mock_vs_real", title, PASS, f"{len(records)} run(s) live (environment.execution = live)")


# ---- the runbook's 8 items -----------------------------------------------------------------------

def _not_swe(records: list[Record]) -> str:
    return "no SWE-bench suite run in this campaign" if records else "no record yet"


def item1_report(exp: CampaignExperiment) -> Check:
    title = "1 Harness report file name and keys"
    cid = "harness_report"
    swe = _swe(_records(exp))
    if not swe:
        return _c(cid, title, SKIP, _not_swe(_records(exp)))
    drift = _error_with(swe, "unrecognized swebench report shape")
    if drift:
        return _c(cid, title, FAIL, drift[:300], "pin a swebench version whose report has "
                  + "/".join(REPORT_KEYS))
    missing = _error_with(swe, "expected harness report")
    if missing:
        return _c(cid, title, FAIL, missing[:300], "the report landed under another name: check the model name "
                  "(slashes become __) and swebench>=3.0")
    live = [r for r in _live(swe) if r.ok]
    if not live:
        return _c(cid, title, SKIP, "the harness did not run: every SWE-bench run here is simulated (canned "
                  "results.json)")
    r = live[0]
    primary = r.primary()
    kind = SCAFFOLD_KIND.get(r.provenance.scaffold, "")
    name = MODEL_LABELS.get(kind, "<model>")
    return _c(cid, title, PASS, f"report {name}.<run_id>.json read with keys {'/'.join(REPORT_KEYS)} and "
              f"normalised: {primary[0] if primary else 'a measurement'} = "
              f"{primary[1].value if primary else '?'} in {len(live)} live run(s)")


def item2_hf(exp: CampaignExperiment) -> Check:
    title = "2 Dataset via the HF mirror"
    cid = "hf_mirror"
    f = exp.facts
    swe = _swe(_records(exp))
    if not swe and f.origin != "cloud":
        return _c(cid, title, SKIP, _not_swe(_records(exp)))
    if swe and not _live(swe):
        return _c(cid, title, SKIP, "simulated runs download no dataset")
    if f.logs is None:
        return _c(cid, title, SKIP, "no controller log read (csbench logs, or controller.log beside the "
                  "records); confirm the download went through hf-mirror.com on the driver")
    direct_fail = [ln for ln in _lines(f, _HF_DIRECT) if _NET_FAIL.search(ln)]
    if direct_fail:
        return _c(cid, title, FAIL, f"the dataset went to huggingface.co and failed: {_quote(direct_fail[0])}",
                  "set driver.hf_endpoint: https://hf-mirror.com in the plan and submit again")
    mirror = _lines(f, _HF_MIRROR)
    if mirror:
        return _c(cid, title, PASS, f"{_quote(mirror[0])} ({f.logs_from or 'log'})")
    direct = [ln for ln in _lines(f, _HF_DIRECT) if _DATASET.search(ln)]
    if direct:
        return _c(cid, title, WARN, f"downloaded from huggingface.co, not the mirror: {_quote(direct[0])}",
                  "pin driver.hf_endpoint: https://hf-mirror.com (huggingface.co is unreliable from cn regions)")
    return _c(cid, title, SKIP, f"the controller log ({len(f.logs)} line(s)) names no dataset download; confirm "
              "princeton-nlp/SWE-bench_Verified came through hf-mirror.com on the driver")


def item3_oracle(exp: CampaignExperiment) -> Check:
    title = "3 oracle → resolved == 1.0"
    cid = "oracle_resolved"
    swe = _swe(_records(exp))
    if not swe:
        return _c(cid, title, SKIP, _not_swe(_records(exp)))
    oracle = [r for r in swe if SCAFFOLD_KIND.get(r.provenance.scaffold) == "oracle"]
    if not oracle:
        scaffolds = sorted({r.provenance.scaffold or "?" for r in swe})
        if scaffolds == ["mock-agent@slice1"]:
            vals = [f"{m.value:.3f}" for r in swe if (m := r.measurements.get(f"{r.suite_id}.resolved")) and m.value
                    is not None]
            return _c(cid, title, SKIP, f"mock agent (scaffold mock-agent@slice1): resolved {', '.join(vals) or '?'}"
                      " is a canned fixture, not a gold-patch replay")
        return _c(cid, title, SKIP, f"not an oracle run (scaffold {', '.join(scaffolds)}): any resolved value is a "
                  "real result")
    short = []
    for r in oracle:
        m = r.measurements.get(f"{r.suite_id}.resolved")
        if not r.ok or m is None or m.value is None or m.value < 1.0:
            pred = r.observations.manifest.get("predictions")
            rows = pred.rows if pred is not None else None
            shown = "no value" if m is None or m.value is None else f"{m.value:.3f}"
            short.append(f"{r.run.run_id}: resolved {shown}" + (f" of {rows} instance(s)" if rows else "")
                         + ("" if r.ok else f" ({r.status})"))
    if short:
        return _c(cid, title, FAIL, "gold-patch replay must resolve every instance: " + "; ".join(short[:3]),
                  "an environment or harness problem, never agent quality: read the harness output and the driver")
    return _c(cid, title, PASS, f"{len(oracle)} oracle run(s) resolved 1.0 (scaffold oracle@slice2)")


def item4_docker(exp: CampaignExperiment) -> Check:
    title = "4 Docker image room"
    cid = "docker_room"
    f = exp.facts
    records = _records(exp)
    full = _lines(f, _NO_SPACE) or [m for m in _all_errors(records) if _NO_SPACE.search(m)]
    if full:
        return _c(cid, title, FAIL, f"the driver ran out of disk: {_quote(full[0])}",
                  f"raise driver.system_disk_size (the smoke plan uses {DISK_GIB} GiB) and submit again")
    for ln in f.logs or []:
        m = _DOCKER_IMAGES.match(ln)
        if m:
            gib = float(m.group(3)) * _UNITS[m.group(4).upper()]
            share = gib / DISK_GIB
            status = WARN if share > 0.8 else PASS
            return _c(cid, title, status, f"docker system df: images {gib:.1f} GiB of a {DISK_GIB} GiB disk "
                      f"({100 * share:.0f}%)", "raise driver.system_disk_size" if status == WARN else None)
    return _c(cid, title, SKIP, "no `docker system df` output in the controller log; check it on the driver")


def item5_python(exp: CampaignExperiment) -> Check:
    title = "5 sys.executable imports swebench"
    cid = "swebench_importable"
    swe = _swe(_records(exp))
    if not swe:
        return _c(cid, title, SKIP, _not_swe(_records(exp)))
    missing = _error_with(swe, "swebench extra not installed") or _error_with(swe, "No module named 'swebench'")
    if missing:
        return _c(cid, title, FAIL, missing[:300], "a suite: task must pull the [swebench] extra into the "
                  "controller's python3.11 (csbench submit does it for plans with suite: tasks)")
    live = [r for r in _live(swe) if r.ok and r.measurements]
    if live:
        return _c(cid, title, PASS, f"{len(live)} live run(s) ran `sys.executable -m "
                  "swebench.harness.run_evaluation` and scored")
    return _c(cid, title, SKIP, "the harness did not run (simulated)")


def item6_placement(exp: CampaignExperiment) -> Check:
    title = "6 Driver placement local"
    cid = "placement_local"
    swe = _swe(_records(exp))
    if not swe:
        return _c(cid, title, SKIP, _not_swe(_records(exp)))
    bad = _error_with(swe, "driver.placement must be 'local'")
    if bad:
        return _c(cid, title, FAIL, bad[:300], "the harness containers must run where Docker is: placement local")
    live = [r for r in _live(swe) if r.ok and r.measurements]
    if live:
        return _c(cid, title, PASS, "the suite accepted the placement (it refuses anything but local) in "
                  f"{len(live)} live run(s)")
    return _c(cid, title, SKIP, "the harness did not run (simulated)")


def item7_containers(exp: CampaignExperiment) -> Check:
    title = "7 Containers named for this run"
    cid = "container_naming"
    f = exp.facts
    swe_runs = [r for r in _runs(exp) if r.record is not None and r.record.suite_id.startswith("swe-bench")]
    if not swe_runs:
        return _c(cid, title, SKIP, _not_swe(_records(exp)))
    expected = {harness_run_id(r.instance_ids): r.instance_ids for r in swe_runs if r.instance_ids}
    names = [(m.group(1), m.group(2)) for ln in f.logs or [] for m in _CONTAINER.finditer(ln)]
    if not names:
        hint = f" (expect sweb.eval.<instance>.{next(iter(expected))})" if expected else ""
        if not _live([r.record for r in swe_runs if r.record]):
            return _c(cid, title, SKIP, "simulated runs start no containers" + hint)
        return _c(cid, title, SKIP, "no harness container names in the controller log; on the driver: "
                  f"docker ps -a --filter name=csbench-{hint}")
    strangers = [f"sweb.eval.{iid}.{rid}" for iid, rid in names if expected and rid not in expected]
    if strangers:
        return _c(cid, title, FAIL, f"{len(strangers)} container(s) carry another run id: {strangers[0]} "
                  f"(this run: {', '.join(sorted(expected))})",
                  "teardown filters docker ps by the run id: these would be missed, or another run's reaped")
    rids = sorted({rid for _, rid in names})
    return _c(cid, title, PASS, f"{len(names)} container name(s) end in {', '.join(rids)}"
              + (" = sha256 of this run's instance ids" if expected else ""))


def item8_stderr(exp: CampaignExperiment) -> Check:
    title = "8 Harness stderr surfaced on failure"
    cid = "harness_stderr"
    f = exp.facts
    records = _swe(_records(exp))
    harness = [m for m in _all_errors(records) if "swebench harness failed" in m]
    if harness:
        bare = []
        for msg in harness:
            m = _HARNESS_FAILED.search(msg)
            tail = m.group(2).strip() if m else ""
            if not tail:
                bare.append(msg)
        if bare:
            return _c(cid, title, FAIL, f"a harness failure carries only its exit code: {_quote(bare[0])}",
                      "the error must end with the last 2000 characters of the harness stderr")
        last = _HARNESS_FAILED.search(harness[0])
        tail_line = (last.group(2).strip().splitlines() or [""])[-1] if last else ""
        return _c(cid, title, PASS, f"{len(harness)} harness failure(s) carry the stderr tail, e.g. "
                  f"{_quote(tail_line, 90)}")
    failed = [r for r in _runs(exp) if r.task_status in ("failed", "invalid") or (r.record and not r.record.ok)]
    if failed and all(r.record is None for r in failed) and f.origin == "cloud":
        return _c(cid, title, SKIP, f"{len(failed)} task(s) failed on the controller, whose records csbench does "
                  "not upload (status gives counts only): read the error in the campaign manifest on OSS")
    if failed:
        return _c(cid, title, SKIP, f"{len(failed)} failure(s), none in the harness (the harness did not run)")
    return _c(cid, title, SKIP, "no harness failure to look at")


# ---- teardown ------------------------------------------------------------------------------------

def check_teardown(exp: CampaignExperiment) -> Check | None:
    f = exp.facts
    if not f.cloud:
        return None
    title = "Cloud resources torn down"
    cid = f.campaign_id
    command = f.teardown_command or f"csbench teardown {cid or '<campaign id>'} --config <csbench config>"
    runnable = TEARDOWN if cid else None
    mark = f.teardown
    if mark is not None and mark.destroyed:
        when = f"{mark.at:%Y-%m-%d %H:%M} UTC" if mark.at else "?"
        return _c("teardown", title, PASS, f"torn down {when} (record {mark.record_id}): "
                  f"{{'destroyed': True, 'residual_deleted': {mark.residual_deleted!r}}}")
    if not f.over:
        return _c("teardown", title, SKIP, "the campaign is still running; the controller reaps itself when done "
                  "and teardown is the backstop")
    why = {"DONE": "is DONE", "FAILED": "FAILED"}.get(f.status.done or "", "") if f.status else ""
    why = why or ("is stale" if f.stale else "was fetched")
    if mark is not None:
        out = mark.output.strip().splitlines()[-1:] or ["no output"]
        return _c("teardown", title, WARN, f"the last teardown (record {mark.record_id}) did not destroy everything: "
                  f"{out[0][:160]} — NAT and EIP bill by the hour", f"run it again: {command}", runnable)
    extra = f"; {f.teardown_problem}" if f.teardown_problem else ""
    return _c("teardown", title, WARN, f"the campaign {why} and no teardown is recorded: NAT and EIP bill by the "
              f"hour{extra}", command, runnable)


# ---- the report --------------------------------------------------------------------------------

def audit_campaign(exp: Experiment, policy: Policy, now: datetime) -> AuditReport:
    if not isinstance(exp, CampaignExperiment):
        return AuditReport(
            id=exp.id, source=exp.source, path=exp.path, state=exp.state, state_raw=exp.state_raw, model=exp.model,
            benchmark=exp.benchmark, score=exp.score, trials={}, valid_fraction=None, error_fraction=None,
            checks=[_c("campaign_state", "Campaign read", SKIP, "this experiment was not read by the csbench source")],
            verdict="investigate",
        )
    state = check_state(exp)
    tasks = check_tasks(exp)
    arts = check_artifacts(exp)
    mock = check_mock(exp)
    checks = [state, tasks]
    fetched = check_fetched(exp)
    if fetched is not None:
        checks.append(fetched)
    checks += [arts, mock, item1_report(exp), item2_hf(exp), item3_oracle(exp), item4_docker(exp),
               item5_python(exp), item6_placement(exp), item7_containers(exp), item8_stderr(exp)]
    teardown = check_teardown(exp)
    if teardown is not None:
        checks.append(teardown)
    notes = _notes(exp, teardown, checks)
    c = exp.counts
    return AuditReport(
        id=exp.id, source=exp.source, path=exp.path, state=exp.state, state_raw=exp.state_raw, model=exp.model,
        benchmark=exp.benchmark, score=exp.score,
        trials=report_trials(c),
        valid_fraction=(c.valid / c.expected) if c.expected else None,
        error_fraction=(c.errored / c.total) if c.total else None,
        # the verdict is services.audit.verdict.decide's, over these checks and any enrichment's
        checks=checks, verdict="investigate", notes=notes,
    )


def _notes(exp: CampaignExperiment, teardown: Check | None, checks: list[Check]) -> list[str]:
    notes: list[str] = []
    f = exp.facts
    if f.warmups:
        notes.append(f"{len(f.warmups)} warm-up run(s) are not measurements: left out of the counts and the score, "
                     "as csbench leaves them out of a plan's statistics")
    if teardown is not None and teardown.status == WARN:
        notes.append("Tear the campaign down first: its controller's NAT gateway and EIP bill by the hour.")
    if any(c.id == "mock_vs_real" and c.status == FAIL for c in checks):
        notes.append("Its numbers come from csbench's canned fixtures, not from a real run: do not publish them; "
                     "submit again with target.mode: real.")
    if exp.eval_key and exp.score is not None:
        notes.append(f"score = mean {exp.eval_key} over {exp.counts.valid} completed run(s)")
    scaffolds = sorted({r.provenance.scaffold for r in _records(exp) if r.provenance.scaffold})
    if scaffolds:
        notes.append(f"provenance: scaffold {', '.join(scaffolds)}; the runbook expects oracle@slice2 (oracle) or "
                     "qwen-llm@slice2 (llm) from a real run")
    if f.origin == "cloud" and f.status is not None and f.status.counts.get("failed"):
        notes.append("csbench uploads records of completed tasks only: a failed task's error stays in the campaign "
                     "manifest on OSS (status shows counts)")
    for p in exp.problems:
        notes.append(f"read problem: {p}")
    return notes


# ---- a submit plan, before it pays ------------------------------------------------------------

def check_submitted(exp: PlanExperiment) -> Check:
    p = exp.plan
    title = "Submitted"
    live = [m for m in p.submitted if m.campaign_id and not p.torn_down.get(m.campaign_id)]
    if live:
        m = live[0]
        when = f"{m.at:%Y-%m-%d %H:%M} UTC" if m.at else "?"
        return _c("submitted", title, PASS, f"submitted as {m.campaign_id} at {when} (record {m.record_id}); the "
                  "campaign is followed in its own row")
    hard = [i for i in p.preflight if i.status == "fail" and not i.word]
    if hard:
        return _c("submitted", title, FAIL, f"not submitted: {len(hard)} preflight item(s) fail, first "
                  f"{hard[0].title}", hard[0].fix)
    worded = [i for i in p.preflight if i.status == "fail" and i.word]
    if worded:
        return _c("submitted", title, FAIL, f"not submitted: {worded[0].title} fails; only typing "
                  f"{worded[0].word} in the dialog submits it anyway", worded[0].fix, SUBMIT)
    return _c("submitted", title, WARN, "not submitted; the preflight passes", "submit it (x: the dialog shows the "
              "command and what it bills)", SUBMIT)


def audit_plan(exp: PlanExperiment) -> AuditReport:
    """The runbook's checks before paying, one row each, and the submit itself."""
    status = {"pass": PASS, "warn": WARN, "fail": FAIL, "skip": SKIP}
    submitted = check_submitted(exp)
    if submitted.status == PASS:
        # its campaign runs: the preflight speaks of the next submit, not of this one
        checks = [_c(i.id, i.title, SKIP, f"already submitted; before another submit: {i.status} — {i.evidence}")
                  for i in exp.plan.preflight]
    else:
        checks = [_c(i.id, i.title, status[i.status], i.evidence, i.fix if i.status in ("fail", "warn") else None)
                  for i in exp.plan.preflight]
    checks.append(submitted)
    notes = [f"csbench submit {exp.plan.plan_path} --config {exp.plan.config_path}: a controller ECS, NAT gateway "
             "and EIP bill by the hour from terraform apply until teardown"]
    return AuditReport(
        id=exp.id, source=exp.source, path=exp.path, state=exp.state, state_raw=exp.state_raw, model=exp.model,
        benchmark=exp.benchmark, score=None, trials=report_trials(exp.counts), valid_fraction=None,
        error_fraction=None, checks=checks, verdict="investigate", notes=notes,  # decided by decide()
    )
