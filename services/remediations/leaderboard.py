"""Leaderboard remediations as plans for the write path: register, de-register, repoint the
model or the benchmark, delete stale rows.

Every row write is one `ExternalStep` of the `leaderboard` handler below; its result holds the
rows before and after (the journal and undo read them). Each handler call goes through
`services.leaderboard.safety.Guard`, which re-reads the row and its pair and refuses anything
not provably ours; planning asks the same question first, so a plan that would be refused is
`blocked` with the reason and the rows. Records are kept on this machine (the leaderboard has
no place for them), and `--batch undo RECORD_ID` rolls a de-register or a repoint back.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from services.audit.verdict import audit_experiment
from services.core.config import Config
from services.core.models import AuditReport, Experiment, experiment_key
from services.core.plain import dump
from services.core.source import Source
from services.leaderboard.client import LeaderboardClient, LeaderboardError, LeaderboardUnavailable
from services.leaderboard.enrichment import complete, partial, stale_rows
from services.leaderboard.match import RunMatch, match
from services.leaderboard.rows import FINISHED, REGISTERED, JobRow, LeaderboardView
from services.leaderboard.safety import Guard, why_not
from services.leaderboard.traces import HubClient, expected_repo
from services.leaderboard.view import load_view
from services.remediations.errors import WriteRefused
from services.remediations.records import Plan, new_record_id
from services.remediations.steps import ExternalStep, Step, StepContext, register_handler

HANDLER = "leaderboard"

# ---- the row step ------------------------------------------------------------------------------


def row_step(op: Literal["insert", "update", "delete"], table: str, key: dict[str, Any], label: str, *,
             values: dict[str, Any] | None = None, expect: Any = None, inverse: bool = True) -> ExternalStep:
    """`values`: the row inserted or the fields set; `expect`: for an update the fields as
    planned before it, for a delete the rows as read (what undo puts back if no result came)."""
    return ExternalStep(handler=HANDLER, label=label, inverse=inverse,
                        args={"op": op, "table": table, "key": key, "values": values or {}, "expect": expect})


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(float(a) - float(b)) < 1e-9
    if isinstance(a, str) and isinstance(b, str):
        try:
            return datetime.fromisoformat(a.replace("Z", "+00:00")) == datetime.fromisoformat(b.replace("Z", "+00:00"))
        except ValueError:
            return False
    return False


def _holds(row: dict[str, Any], fields: dict[str, Any]) -> bool:
    return all(_same(row.get(k), v) for k, v in fields.items())


def _guard(ctx: StepContext) -> Guard:
    guard = ctx.resources.get("guard")
    if not isinstance(guard, Guard):
        raise LeaderboardUnavailable("no leaderboard in this step's context")
    return guard


class LeaderboardRowHandler:
    async def _rows(self, step: ExternalStep, ctx: StepContext) -> list[dict[str, Any]]:
        return await _guard(ctx).client.select(step.args["table"], eq=step.args["key"])

    async def state(self, step: ExternalStep, ctx: StepContext) -> Literal["done", "not_done", "conflict"]:
        a = step.args
        rows = await self._rows(step, ctx)
        if a["op"] == "insert":
            if not rows:
                return "not_done"
            return "done" if all(_holds(r, a["values"]) for r in rows) else "conflict"
        if a["op"] == "update" and a["table"] == "usage":
            # a job's usage rows may name other models too (a judge): only the repointed ones count
            old = [r for r in rows if _holds(r, a["expect"])]
            new = [r for r in rows if _holds(r, a["values"])]
            if old and new:
                return "conflict"
            return "not_done" if old else "done" if new else "conflict"
        if a["op"] == "update":
            if not rows:
                return "conflict"
            if all(_holds(r, a["values"]) for r in rows):
                return "done"
            if all(_holds(r, a["expect"] or {}) for r in rows):
                return "not_done"
            return "conflict"
        return "not_done" if rows else "done"

    async def do(self, step: ExternalStep, ctx: StepContext) -> dict[str, Any]:
        guard = _guard(ctx)
        a = step.args
        table, key, values = a["table"], a["key"], a["values"]
        before: list[dict[str, Any]] = []
        after: list[dict[str, Any]] = []
        if a["op"] == "insert":
            if table == "jobs":
                after = [await guard.insert_job(values)]
            else:
                after = await guard.client.insert(table, [values])
        elif a["op"] == "update":
            if table == "jobs":
                b, r = await guard.update_job(key["id"], values)
                before, after = [b], [r]
            elif table == "usage":
                before = await guard.usage_of_job(key["job_id"])
                after = await guard.update_usage_of_own_job(key["job_id"], a["expect"]["model_id"], values["model_id"])
            else:
                raise LeaderboardError(f"evaldesk does not update {table} rows")
        else:
            if table == "jobs":
                before = [await guard.delete_job(key["id"])]
            elif table == "usage":
                before = await guard.delete_usage_of_own_job(key["job_id"])
            elif table == "benchmark_tasks":
                before = await guard.delete_benchmark_tasks(key["benchmark_id"])
            elif table in ("models", "benchmarks"):
                before = await guard.delete_unreferenced(table, key["id"])
            else:
                raise LeaderboardError(f"evaldesk does not delete {table} rows")
        result = {"table": guard.client.table_name(table), "op": a["op"], "target": key, "before": before,
                  "after": after}
        step.result = result
        return result

    async def undo_check(self, step: ExternalStep, ctx: StepContext) -> str | None:
        a = step.args
        rows = await self._rows(step, ctx)
        what = f"{_guard(ctx).client.table_name(a['table'])} {json.dumps(a['key'])}"
        if a["op"] == "insert":
            if rows and not all(_holds(r, a["values"]) for r in rows):
                return f"{what} changed since evaldesk inserted it"
            return None
        if a["op"] == "update" and a["table"] == "usage":
            if any(_holds(r, a["expect"]) for r in rows):
                return f"{what} changed since evaldesk updated it"
            return None
        if a["op"] == "update":
            if not rows:
                return f"{what} is gone"
            if not all(_holds(r, a["values"]) for r in rows):
                return f"{what} changed since evaldesk updated it"
            return None
        if rows:
            return f"{what} exists again since evaldesk deleted it"
        return None

    async def undo(self, step: ExternalStep, ctx: StepContext) -> None:
        guard = _guard(ctx)
        a = step.args
        table, key = a["table"], a["key"]
        if a["op"] == "insert":
            if table == "jobs":
                await guard.delete_job(key["id"])
            else:
                await guard.delete_unreferenced(table, key["id"])
            return
        if a["op"] == "update":
            expect = a["expect"] or {}
            if table == "jobs":
                await guard.update_job(key["id"], expect)
            else:
                await guard.update_usage_of_own_job(key["job_id"], a["values"]["model_id"], expect["model_id"])
            return
        rows = step.result.get("before") or a["expect"] or []
        if not rows:
            return
        if table == "jobs":
            for r in rows:
                await guard.insert_job(r)
        else:
            await guard.client.insert(table, list(rows))


register_handler(HANDLER, LeaderboardRowHandler())

# ---- planning -----------------------------------------------------------------------------------


@dataclass
class Reading:
    """What a plan read: the view, the run's match, the audit without the leaderboard."""

    view: LeaderboardView
    match: RunMatch
    report: AuditReport
    usernames: list[str]
    client: LeaderboardClient


async def read(exp: Experiment, config: Config, now: datetime | None) -> Reading:
    try:
        client = LeaderboardClient.from_config(config)
    except LeaderboardError as exc:
        raise WriteRefused(str(exc)) from None
    view = await load_view(config, [exp], client=client)
    if view.error:
        raise WriteRefused(f"the leaderboard cannot be read now, so nothing can be planned: {view.error}")
    at = now or datetime.now(UTC)
    report = audit_experiment(exp, config.policy, at)
    return Reading(view, match(exp, view, config.policy, at), report, config.leaderboard_usernames(), client)


def digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def rows_hash(rows: list[JobRow]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") for r in sorted(rows, key=lambda r: r.id)]


def shown_rows(m: RunMatch, usernames: list[str]) -> list[str]:
    ids = {r.id for r in m.candidates}

    def label(r: JobRow) -> str:
        if r.id in ids:
            return "this run's" if len(ids) == 1 else "candidate"
        return "yours" if r.username in usernames else "not yours"

    return [f"    {label(r):<10}  {r.brief()}" for r in m.shown()]


def make_plan(action: str, title: str, exp: Experiment, r: Reading, steps: list[Step], preview: list[str], *,
              inputs: Any, blocked: str | None = None, now: datetime | None = None,
              meta: dict[str, Any] | None = None) -> Plan:
    h = digest(action, inputs)
    pid = new_record_id(action, now, h)
    if blocked:
        preview = [*preview, "", f"Cannot apply: {blocked}"]
    rows = shown_rows(r.match, r.usernames)
    if rows:
        preview = [*preview, "", "Rows of this pair on the leaderboard (every user; only yours are ever changed):",
                   *rows]
    return Plan(id=pid, action=action, title=title, target=f"leaderboard {r.client.url}: {exp.id}",
                experiment=experiment_key(exp), input_hash=h, steps=steps, preview=preview, blocked=blocked,
                meta={"id": exp.id, "kind": "leaderboard", **(meta or {}),
                      "journal": {"leaderboard": r.client.url, "run": exp.id}})


def _id_named(known: dict[str, str], name: str) -> str | None:
    """The id of the model or benchmark called `name` (`known`: id → name), if the leaderboard has one."""
    return next((i for i, n in known.items() if n == name), None)


def _repoint_row(row: Any, kind: str, current: str | None, current_id: str, real: str | None,
                 known: dict[str, str]) -> tuple[list[Step], list[str], str | None]:
    """How every repoint starts: add the real `kind` (model or benchmark) when the leaderboard
    has none by that name, then point the row at it (expecting the id it has now)."""
    steps: list[Step] = []
    preview = [f"Repoint row {row.id[:8]} ({row.username}) from {kind} {current!r} to {real!r}:"]
    real_id = _id_named(known, real or "")
    if real and real_id is None:
        real_id = str(uuid.uuid4())
        steps.append(row_step("insert", f"{kind}s", {"id": real_id}, f"add {kind} {real}",
                              values={"id": real_id, "name": real}))
        preview.append(f"  add {kind} {real!r} (the leaderboard has none)")
    column = f"{kind}_id"
    steps.append(row_step("update", "jobs", {"id": row.id}, f"repoint row {row.id[:8]} to {real}",
                          values={column: real_id}, expect={column: current_id}))
    return steps, preview, real_id


class LeaderboardRemediation:
    ACTION = ""

    def context(self, source: Source | None, config: Config) -> StepContext:
        fs = source.fs() if source is not None else None
        try:
            client = LeaderboardClient.from_config(config)
        except LeaderboardError as exc:
            raise WriteRefused(str(exc)) from None
        return StepContext(fs, guard=Guard(client, config.leaderboard_usernames()), source=source,
                           hub=HubClient.from_config(config))

    async def plan_for(self, exp: Experiment, source: Source | None, config: Config,
                       now: datetime | None = None) -> Plan:
        r = await read(exp, config, now)
        return await self.build(exp, source, config, r, now)

    async def build(self, exp: Experiment, source: Source | None, config: Config, r: Reading,
                    now: datetime | None) -> Plan:
        raise NotImplementedError


class Register(LeaderboardRemediation):
    ACTION = "register"

    async def build(self, exp: Experiment, source: Source | None, config: Config, r: Reading,
                    now: datetime | None) -> Plan:
        m, names = r.match, r.match.names
        title = f"Register {exp.id}"
        inputs = [rows_hash(m.shown()), names.model_dump(), exp.score, dump(exp.counts)]
        if m.row is not None:
            return make_plan(self.ACTION, title, exp, r, [], [f"{exp.id} is registered already: row "
                             f"{m.row.id[:8]} ({m.row.username}); nothing to insert."], inputs=inputs, now=now)
        if m.ambiguous:
            return make_plan(self.ACTION, title, exp, r, [], [f"{exp.id}: nothing is inserted."], inputs=inputs,
                             blocked=m.ambiguous, now=now)
        blocked = None
        if not r.usernames:
            blocked = why_not(None, r.usernames)
        elif not complete(r.report):
            blocked = (f"the run is not complete (verdict {r.report.verdict}): resume, never register a partial")
        elif not names.model or not names.benchmark:
            blocked = "the real model or benchmark name is unknown (model_hf_name, the run dir's benchmark)"
        steps: list[Step] = []
        preview = [f"Insert one new row of yours into {r.client.table_name('jobs')} for {exp.id}:"]
        model_id = _id_named(r.view.models, names.model or "")
        bench_id = _id_named(r.view.benchmarks, names.benchmark or "")
        if names.model and model_id is None:
            model_id = str(uuid.uuid4())
            steps.append(row_step("insert", "models", {"id": model_id}, f"add model {names.model}",
                                  values={"id": model_id, "name": names.model}))
            preview.append(f"  add model {names.model!r} to {r.client.table_name('models')} (it has none)")
        if names.benchmark and bench_id is None:
            bench_id = str(uuid.uuid4())
            steps.append(row_step("insert", "benchmarks", {"id": bench_id}, f"add benchmark {names.benchmark}",
                                  values={"id": bench_id, "name": names.benchmark}))
            preview.append(f"  add benchmark {names.benchmark!r} to {r.client.table_name('benchmarks')}")
        repo = expected_repo(exp, config)
        trace_ok = repo is not None and (r.view.traces.get(repo) is not None and r.view.traces[repo].ok)
        stamp = (now or datetime.now(UTC)).astimezone(UTC).isoformat()
        job_id = str(uuid.uuid4())
        row = {"id": job_id, "username": r.usernames[0] if r.usernames else None, "model_id": model_id,
               "benchmark_id": bench_id, "status": FINISHED, "score": exp.score, "n_trials": exp.counts.total,
               "n_errors": exp.counts.errored, "trace_url": HubClient.from_config(config).url(repo)
               if trace_ok and repo else None, "job_name": exp.id, "created_at": stamp, "updated_at": stamp}
        steps.append(row_step("insert", "jobs", {"id": job_id}, f"register {exp.id}", values=row))
        score = "-" if exp.score is None else f"{exp.score:.4f}"
        preview.append(f"  insert row {job_id[:8]}: user {row['username']}, model {names.model}, benchmark "
                       f"{names.benchmark}, Finished, score {score}, {exp.counts.total} trials, "
                       f"{exp.counts.errored} errored, job {exp.id}"
                       + (f", traces {repo}" if row["trace_url"] else ", no trace URL yet (upload traces next)"))
        others = [x for x in m.pair_rows if x.username not in r.usernames]
        if others:
            preview.append(f"  {len(others)} row(s) of other users for this pair stay as they are: an insert never "
                           "touches them.")
        return make_plan(self.ACTION, title, exp, r, steps, preview, inputs=inputs, blocked=blocked, now=now,
                         meta={"row": job_id})


def _job_delete_steps(guard_rows: list[dict[str, Any]], row: JobRow) -> list[Step]:
    steps: list[Step] = []
    if guard_rows:
        steps.append(row_step("delete", "usage", {"job_id": row.id}, f"delete {len(guard_rows)} usage row(s) of "
                              f"{row.id[:8]}", expect=guard_rows))
    steps.append(row_step("delete", "jobs", {"id": row.id}, f"delete row {row.id[:8]} of {row.username}",
                          expect=[row.db()]))
    return steps


class Deregister(LeaderboardRemediation):
    ACTION = "deregister"

    async def build(self, exp: Experiment, source: Source | None, config: Config, r: Reading,
                    now: datetime | None) -> Plan:
        m = r.match
        title = f"De-register the partial row of {exp.id}"
        inputs = [rows_hash(m.shown()), dump(exp.counts)]
        if m.ambiguous:
            return make_plan(self.ACTION, title, exp, r, [], [f"{exp.id}: nothing is de-registered."],
                             inputs=inputs, blocked=m.ambiguous, now=now)
        row = m.row
        if row is None and m.theirs:
            return make_plan(self.ACTION, title, exp, r, [], [f"{exp.id}: no row of yours registers this run."],
                             inputs=inputs, blocked=why_not(m.theirs[0], r.usernames, m.pair_rows), now=now)
        if row is None or row.status not in REGISTERED:
            return make_plan(self.ACTION, title, exp, r, [], [f"{exp.id}: no registered row of yours for this run "
                             f"({m.looked() if row is None else f'row {row.id[:8]} is {row.status}'}); nothing "
                             "to de-register."], inputs=inputs, now=now)
        blocked = None
        if not partial(r.report):
            blocked = "the run passes the valid count and the error gate: its row is not a partial"
        blocked = blocked or why_not(row, r.usernames, m.pair_rows)
        usage = await r.client.select("usage", eq={"job_id": row.id})
        # a blocked plan keeps its steps: the dialog shows what would run, and why it will not
        steps = _job_delete_steps(usage, row)
        inputs.append(usage)
        preview = [f"De-register one row: {row.brief()}",
                   f"  {len(usage)} usage row(s) of it are deleted first; the row and its usage rows can be put "
                   "back by undo.",
                   "  The run re-registers cleanly after it is resumed to completion."]
        return make_plan(self.ACTION, title, exp, r, steps, preview, inputs=inputs, blocked=blocked, now=now,
                         meta={"row": row.id})


class RepointModel(LeaderboardRemediation):
    ACTION = "repoint_model"

    async def build(self, exp: Experiment, source: Source | None, config: Config, r: Reading,
                    now: datetime | None) -> Plan:
        m = r.match
        row = m.row
        real = m.names.model
        title = f"Repoint the model of {exp.id}"
        inputs: list[Any] = [rows_hash(m.shown()), real]
        if row is None or not row.model_name or row.model_name == real:
            return make_plan(self.ACTION, title, exp, r, [], [f"{exp.id}: the row points at "
                             f"{row.model_name if row else '?'}; nothing to repoint."], inputs=inputs, now=now)
        blocked = why_not(row, r.usernames, m.pair_rows) or (None if real else "the real model name is unknown")
        bogus = row.model_id or ""
        steps, preview, real_id = _repoint_row(row, "model", row.model_name, bogus, real, r.view.models)
        usage = await r.client.select("usage", eq={"model_id": bogus})
        own_usage = [u for u in usage if u.get("job_id") == row.id]
        if own_usage:
            steps.append(row_step("update", "usage", {"job_id": row.id},
                                  f"repoint {len(own_usage)} usage row(s) of {row.id[:8]}",
                                  values={"model_id": real_id}, expect={"model_id": bogus}))
            preview.append(f"  repoint {len(own_usage)} usage row(s) of this job")
        others = [x for x in r.view.jobs if x.model_id == bogus and x.id != row.id]
        other_usage = [u for u in usage if u.get("job_id") != row.id]
        inputs += [usage, rows_hash(others)]
        if others or other_usage:
            who = sorted({x.username or "?" for x in others})
            preview.append(f"  keep model {row.model_name!r}: still referenced by {len(others)} job row(s) "
                           f"({', '.join(who) or 'none'}) and {len(other_usage)} other usage row(s)")
        else:
            steps.append(row_step("delete", "models", {"id": bogus}, f"delete bogus model {row.model_name}",
                                  expect=[{"id": bogus, "name": row.model_name}]))
            preview.append(f"  delete model {row.model_name!r}: no row of any user references it any more")
        return make_plan(self.ACTION, title, exp, r, steps, preview, inputs=inputs, blocked=blocked, now=now,
                         meta={"row": row.id})


class RepointBenchmark(LeaderboardRemediation):
    ACTION = "repoint_benchmark"

    async def build(self, exp: Experiment, source: Source | None, config: Config, r: Reading,
                    now: datetime | None) -> Plan:
        m = r.match
        row = m.row
        real = m.names.benchmark
        title = f"Repoint the benchmark of {exp.id}"
        inputs: list[Any] = [rows_hash(m.shown()), real]
        if row is None or not row.benchmark_name or row.benchmark_name == real:
            return make_plan(self.ACTION, title, exp, r, [], [f"{exp.id}: the row is filed under "
                             f"{row.benchmark_name if row else '?'}; nothing to repoint."], inputs=inputs, now=now)
        blocked = why_not(row, r.usernames, m.pair_rows) or (None if real else "the real benchmark name is unknown")
        hashed = row.benchmark_id or ""
        steps, preview, _ = _repoint_row(row, "benchmark", row.benchmark_name, hashed, real, r.view.benchmarks)
        others = [x for x in r.view.jobs if x.benchmark_id == hashed and x.id != row.id]
        tasks = await r.client.select("benchmark_tasks", eq={"benchmark_id": hashed})
        inputs += [rows_hash(others), tasks]
        if others:
            who = sorted({x.username or "?" for x in others})
            preview.append(f"  keep benchmark {str(row.benchmark_name)[:12]}…: still referenced by {len(others)} "
                           f"row(s) of {', '.join(who)}")
        else:
            if tasks:
                steps.append(row_step("delete", "benchmark_tasks", {"benchmark_id": hashed},
                                      f"delete {len(tasks)} task row(s) of the hash benchmark", expect=tasks))
                preview.append(f"  delete its {len(tasks)} task row(s) first (they block the benchmark's delete)")
            steps.append(row_step("delete", "benchmarks", {"id": hashed}, "delete the hash benchmark",
                                  expect=[{"id": hashed, "name": row.benchmark_name}]))
            preview.append(f"  delete benchmark {str(row.benchmark_name)[:12]}…: no row of any user references it")
        return make_plan(self.ACTION, title, exp, r, steps, preview, inputs=inputs, blocked=blocked, now=now,
                         meta={"row": row.id})


class DeleteStale(LeaderboardRemediation):
    ACTION = "delete_stale"

    async def build(self, exp: Experiment, source: Source | None, config: Config, r: Reading,
                    now: datetime | None) -> Plan:
        rows = stale_rows(r.match, exp, r.usernames, config.policy, now or datetime.now(UTC))
        title = f"Delete stale rows of {r.match.names.model} × {r.match.names.benchmark}"
        inputs: list[Any] = [rows_hash(rows)]
        if not rows:
            return make_plan(self.ACTION, title, exp, r, [], [f"{exp.id}: no stale row of yours; nothing to "
                             "delete."], inputs=inputs, now=now)
        steps: list[Step] = []
        preview = [f"Delete {len(rows)} row(s) of yours left unfinished for more than "
                   f"{config.policy.stale_row_hours:g} h (registration is create-if-missing, so this never blocks "
                   "a real score later):"]
        blocked = None
        for row in rows:
            why = why_not(row, r.usernames, r.match.pair_rows)
            blocked = blocked or why
            usage = await r.client.select("usage", eq={"job_id": row.id})
            inputs.append(usage)
            steps += _job_delete_steps(usage, row)
            preview.append(f"  delete {row.brief()} (+{len(usage)} usage row(s))")
        return make_plan(self.ACTION, title, exp, r, steps, preview, inputs=inputs, blocked=blocked, now=now,
                         meta={"rows": [x.id for x in rows]})


REGISTER = Register()
DEREGISTER = Deregister()
REPOINT_MODEL = RepointModel()
REPOINT_BENCHMARK = RepointBenchmark()
DELETE_STALE = DeleteStale()
