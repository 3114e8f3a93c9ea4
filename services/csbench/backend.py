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

from services.core.config import CAMPAIGN_ID, Config
from services.core.models import AuditReport, Experiment
from services.core.policy import Policy
from services.core.source import Source, SourceUnavailable
from services.csbench.assemble import KIND
from services.csbench.checklist import audit_campaign
from services.csbench.cli import settings
from services.csbench.layout import find_results_dirs
from services.csbench.source import CampaignSource, ResultsSource

NAME = "csbench"
SCHEMES: tuple[str, ...] = ("csbench",)
KINDS: tuple[str, ...] = (KIND,)


def _owned(config: Config) -> tuple[frozenset[str], dict[str, str]]:
    """The dirs of configured campaigns (the campaign source reads them) and their ids."""
    s = settings(config)
    if s is None:
        return frozenset(), {}
    dirs = {os.path.abspath(s.campaign_dir(cid)): cid for cid in s.campaigns}
    return frozenset(dirs), dirs


def open_url(spec: str, config: Config) -> Source:
    """`csbench://camp-ab12cd34[,camp-…]`: campaigns by id, with the `[csbench]` config."""
    _, _, rest = spec.partition("://")
    ids = [c for c in rest.strip("/").split(",") if c]
    if not ids or not all(CAMPAIGN_ID.match(c) for c in ids):
        raise ValueError(f"{spec}: expected csbench://CAMPAIGN_ID (e.g. csbench://camp-ab12cd34)")
    s = settings(config)
    if s is None:
        raise SourceUnavailable(spec, "reading a campaign by id needs a [csbench] section in the config "
                                "(config = the csbench YAML with target.blob_bucket and target.region)")
    return CampaignSource(s, ids, label=spec)


def open_path(path: str, config: Config) -> Source:
    skip, ids = _owned(config)
    return ResultsSource(path, skip=skip, campaign_ids=ids, settings=settings(config))


def find_local(path: str, config: Config) -> list[Source]:
    """One source for the csbench results dirs in `path` (itself, or its children)."""
    skip, _ = _owned(config)
    return [open_path(path, config)] if find_results_dirs(path, skip) else []


def claims(path: str) -> bool:
    return False  # another backend may find its own runs beside or inside this one


def configured(config: Config) -> list[Source]:
    s = settings(config)
    if s is None or not s.campaigns:
        return []
    return [CampaignSource(s)]


def write_demo(root: Path, now: datetime) -> list[Path]:
    from services.csbench.demo import write_demo as write

    return write(root, now)


def audit(exp: Experiment, policy: Policy, now: datetime) -> AuditReport | None:
    return audit_campaign(exp, policy, now)
