"""When a routine fires: a five-field cron expression read in an IANA time zone.

Parsing and iteration are cronsim's, which follows Debian cron across DST: a
time that does not exist on the day the clocks go forward fires at the first
minute after the gap, a time that happens twice when they go back fires once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from pier.errors import InputError

# The usual shorthands, as Vixie cron spells them.
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MAX_CRON = 255  # the column's width
CRON_HELP = (
    "write five fields, minute hour day-of-month month day-of-week "
    "(e.g. '0 9 * * 1-5' for 09:00 on weekdays), or @hourly, @daily, @weekly, @monthly, @yearly"
)


class RoutineError(InputError):
    """A routine field that cannot be used; `field` names it (the API answers 422
    with it in `errors`)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def cron_expression(text: str) -> str:
    """The expression with aliases expanded, once cronsim can read it; else RoutineError."""
    if len(text) > MAX_CRON:
        raise RoutineError("cron_expression", f"is {len(text)} characters long: use at most {MAX_CRON}")
    expr = ALIASES.get(text.strip().lower(), " ".join(text.split()))
    if len(expr.split()) != 5:
        raise RoutineError("cron_expression", f"{text!r} has {len(expr.split())} field(s): {CRON_HELP}")
    try:
        CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise RoutineError("cron_expression", f"{text!r} does not parse ({exc}): {CRON_HELP}") from None
    return expr


def time_zone(name: str) -> ZoneInfo:
    """The IANA zone `name` (e.g. Europe/Berlin, UTC); else RoutineError."""
    try:
        if not name or name != name.strip() or name.startswith("/") or ".." in name:
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise RoutineError(
            "timezone",
            f"{name!r} is not an IANA time zone: use a name like UTC, Europe/Berlin or America/New_York",
        ) from None


def next_tick(expr: str, zone: str, after: datetime) -> datetime:
    """The first tick strictly after `after` (aware), in UTC. Whatever the ticks
    between a routine's last tick and `after`, the next one is after `after`:
    a server that was down fires a missed tick once, not once per tick missed."""
    local = after.astimezone(time_zone(zone))
    tick = next(CronSim(cron_expression(expr), local))
    if tick.tzinfo is None:  # cronsim hands back naive local times on its DST path
        tick = tick.replace(tzinfo=local.tzinfo)
    return tick.astimezone(UTC)
