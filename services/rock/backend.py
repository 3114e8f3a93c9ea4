"""Rock as a backend of the source registry: regression.py work dirs on local disk (a folder
holding `results/`, or a results file), the rl-rock CLI's runs (`rock://NAME` for a `[[rock]]`
entry), and `[[rock]]` entries from the config."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from services.core.config import Config, RockConfig
from services.core.models import AuditReport, CheckStatus, Experiment
from services.core.plain import copy_with
from services.core.policy import Policy
from services.core.source import Source, SourceUnavailable
from services.rock.find import results_files

# Finding work dirs (find.py) takes a listing: Rock's formats and sources load only once a path
# holds one.

NAME = "rock"
SCHEMES: tuple[str, ...] = ("rock",)
KINDS: tuple[str, ...] = ("rock",)


def _entry(config: Config, name: str) -> RockConfig | None:
    return next((r for r in config.rock if r.name == name), None)


def _is_workdir(path: str) -> bool:
    return bool(results_files(path))


def open_url(spec: str, config: Config) -> Source:
    """`rock://NAME`: the `[[rock]]` entry called NAME, read through the rl-rock CLI."""
    name = spec.split("://", 1)[1].strip("/")
    if not name or "/" in name:
        raise ValueError(f"{spec}: a Rock URL is rock://NAME, NAME a [[rock]] entry of the config")
    entry = _entry(config, name)
    if entry is None:
        raise SourceUnavailable(spec, f"no [[rock]] entry named {name!r} in the config")
    if not (entry.job_config or entry.namespace or entry.experiment_id):
        raise SourceUnavailable(spec, f"[[rock]] {name!r} has no job_config or namespace/experiment_id for the CLI")
    from services.rock.source import RockCLISource

    return RockCLISource(entry, config.policy, label=spec)


def _settings_for(workdir: str, config: Config) -> RockConfig | None:
    """The `[[rock]]` entry for a work dir, so a path on the command line keeps its regression.py."""
    for entry in config.rock:
        if entry.workdir and os.path.abspath(os.path.expanduser(entry.workdir)) == workdir:
            return entry
    return None


def open_path(path: str, config: Config) -> Source:
    from services.rock.source import RockResultsSource

    p = os.path.abspath(os.path.expanduser(path))
    if os.path.isfile(p):  # results/<id>.json: that one experiment
        workdir = os.path.dirname(os.path.dirname(p))
        return RockResultsSource(workdir, config.policy, experiment=p, settings=_settings_for(workdir, config))
    return RockResultsSource(p, config.policy, settings=_settings_for(p, config))


def find_local(path: str, config: Config) -> list[Source]:
    """A regression.py work dir (it holds results/*.json), one per child that is one, or a results file."""
    p = os.path.abspath(path)
    if os.path.isfile(p):
        parent = os.path.dirname(p)
        return [open_path(p, config)] if p.endswith(".json") and os.path.basename(parent) == "results" else []
    if _is_workdir(p):
        return [open_path(p, config)]
    found: list[Source] = []
    try:
        children = sorted(os.scandir(p), key=lambda e: e.name)
    except OSError:
        return []
    for entry in children:
        if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False) and _is_workdir(entry.path):
            src = open_path(entry.path, config)
            src.label = entry.name
            found.append(src)
    return found


def claims(path: str) -> bool:
    return False  # another backend may find its own runs beside or inside this one


def configured(config: Config) -> list[Source]:
    """One source per `[[rock]]` part: its work dir, and its CLI runs when it has a locator."""
    from services.rock.source import RockCLISource, RockResultsSource

    out: list[Source] = []
    for entry in config.rock:
        if entry.workdir:
            out.append(RockResultsSource(entry.workdir, config.policy, label=entry.name,
                                         experiment=entry.experiment, settings=entry))
        if entry.job_config or entry.namespace or entry.experiment_id:
            out.append(RockCLISource(entry, config.policy, label=f"{entry.name}/cli" if entry.workdir else entry.name))
    return out


def write_demo(root: Path, now: datetime) -> list[Path]:
    from services.rock.demo import write_demo as write

    return write(root / "rock", now=now)


def audit(exp: Experiment, policy: Policy, now: datetime) -> AuditReport | None:
    """DESIGN 3's checks, with Rock's own fix: a retry of the failed tasks (a new experiment),
    never a dedupe (regression.py runs each task once per experiment)."""
    from services.audit.verdict import standard_checklist

    report = standard_checklist(exp, policy)
    checks = []
    for c in report.checks:
        if c.id == "finished" and c.status == CheckStatus.pass_ and exp.finished_at is not None:
            c = copy_with(c, **{"evidence": f"Rock says {exp.state_raw or exp.state.value}; last task ended "
                                                  f"{exp.finished_at:%Y-%m-%d %H:%M}"})
        elif c.id == "score" and c.status == CheckStatus.pass_ and exp.score is not None:
            c = copy_with(c, **{"evidence": f"score {exp.score:.4f}: mean reward of the "
                                                  f"{exp.counts.valid} valid tasks"})
        elif c.id == "duplicates" and c.status == CheckStatus.fail:
            c = copy_with(c, **{"remediation": None,
                                     "action": "a task recorded twice in one experiment: read the results file"})
        elif c.id in ("valid_count", "error_gate") and c.status == CheckStatus.fail and exp.source == "rock":
            if exp.path.startswith("rock://"):
                # the platform CLI lists runs but cannot launch one; Harbor's resume is not Rock's
                c = copy_with(c, **{"remediation": None,
                                         "action": "retry the errored tasks from the Rock platform"})
            else:
                c = copy_with(c, **{"remediation": "retry",
                                         "action": "retry the errored tasks with regression.py retry (a new "
                                                   "experiment); x previews the exact command"})
        elif c.remediation in ("resume", "rerun"):
            # Harbor's job-dir remediations have no meaning for a Rock experiment
            c = copy_with(c, **{"remediation": None})
        checks.append(c)
    notes = [n.replace("resume, never register", "retry the errored tasks, never register")
             .replace("Resume them on a healthy sandbox", "Retry them on a healthy sandbox") for n in report.notes]
    return copy_with(report, checks=checks, notes=notes)
