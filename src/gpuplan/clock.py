"""The date a plan is made for: the one place gpuplan reads the calendar. The core and the catalogs take the date
as an argument; the shells (the Python API, the CLI, the web API) ask `plan_date` for it."""

from __future__ import annotations

import datetime
import os

from gpuplan.errors import InputError

#: the environment variable that sets the date plans are made for when the caller gives none (YYYY-MM-DD): a CI job
#: or a test suite pins it, so that its plans do not change as the calendar moves
AS_OF_ENV = "GPUPLAN_AS_OF"


def plan_date(as_of: datetime.date | None = None) -> datetime.date:
    """`as_of`, else $GPUPLAN_AS_OF, else today."""
    if as_of is not None:
        return as_of
    pinned = os.environ.get(AS_OF_ENV)
    if pinned:
        try:
            return datetime.date.fromisoformat(pinned.strip())
        except ValueError:
            raise InputError([AS_OF_ENV], f"{pinned[:40]!r} is not a date", "YYYY-MM-DD, e.g. 2026-12-01") from None
    return datetime.date.today()


__all__ = ["AS_OF_ENV", "plan_date"]
