"""How the pages write a time and a board's name: what the template filters ``when`` and ``board_title`` do.

A time is shown to the minute in UTC ("2026-12-07 13:20 UTC") inside a ``<time>`` element whose
``datetime`` keeps the exact machine value (what a snapshot's metadata says, microseconds and all), so
readers see a time and scripts and assistive technology still get the precise one. A board is shown by
its title (:func:`leaderboard.snapshot.titles.slice_title`), never by its key.
"""

from __future__ import annotations

from datetime import UTC, datetime

import markupsafe

from leaderboard.snapshot.titles import slice_title

__all__ = ["board_title", "human_time", "time_tag"]

#: The minute, in UTC: what a reader needs of a publication time.
HUMAN_TIME = "%Y-%m-%d %H:%M UTC"


def _as_utc(value: datetime | str) -> datetime | None:
    """A stored time (naive ones are UTC, as the store writes them) or an ISO text; None if unreadable."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def human_time(value: datetime | str | None) -> str:
    """``2026-12-07 13:20 UTC``; an unreadable text as it is, nothing as a dash."""
    if value is None:
        return "—"
    moment = _as_utc(value)
    return str(value) if moment is None else moment.strftime(HUMAN_TIME)


def time_tag(value: datetime | str | None) -> markupsafe.Markup:
    """``<time datetime="2026-12-07T13:20:31.123456+00:00">2026-12-07 13:20 UTC</time>`` (escaped)."""
    if value is None:
        return markupsafe.Markup("—")
    moment = _as_utc(value)
    machine = str(value) if moment is None else moment.isoformat()
    return markupsafe.Markup('<time datetime="{}">{}</time>').format(machine, human_time(value))


def board_title(label: str | None) -> str:
    """The title of a board from its key (``category=coding`` -> ``Coding``)."""
    return slice_title(label or "all")
