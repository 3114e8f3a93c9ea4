"""csbench (clousight-bench) as a backend of the source registry.

- a local path: a `csbench run-plan --results` dir or a `csbench fetch --dest` dir, or a
  folder holding such dirs beside Harbor job dirs;
- `csbench://CAMPAIGN_ID` or the `[csbench]` config section: cloud campaigns by id, through
  `csbench status` / `csbench logs` (and what was fetched of them).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from services.core.config import CAMPAIGN_ID, Config
from services.core.models import AuditReport, Experiment
from services.core.policy import Policy
from services.core.source import Source, SourceUnavailable
from services.csbench.find import KIND, find_results_dirs

if TYPE_CHECKING:
    from services.csbench.cli import Settings

# Finding csbench runs (find.py) takes a few stats and nothing else of csbench: its models,
# checklist and sources load only once a path holds its runs.

NAME = "csbench"
SCHEMES: tuple[str, ...] = ("csbench",)
KINDS: tuple[str, ...] = (KIND,)


def settings(config: Config) -> Settings | None:
    if config.csbench is None:  # (no [csbench] section: nothing of csbench loads)
        return None
    from services.csbench.cli import settings as of

    return of(config)


def _submitted(s: Settings) -> list[str]:
    from services.csbench.marks import read_marks_now
    from services.remediations.records import QUARANTINE_DIR

    if not os.path.isdir(os.path.join(s.results_dir, QUARANTINE_DIR)):
        return []
    return [m.campaign_id for m in read_marks_now(s.results_dir).submits if m.campaign_id]


def _owned(config: Config) -> tuple[frozenset[str], dict[str, str]]:
    """The dirs of the campaigns the campaign source reads (configured, or submitted by
    evaldesk) and their ids."""
    s = settings(config)
    if s is None:
        return frozenset(), {}
    dirs = {os.path.abspath(s.campaign_dir(cid)): cid for cid in [*s.campaigns, *_submitted(s)]}
    return frozenset(dirs), dirs


def open_url(spec: str, config: Config) -> Source:
    """`csbench://camp-ab12cd34[,camp-…]`: campaigns by id, with the `[csbench]` config;
    `csbench://` alone: everything that config follows (its campaigns, its submit plans, and
    the campaigns evaldesk submitted)."""
    _, _, rest = spec.partition("://")
    rest = rest.strip("/")
    ids = [c for c in rest.split(",") if c]
    if rest and (not ids or not all(CAMPAIGN_ID.match(c) for c in ids)):
        raise ValueError(f"{spec}: expected csbench://CAMPAIGN_ID (e.g. csbench://camp-ab12cd34), or csbench:// for "
                         "the [csbench] config's campaigns and plans")
    from services.csbench.source import CampaignSource

    s = settings(config)
    if s is None:
        raise SourceUnavailable(spec, "reading csbench campaigns needs a [csbench] section in the config "
                                "(config = the csbench YAML with target.blob_bucket and target.region)")
    if not ids:
        return CampaignSource(s, label=spec)
    return CampaignSource(s, ids, label=spec, plans=[], submitted=False)


def open_path(path: str, config: Config) -> Source:
    from services.csbench.source import ResultsSource

    skip, ids = _owned(config)
    return ResultsSource(path, skip=skip, campaign_ids=ids, settings=settings(config))


def find_local(path: str, config: Config) -> list[Source]:
    """One source for the csbench results dirs in `path` (itself, or its children)."""
    found = find_results_dirs(path)
    if not found:
        return []
    skip, _ = _owned(config)  # (the campaigns the campaign source reads are not read twice)
    return [open_path(path, config)] if os.path.abspath(path) not in skip and set(found) - skip else []


def claims(path: str) -> bool:
    return False  # another backend may find its own runs beside or inside this one


def configured(config: Config) -> list[Source]:
    from services.csbench.source import CampaignSource

    s = settings(config)
    if s is None or not (s.campaigns or s.plans or _submitted(s)):
        return []
    return [CampaignSource(s)]


def write_demo(root: Path, now: datetime) -> list[Path]:
    from services.csbench.demo import write_demo as write

    return write(root, now)


def audit(exp: Experiment, policy: Policy, now: datetime) -> AuditReport | None:
    from services.csbench.checklist import audit_campaign, audit_plan
    from services.csbench.model import PlanExperiment

    if isinstance(exp, PlanExperiment):
        return audit_plan(exp)
    return audit_campaign(exp, policy, now)


# ---- `--batch submit` (tui/batch_submit.py) reaches csbench only through these ------------------

SUBMIT = "csbench_submit"


def submit_sources(config: Config, plans: list[str]) -> tuple[list[tuple[str, Source]], str | None]:
    """One source per submit plan — those given, else the `[csbench] plans` — or why not."""
    from services.csbench.source import CampaignSource

    s = settings(config)
    if s is None:
        return [], ("submit needs a [csbench] section in the config (config = the local csbench YAML with "
                    "target.region, target.blob_bucket, target.mode)")
    paths = [os.path.abspath(os.path.expanduser(p)) for p in plans] or list(s.plans)
    if not paths:
        return [], ("submit needs a PLAN (a csbench submit plan, e.g. configs/swe-bench-smoke.plan.yaml) or "
                    "[csbench] plans in the config")
    return [(p, CampaignSource(s, campaigns=[], plans=[p], submitted=False, label=NAME))
            for p in dict.fromkeys(paths)], None


def plan_of(exp: Experiment, path: str) -> bool:
    """`exp` is the submit plan at `path`."""
    from services.csbench.model import PlanExperiment

    return isinstance(exp, PlanExperiment) and exp.path == path


def campaign_submitted(stdout: str) -> str | None:
    from services.csbench.marks import campaign_printed

    return campaign_printed(stdout)
