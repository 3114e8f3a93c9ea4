"""A write on every marked run at once: each run's plan is made (the write path's dry run, as
for one run), the plans are shown in one preview, one confirmation applies them one after
the other — each through the write path, each with its own record and undo. A run with
nothing to do, or whose plan is blocked, is listed as such and left alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from services.core.models import Experiment
from services.remediations.errors import WriteRefused


@dataclass
class RunPlan:
    key: str
    exp: Experiment
    payload: Any  # a Plan, or an UndoRequest
    lines: list[str]
    skip: str = ""  # why this run is left alone


class MarkedPlans(Message):
    """Every marked run's plan of one write, ready for the one confirmation."""

    def __init__(self, action: str, plans: list[RunPlan]) -> None:
        super().__init__()
        self.action = action
        self.plans = plans


async def plan_all(app: Any, action: str, keys: list[str]) -> None:
    """Plan `action` for each marked run, then ask once (app._on_marked_plans)."""
    from services.remediations import registry

    plans: list[RunPlan] = []
    for key in keys:
        exp = app.experiment(key)
        if exp is None:
            continue
        try:
            if action == "undo":
                req = await app.undo_request(key, exp)
                if req is None:
                    plans.append(RunPlan(key, exp, None, [], "nothing to undo"))
                    continue
                skip = "; ".join(req.blocked) if req.blocked else ""
                plans.append(RunPlan(key, exp, req, [f"undo {req.record.action} {req.record.id}", *req.lines], skip))
                continue
            plan = await registry.plan(action, exp, app.source_for(key), app.config, app.now())
        except WriteRefused as exc:
            plans.append(RunPlan(key, exp, None, [], str(exc)))
            continue
        lines = [ln.replace(exp.path + "/", "").replace(exp.path, exp.id) for ln in plan.preview]
        skip = "nothing to do" if plan.nothing_to_do else (f"blocked: {plan.blocked}" if plan.blocked else "")
        plans.append(RunPlan(key, exp, plan, lines, skip))
    app.post_message(MarkedPlans(action, plans))


def preview(action: str, plans: list[RunPlan]) -> tuple[str, list[str], int]:
    """The dialog's title, its lines (each run's plan under its name) and how many runs change."""
    todo = [p for p in plans if not p.skip]
    lines = [f"{action} on {len(plans)} marked run(s): {len(todo)} to change, {len(plans) - len(todo)} left alone.",
             ""]
    for p in plans:
        steps = len(getattr(p.payload, "steps", []) or [])
        head = f"── {p.exp.id}: " + (f"left alone ({p.skip})" if p.skip else
                                     f"{steps} step(s)" if steps else "as previewed")
        lines.append(head)
        if not p.skip:
            lines += [f"  {ln}" for ln in p.lines]
    return f"{action.capitalize()} {len(todo)} of {len(plans)} marked run(s)", lines, len(todo)


async def apply_all(app: Any, action: str, plans: list[RunPlan]) -> None:
    """One after the other, each through the write path (the app's apply), as if confirmed alone."""
    for p in plans:
        if not p.skip:
            await app.apply_planned(action, p.key, p.payload, p.lines, p.exp)
