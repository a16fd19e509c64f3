"""The platform's cadences: a routine's schedule as its clients send it.

A cadence is `{"type": ..., "hour_utc", "minute_utc", "day_of_week"}` in UTC:
`manual` (a saved preset that only run-now fires), `hourly` (at `minute_utc`),
`daily` and `weekdays` (at `hour_utc`:`minute_utc`), `weekly` (on
`day_of_week` at `hour_utc`:`minute_utc`). Each is one cron expression read in
UTC, so cadence routines fire on the same scheduler as cron ones; `cron_of`
is that translation and `cadence_of` reads it back for the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pier.routines.schedule import RoutineError

TYPES = ("manual", "hourly", "daily", "weekdays", "weekly")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # cron's day numbers 0..6
FIELDS = ("type", "hour_utc", "minute_utc", "day_of_week")
NEEDS_HOUR = ("daily", "weekdays", "weekly")
# A manual routine has no schedule: stored with this as its cron expression.
MANUAL = ""


def checked(cadence: Any) -> dict[str, Any]:
    """The cadence in its canonical form (minute_utc defaults to 0 where a
    schedule uses it); RoutineError naming the field that is wrong."""
    if not isinstance(cadence, Mapping):
        raise RoutineError("cadence", 'must be an object such as {"type": "daily", "hour_utc": 9}')
    unknown = sorted(set(cadence) - set(FIELDS))
    if unknown:
        raise RoutineError(f"cadence.{unknown[0]}", f"is not a cadence field: use {', '.join(FIELDS)}")
    kind = cadence.get("type")
    if kind not in TYPES:
        raise RoutineError("cadence.type", f"{kind!r} is not a cadence: use one of {', '.join(TYPES)}")
    if kind == "manual":
        given = [name for name in FIELDS[1:] if cadence.get(name) is not None]
        if given:
            raise RoutineError(
                f"cadence.{given[0]}", 'a manual routine has no schedule: send only {"type": "manual"}'
            )
        return {"type": "manual"}
    hour = _number(cadence, "hour_utc", 23)
    minute = _number(cadence, "minute_utc", 59)
    day = cadence.get("day_of_week")
    if kind in NEEDS_HOUR and hour is None:
        raise RoutineError("cadence.hour_utc", f"is required for a {kind} cadence (0-23, UTC)")
    if kind == "hourly" and hour is not None:
        raise RoutineError("cadence.hour_utc", "an hourly cadence fires every hour: send minute_utc only")
    if kind == "weekly":
        if day is None:
            raise RoutineError("cadence.day_of_week", f"is required for a weekly cadence: one of {_days()}")
        if not isinstance(day, str) or day.lower() not in DAYS:
            raise RoutineError("cadence.day_of_week", f"{day!r} is not a day: use one of {_days()}")
    elif day is not None:
        raise RoutineError("cadence.day_of_week", f"only a weekly cadence takes a day, not {kind}")
    result: dict[str, Any] = {"type": kind, "minute_utc": minute or 0}
    if hour is not None:
        result["hour_utc"] = hour
    if kind == "weekly":
        assert isinstance(day, str)  # a weekly cadence's day was checked above
        result["day_of_week"] = day.lower()
    return result


def cron_of(cadence: Mapping[str, Any]) -> str:
    """The cron expression (read in UTC) of a checked cadence; MANUAL for manual."""
    kind, minute = cadence["type"], cadence.get("minute_utc", 0)
    if kind == "manual":
        return MANUAL
    if kind == "hourly":
        return f"{minute} * * * *"
    hour = cadence["hour_utc"]
    days = {"daily": "*", "weekdays": "1-5"}.get(kind) or str(DAYS.index(cadence["day_of_week"]))
    return f"{minute} {hour} * * {days}"


def _number(cadence: Mapping[str, Any], name: str, top: int) -> int | None:
    value = cadence.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise RoutineError(f"cadence.{name}", f"{value!r} is not a whole number from 0 to {top} (UTC)")
    return value


def _days() -> str:
    return ", ".join(DAYS[1:] + DAYS[:1])
