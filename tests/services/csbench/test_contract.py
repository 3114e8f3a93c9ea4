"""evaldesk does not import clousight-bench at run time: the words and figures it mirrors from
csbench (services/csbench/formats.py, find.py) are checked here against the installed package's own."""

from __future__ import annotations

import subprocess

import pytest

from services.csbench import find, formats
from tests.support.csbench_fixtures import csbench_exe


@pytest.fixture(autouse=True)
def _csbench() -> None:
    csbench_exe()


def test_the_domain_dirs_a_results_dir_is_found_by() -> None:
    import importlib
    import pkgutil

    from clousight_bench import domains
    from clousight_bench.core.plugin import DomainPack

    packs = set()
    for m in pkgutil.iter_modules(domains.__path__):
        mod = importlib.import_module(f"{domains.__name__}.{m.name}")
        packs |= {v.domain for v in vars(mod).values()
                  if isinstance(v, type) and issubclass(v, DomainPack) and v is not DomainPack}
    assert set(find.DOMAINS) == packs


def test_run_plan_words() -> None:
    from clousight_bench.core.campaign import manifest
    from clousight_bench.ops import runplan

    assert formats.OK_RECORD_STATUSES == runplan.SCORED_STATUSES
    assert formats.TERMINAL_TASK_STATES == manifest.TERMINAL_STATES
    assert ("pending", "running", *manifest.TERMINAL_STATES) == formats.TASK_STATUSES
    assert manifest.TaskProgress("x").status == "pending"


def test_progress_plane() -> None:
    from clousight_bench.core import progress, store

    assert formats.PROGRESS_TERMINAL == progress.TERMINAL_STATUSES
    assert progress.TERMINAL_GRACE_S == formats.PROGRESS_GRACE_S
    assert formats.RESERVED_SUBTREES == store.RESERVED_SUBTREES


def test_prod_profile() -> None:
    from clousight_bench.cli import prod
    from clousight_bench.core.campaign import prod_submit, spec
    from clousight_bench.domains.agent_runtime.aliyun import provider

    assert formats.HEARTBEAT_INTERVAL_S == prod_submit.HEARTBEAT_INTERVAL_S
    assert formats.DEFAULT_WATCHDOG_TIMEOUT_S == spec.DEFAULT_WATCHDOG_TIMEOUT_S
    assert tuple(provider._DRIVER_TF_VARS) == formats.DRIVER_KEYS
    assert formats.PROD_TF_DIR == prod._PROD_TF_DIR
    # `csbench submit` takes the plan, --config and --watchdog-timeout, as evaldesk passes them
    said = subprocess.run([csbench_exe(), "submit", "--help"], capture_output=True, text=True, timeout=60)
    assert said.returncode == 0
    assert "--watchdog-timeout" in said.stdout and "--config" in said.stdout and "plan_file" in said.stdout
    assert f"default {formats.DEFAULT_WATCHDOG_TIMEOUT_S:g}" in " ".join(said.stdout.split())


def test_the_warmup_role() -> None:
    import inspect

    from clousight_bench.ops import runplan

    source = inspect.getsource(runplan.execute_plan)
    assert f'_slot("{formats.WARMUP}", i)' in source and f'_slot("{formats.MEASURED}", i)' in source
