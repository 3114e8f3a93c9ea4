"""The csbench results dirs the real tool makes, once per session, for every test here."""

from tests.support.csbench_fixtures import csbench_runs  # noqa: F401  (a session fixture)
