"""The leaderboard fixtures (tests/support/leaderboard_fixtures.py) for the tests here."""

from tests.support.leaderboard_fixtures import demo, hub, lb, secrets  # noqa: F401
