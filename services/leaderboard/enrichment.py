"""What the leaderboard knows about an experiment, as audit checks (an `Enrichment`).

It replaces the placeholder `traces` and `stale_rows` checks, sharpens `model_name` and
`benchmark_name` with the row's own view, and adds `registered`, `partial_registered` and
`free_disk`. Which row is the run's is `services.leaderboard.match`'s answer, the same for
every check and every fix. Each failing check names the remediation that fixes it — only when
the row is provably ours; otherwise it says whose row it is, or which rows it cannot tell
apart and why, and evaldesk touches none of them.

The view is read by whoever holds the leaderboard (the console's poller, `--batch` once) and
passed in; building checks never does IO. A view whose last read failed still answers, from
the rows last read, and every check says they are stale.
"""

from __future__ import annotations

from datetime import datetime

from services.audit.checks import FAIL, PASS, SKIP, WARN
from services.core.config import Config
from services.core.models import AuditReport, Check, CheckStatus, Experiment, State
from services.core.plain import copy_with
from services.core.policy import Policy
from services.core.times import as_utc
from services.leaderboard.match import LIVE, RunMatch, match
from services.leaderboard.rows import (
    FINISHED,
    REGISTERED,
    JobRow,
    LeaderboardView,
    TraceStatus,
    is_bogus_model,
    is_hash_benchmark,
    repo_id_from_url,
)
from services.leaderboard.traces import expected_repo

LEADERBOARD_CHECK_IDS = ("registered", "partial_registered", "traces", "model_name", "benchmark_name", "stale_rows",
                         "free_disk")


def complete(report: AuditReport) -> bool:
    """Registrable: finished, a sane score, ≥ 90 % valid, under the error gate, no duplicates."""
    ok = {c.id: c.status for c in report.checks}
    return all(ok.get(k) == PASS for k in ("finished", "score", "valid_count", "error_gate", "duplicates"))


def partial(report: AuditReport) -> bool:
    ok = {c.id: c.status for c in report.checks}
    return report.state == State.finished and (ok.get("valid_count") == FAIL or ok.get("error_gate") == FAIL)


def stale_rows(m: RunMatch, exp: Experiment, usernames: list[str], policy: Policy, now: datetime) -> list[JobRow]:
    """Own rows of the pair left unfinished longer than the policy allows. A live run's rows —
    every row the matcher names as the run's — are not cruft."""
    out = []
    limit = policy.stale_row_hours * 3600
    keep = {r.id for r in m.candidates} if exp.state in LIVE else set()
    for r in m.shown():
        if r.username not in usernames or r.status == FINISHED or r.id in keep:
            continue
        when = as_utc(r.updated_at or r.created_at)
        if when is not None and (now - when).total_seconds() > limit:
            out.append(r)
    return out


class LeaderboardEnrichment:
    name = "leaderboard"

    def __init__(self, view: LeaderboardView, config: Config) -> None:
        self.view = view
        self.config = config
        self.usernames = config.leaderboard_usernames()

    def _stale(self) -> str:
        if not self.view.error:
            return ""
        when = f"{self.view.fetched_at:%H:%M}" if self.view.fetched_at else "never"
        return f" [leaderboard down: {self.view.error}; rows as last read ({when})]"

    def _trace(self, repo_id: str | None) -> TraceStatus | None:
        return self.view.traces.get(repo_id) if repo_id else None

    def checks(self, exp: Experiment, report: AuditReport, policy: Policy, now: datetime) -> list[Check]:
        if self.view.fetched_at is None:
            why = f"leaderboard unreachable: {self.view.error or 'not read yet'}"
            return [Check(id="traces", title="Traces uploaded and linked", status=WARN, evidence=why,
                          action="re-audit when the leaderboard answers"),
                    Check(id="stale_rows", title="Stale leaderboard rows", status=WARN, evidence=why,
                          action="re-audit when the leaderboard answers")]
        m = match(exp, self.view, policy, now)
        stale = self._stale()
        out = [self._registered(exp, report, m), self._partial(report, m), self._traces(exp, report, m),
               *self._names(exp, report, m), self._stale_rows(exp, m, policy, now), self._free_disk(exp, report, m)]
        if stale:
            out = [copy_with(c, evidence=c.evidence + stale) for c in out]
        return out

    def notes(self, exp: Experiment, report: AuditReport) -> list[str]:
        if self.view.fetched_at is None:
            return []
        # every row of the pair, whatever the window: the same rows the checks were read from
        m = match(exp, self.view, self.config.policy, self.view.fetched_at)
        rows = m.shown()
        if not rows:
            return []
        mine = set(self.usernames)
        lines = [f"{'yours' if r.username in mine else 'not yours'}: {r.brief()}" for r in rows[:8]]
        more = f" (+{len(rows) - 8} more)" if len(rows) > 8 else ""
        return [f"Leaderboard rows for {m.names.model or '?'} × {m.names.benchmark or '?'}{more}: "
                + " | ".join(lines)]

    # -- the checks

    def _registered(self, exp: Experiment, report: AuditReport, m: RunMatch) -> Check:
        title = "Registered on the leaderboard"
        if m.ambiguous:
            return Check(id="registered", title=title, status=FAIL, evidence=m.ambiguous, action=m.decide())
        beside = m.beside()
        row = m.row
        if row is not None:
            how = "by job name" if m.how == "job_name" else f"by pair, {m.rule()}"
            return Check(id="registered", title=title, status=PASS,
                         evidence=f"row {row.id[:8]} (yours, {row.status}, matched {how}){beside}")
        if not complete(report):
            return Check(id="registered", title=title, status=SKIP,
                         evidence=f"no row of yours; the run is not complete, so it is not registered{beside}")
        if not m.names.model or not m.names.benchmark:
            return Check(id="registered", title=title, status=FAIL,
                         evidence=f"no row of yours, and the real model/benchmark name is unknown{beside}",
                         action="find model_hf_name in the run's eval config, then register")
        return Check(id="registered", title=title, status=FAIL,
                     evidence=f"no row of yours for this run under {m.names.model} × {m.names.benchmark} "
                     f"({m.looked()}){beside}",
                     action="register a new row of yours (another user's row for the pair never blocks it)",
                     remediation="register")

    def _partial(self, report: AuditReport, m: RunMatch) -> Check:
        title = "No partial score registered"
        if not partial(report):
            return Check(id="partial_registered", title=title, status=PASS,
                         evidence="the run passes the valid count and the error gate" if complete(report)
                         else "the run is not a finished partial")
        if m.ambiguous:
            return Check(id="partial_registered", title=title, status=FAIL, evidence=m.ambiguous, action=m.decide())
        row = m.row
        if row is not None and row.status in REGISTERED:
            ev = f"row {row.id[:8]} ({row.username}, {row.status}, score {row.score}) registers a partial"
            return Check(id="partial_registered", title=title, status=FAIL, evidence=ev,
                         action="de-register that one row (with its usage rows); resume, and it registers cleanly",
                         remediation="deregister")
        theirs = m.theirs
        if theirs:
            owners = ", ".join(sorted({r.username or "?" for r in theirs}))
            return Check(id="partial_registered", title=title, status=FAIL,
                         evidence=f"{'; '.join(r.brief() for r in theirs)} registers this run's partial score: "
                         f"not yours ({', '.join(self.usernames) or 'no usernames configured'}), and evaldesk never "
                         "changes another user's row",
                         action=f"ask its owner ({owners}) to de-register it; evaldesk will not touch it")
        return Check(id="partial_registered", title=title, status=PASS,
                     evidence="the run is partial and no row of it is registered")

    def _traces(self, exp: Experiment, report: AuditReport, m: RunMatch) -> Check:
        title = "Traces uploaded and linked"
        if m.ambiguous:
            return Check(id="traces", title=title, status=FAIL if complete(report) else WARN, evidence=m.ambiguous,
                         action=m.decide())
        target = m.row
        if target is None:
            return Check(id="traces", title=title, status=SKIP,
                         evidence="no leaderboard row of yours for this run: register it first" if complete(report)
                         else "the run is not complete: traces go up with its registration")
        linked = repo_id_from_url(target.trace_url)
        status = self._trace(linked)
        if linked and status is not None and status.ok:
            return Check(id="traces", title=title, status=PASS,
                         evidence=f"{linked}: {status.n_files} file(s), linked from row {target.id[:8]}")
        if linked and status is not None and status.error:
            return Check(id="traces", title=title, status=WARN, evidence=f"{linked}: {status.error}",
                         action="re-audit when the Hub answers")
        if linked:
            problem = f"row {target.id[:8]} links {linked}, which " + (
                "does not exist" if status is not None and status.exists is False else "is empty")
        elif target.trace_url:
            problem = f"row {target.id[:8]} has a trace URL that names no dataset: {target.trace_url!r}"
        else:
            problem = f"row {target.id[:8]} has no trace URL"
        if not complete(report):
            return Check(id="traces", title=title, status=WARN, evidence=problem + "; the run is not complete",
                         action="resume first; upload traces once the run is complete")
        repo = linked or expected_repo(exp, self.config)
        if repo is None:
            return Check(id="traces", title=title, status=FAIL, evidence=problem,
                         action="set [traces] org in the config to name the trace dataset")
        have = self._trace(repo)
        todo = "link it" if have is not None and have.ok else f"upload the last episode of each trial to {repo}"
        return Check(id="traces", title=title, status=FAIL, evidence=problem, action=f"{todo} and set the row's "
                     "trace URL (never a second row, never the score)", remediation="upload_traces")

    def _names(self, exp: Experiment, report: AuditReport, m: RunMatch) -> list[Check]:
        out: list[Check] = []
        row = m.row
        if row is None:
            return out
        real_model, real_bench = m.names.model, m.names.benchmark
        if is_bogus_model(row.model_name):
            ev = f"row {row.id[:8]} points at model {row.model_name!r}, a vLLM served id"
            if not real_model:
                out.append(Check(id="model_name", title="Model name", status=FAIL, evidence=ev,
                                 action="find model_hf_name in the run's eval config"))
            else:
                out.append(Check(id="model_name", title="Model name", status=FAIL,
                                 evidence=f"{ev}; the run's config says {real_model!r}",
                                 action=f"repoint the row to {real_model!r}; delete the bogus model only if no row "
                                 "of any user references it", remediation="repoint_model"))
        else:
            out.append(Check(id="model_name", title="Model name", status=PASS,
                             evidence=f"row {row.id[:8]} is registered under {row.model_name!r}"
                             + (f" (the run reported {exp.model!r})" if exp.model and exp.model != row.model_name
                                else "")))
        if is_hash_benchmark(row.benchmark_name):
            ev = f"row {row.id[:8]} is filed under benchmark {str(row.benchmark_name)[:12]}…, a dataset version hash"
            if not real_bench or is_hash_benchmark(real_bench):
                out.append(Check(id="benchmark_name", title="Benchmark name", status=FAIL, evidence=ev,
                                 action="name the benchmark explicitly (the run dir's leading segment)"))
            else:
                out.append(Check(id="benchmark_name", title="Benchmark name", status=FAIL,
                                 evidence=f"{ev}; the run dir says {real_bench!r}",
                                 action=f"repoint the row to {real_bench!r}; delete the hash benchmark (task rows "
                                 "first) only if no row of any user references it", remediation="repoint_benchmark"))
        else:
            out.append(Check(id="benchmark_name", title="Benchmark name", status=PASS,
                             evidence=f"row {row.id[:8]} is filed under {row.benchmark_name!r}"))
        return out

    def _stale_rows(self, exp: Experiment, m: RunMatch, policy: Policy, now: datetime) -> Check:
        title = "Stale leaderboard rows"
        rows = stale_rows(m, exp, self.usernames, policy, now)
        live = [r for r in m.candidates if exp.state in LIVE and r.status != FINISHED]
        kept = ("; " + "; ".join(f"row {r.id[:8]} is this live run's own, never stale" for r in live)) if live else ""
        if not rows:
            hours = f"{policy.stale_row_hours:g} h"
            return Check(id="stale_rows", title=title, status=PASS,
                         evidence=f"no row of yours for the pair is unfinished for more than {hours}{kept}")
        listed = "; ".join(r.brief() for r in rows[:4])
        return Check(id="stale_rows", title=title, status=FAIL,
                     evidence=f"{len(rows)} row(s) of yours not Finished for more than {policy.stale_row_hours:g} h: "
                     f"{listed}{kept}", action="delete them (own rows only; their usage rows go with them)",
                     remediation="delete_stale")

    def _free_disk(self, exp: Experiment, report: AuditReport, m: RunMatch) -> Check:
        title = "Local run dir"
        row = m.row
        status = self._trace(repo_id_from_url(row.trace_url)) if row else None
        if (row is None or row.status != FINISHED or not complete(report) or status is None
                or not status.ok):
            return Check(id="free_disk", title=title, status=SKIP,
                         evidence="keep it: free it only after the traces are uploaded and the row registered")
        return Check(id="free_disk", title=title, status=CheckStatus.pass_,
                     evidence=f"traces on {status.repo_id} and row {row.id[:8]} registered: the run dir may go "
                     "(it moves into the quarantine, never deleted)", remediation="free_disk")
