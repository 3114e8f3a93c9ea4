"""Time helpers shared by every source and screen: Harbor mixes naive and aware datetimes."""

from __future__ import annotations

from datetime import UTC, datetime

# The clock of every backend's demo data: tests and screenshots show the same ages forever.
DEMO_NOW = datetime(2026, 11, 20, 18, 0, 0, tzinfo=UTC)


def utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(dt: datetime | None) -> datetime | None:
    """Harbor writes trial times UTC-aware and job times naive local; compare them as UTC."""
    if dt is None:
        return None
    return dt.astimezone(UTC)


def fmt_duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s < 90:
        return f"{s} s"
    m = round(s / 60)
    if m < 90:
        return f"{m} min"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m:02d} min"
    return f"{h // 24} d {h % 24} h"


def iso_z(dt: datetime) -> str:
    """ISO 8601 in UTC with a Z, the form every JSON line evaldesk prints uses."""
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")
