"""How a csbench task run looks from the trials screen: a folder of files, and its diagnosis.

csbench spreads one run over its results dir (the record under `<domain>/<adapter>/`, the
artifacts under `artifacts/<subdir>/`, the live stream under `.progress/<run_id>/`) and a
cloud campaign's log lives on OSS. The console opens a trial's files as `<trial dir>/<name>`,
so `ViewFS` shows each run as `<experiment path>/@runs/<run key>/` holding the files below —
a read-only view onto csbench's own files (and onto the controller log evaldesk read with
`csbench logs`); nothing is copied and nothing named `@runs` exists on disk. Every other path
goes to the local disk unchanged, so the write path works on the same fs.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import posixpath
import time
from collections.abc import Sequence

from services.core.source import TrialEvidence, TrialFile
from services.csbench.assemble import VIEW_DIR
from services.csbench.formats import Record
from services.csbench.model import CampaignExperiment, RunFacts, RunTrial
from services.transport.fs import FileStat, LocalFS, NotRegularFile, TooLarge

TRIAL_FILES: tuple[TrialFile, ...] = (
    TrialFile("record", "record (JSON)", "record.json"),
    TrialFile("stream", "progress stream", "stream.jsonl"),
    TrialFile("results", "results artifact", "results.json"),
    TrialFile("trajectory", "trajectory artifact", "trajectory.jsonl"),
    TrialFile("log", "controller log", "controller.log"),
)

Target = str | bytes  # a real path, or content evaldesk holds (the controller log)


def view_entries(exp: CampaignExperiment) -> dict[str, Target]:
    """Virtual path → what it shows, for every trial of `exp`."""
    facts = exp.facts
    root = facts.results_dir
    logs: Target | None = None
    if facts.logs is not None:
        logs = ("\n".join(facts.logs) + ("\n" if facts.logs else "")).encode("utf-8", "replace")
    elif os.path.isfile(os.path.join(root, "controller.log")):
        logs = os.path.join(root, "controller.log")
    out: dict[str, Target] = {}
    for t in exp.trials:
        if not isinstance(t, RunTrial):
            continue
        base = posixpath.join(exp.path, VIEW_DIR, t.run.key)
        run = t.run
        if run.record_rel:
            out[f"{base}/record.json"] = os.path.join(root, run.record_rel)
        if run.progress_rel:
            out[f"{base}/stream.jsonl"] = os.path.join(root, run.progress_rel, "stream.jsonl")
        rec = run.record
        if rec is not None and rec.observations.artifacts_subdir:
            for name, file in (("results", "results.json"), ("trajectory", "trajectory.jsonl")):
                entry = rec.observations.manifest.get(name)
                if entry is not None and entry.path:
                    out[f"{base}/{file}"] = os.path.join(root, "artifacts", rec.observations.artifacts_subdir,
                                                         entry.path)
        if logs is not None:
            out[f"{base}/controller.log"] = logs
    return out


class ViewFS(LocalFS):
    """The local disk, plus the read-only `@runs/<key>/` view of each task run."""

    def __init__(self) -> None:
        super().__init__()
        self._views: dict[str, Target] = {}
        self._dirs: dict[str, list[str]] = {}

    def publish(self, entries: dict[str, Target]) -> None:
        dirs: dict[str, list[str]] = {}
        for path in entries:
            head, name = posixpath.split(path)
            dirs.setdefault(head, []).append(name)
            dirs.setdefault(posixpath.dirname(head), []).append(posixpath.basename(head))
        self._views = dict(entries)
        self._dirs = {d: sorted(set(names)) for d, names in dirs.items()}

    @staticmethod
    def _virtual(path: str) -> bool:
        return f"/{VIEW_DIR}/" in path or path.endswith(f"/{VIEW_DIR}")

    async def stat(self, path: str) -> FileStat | None:
        if not self._virtual(path):
            return await super().stat(path)
        target = self._views.get(path)
        if isinstance(target, bytes):
            return FileStat(len(target), time.time(), False)
        if isinstance(target, str):
            return await super().stat(target)
        if path in self._dirs:
            return FileStat(0, time.time(), True, False)
        return None

    def _target(self, path: str) -> Target:
        if not self._virtual(path):
            return path
        target = self._views.get(path)
        if target is None:
            raise FileNotFoundError(2, "no such file in this run's view", path)
        return target

    async def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        target = self._target(path)
        if isinstance(target, bytes):
            return target[offset:] if length is None else target[offset:offset + length]
        return await super().read_bytes(target, offset, length)

    async def read_regular(self, path: str, max_bytes: int, timeout_s: float = 30.0) -> bytes:
        target = self._target(path)
        if isinstance(target, bytes):
            if len(target) > max_bytes:
                raise TooLarge(f"{path}: over the {max_bytes:,} byte limit")
            return target
        return await super().read_regular(target, max_bytes, timeout_s)

    async def sha256(self, path: str, max_bytes: int) -> str | None:
        try:
            target = self._target(path)
        except FileNotFoundError:
            return None
        if isinstance(target, bytes):
            return hashlib.sha256(target).hexdigest()
        return await super().sha256(target, max_bytes)

    async def list_dir(self, path: str) -> list[str]:
        if self._virtual(path):
            if path in self._dirs:
                return list(self._dirs[path])
            raise FileNotFoundError(2, "no such dir in the view", path)
        return await super().list_dir(path)

    async def _refuse(self, path: str) -> None:
        if self._virtual(path):
            raise NotRegularFile(f"{path}: the run view is read-only")

    async def write_bytes_atomic(self, path: str, data: bytes) -> None:
        await self._refuse(path)
        await super().write_bytes_atomic(path, data)

    async def rename(self, src: str, dst: str) -> None:
        await self._refuse(src)
        await self._refuse(dst)
        await super().rename(src, dst)


# ---- the diagnose panel ----------------------------------------------------------------------

def _short(digest: str, n: int = 12) -> str:
    return digest.removeprefix("sha256:")[:n]


def _fmt_value(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.3e}"


def record_lines(rec: Record) -> list[str]:
    """Measurements, provenance, environment and stages of one record, for people."""
    lines = [f"status {rec.status} · schema {rec.schema_version or '?'} · {rec.identity.domain}/"
             f"{rec.identity.task_id} on {rec.identity.adapter} ({rec.identity.adapter_status or '?'})"]
    lines.append("measurements")
    if not rec.measurements:
        lines.append("  (none)")
    width = max((len(k) for k in rec.measurements), default=0)
    for name, m in sorted(rec.measurements.items()):
        flags = " ".join(x for x in ("official" if m.official else "", m.reproducibility_class) if x)
        lines.append(f"  {name:<{width}}  {_fmt_value(m.value)} {m.unit}  {flags}".rstrip())
    p = rec.provenance
    lines.append("provenance")
    lines.append(f"  suite {p.suite_id or '—'} · scaffold {p.scaffold or '—'} · evaluator {p.evaluator_id or '—'}"
                 f"{' (official)' if p.evaluator_official else ''}"
                 f"{'' if p.unmodified is None else (' · unmodified' if p.unmodified else ' · MODIFIED')}")
    if p.suite_version:
        lines.append(f"  suite_version {p.suite_version}")
    if p.dataset_digest:
        lines.append(f"  dataset_digest {p.dataset_digest}")
    e = rec.environment
    lines.append(f"environment {e.mode} · {e.execution}" + (f" · {e.region}" if e.region else ""))
    if rec.run.stages:
        parts = []
        for stage, state in rec.run.stages.items():
            ms = rec.run.stage_timings.get(stage)
            parts.append(f"{stage} {state}" + (f" {ms:.0f} ms" if ms is not None and ms >= 1 else ""))
        lines.append("stages")
        lines += [f"  {'  ·  '.join(parts[i:i + 4])}" for i in range(0, len(parts), 4)]
    for f in rec.findings[:5]:
        if isinstance(f, dict):
            lines.append(f"finding {f.get('severity', '?')} {f.get('code', '?')}: {f.get('summary', '')}")
    return lines


def artifact_lines(run: RunFacts) -> list[str]:
    if not run.artifacts:
        if run.record is not None and run.record.observations.manifest:
            where = "this results dir has no artifacts/ tree (csbench fetch brings records only)" \
                if not run.artifacts_local else "none listed"
            return [f"artifacts: {len(run.record.observations.manifest)} in the manifest, {where}"]
        return []
    lines = ["artifacts (sha256 checked on load)"]
    for a in run.artifacts:
        rows = f" ({a.rows} rows)" if a.rows is not None else ""
        if a.status == "ok":
            lines.append(f"  {a.rel}  ok {_short(a.expected)}{rows}")
        elif a.status == "mismatch":
            lines.append(f"  {a.rel}  MISMATCH: manifest {_short(a.expected)}, file {_short(a.actual or '')}")
        else:
            lines.append(f"  {a.rel}  {a.status.upper()}{': ' + a.detail if a.detail else ''}")
    return lines


def run_evidence(exp: CampaignExperiment, trial: RunTrial) -> TrialEvidence:
    run = trial.run
    rec = run.record
    ev = TrialEvidence(verifier_label="csbench record: measurements · provenance · stages")
    body: list[str] = []
    if rec is not None:
        if rec.errors:
            first = rec.errors[0]
            ev.exception_type = first.type or first.code or "error"
            ev.exception_message = f"{first.stage} {first.code}: {first.message}"
            ev.traceback = "\n".join(e.line() for e in rec.errors)
        body += record_lines(rec)
    else:
        body.append(f"task {trial.task_name}: {run.task_status}" + (f" — {run.note}" if run.note else ""))
        if run.task_error:
            ev.traceback = run.task_error
        if run.progress is not None:
            pr = run.progress
            body.append(f"progress: {pr.lifecycle_phase or '?'} · stage {pr.stage or '—'} · updated "
                        f"{pr.updated_at:%Y-%m-%d %H:%M:%S} · pid {pr.pid}" if pr.updated_at else
                        f"progress: {pr.lifecycle_phase or '?'} · stage {pr.stage or '—'}")
            if pr.stages:
                body.append("  " + "  ·  ".join(f"{k} {v}" for k, v in pr.stages.items()))
    if run.stale:
        body.append(f"stale: {run.stale}")
    body += artifact_lines(run)
    ev.problems += [f"{a.rel}: sha256 mismatch (manifest {_short(a.expected)}, file {_short(a.actual or '')})"
                    for a in run.artifacts if a.status == "mismatch"]
    ev.problems += [f"{a.rel}: {a.status}{' — ' + a.detail if a.detail else ''}" for a in run.artifacts
                    if a.status in ("missing", "unreadable")]
    if run.record_problem:
        ev.problems.append(run.record_problem)
    ev.verifier_excerpt = "\n".join(body)
    return ev


async def evidence_for(exp: object, trial: object) -> TrialEvidence:
    if isinstance(exp, CampaignExperiment) and isinstance(trial, RunTrial):
        return await asyncio.to_thread(run_evidence, exp, trial)
    return TrialEvidence(problems=["this trial was not read by the csbench source"])


def publish_all(fs: ViewFS, experiments: Sequence[object]) -> None:
    entries: dict[str, Target] = {}
    for exp in experiments:
        if isinstance(exp, CampaignExperiment):
            entries.update(view_entries(exp))
    fs.publish(entries)
