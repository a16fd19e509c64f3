"""The platform's cadences: each type's cron expression and every rule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pier.routines import RoutineError, next_tick
from pier.routines.cadence import MANUAL, checked, cron_of


@pytest.mark.parametrize(
    ("cadence", "cron"),
    [
        ({"type": "manual"}, MANUAL),
        ({"type": "hourly", "minute_utc": 15}, "15 * * * *"),
        ({"type": "hourly"}, "0 * * * *"),
        ({"type": "daily", "hour_utc": 9}, "0 9 * * *"),
        ({"type": "daily", "hour_utc": 9, "minute_utc": 30}, "30 9 * * *"),
        ({"type": "weekdays", "hour_utc": 7, "minute_utc": 5}, "5 7 * * 1-5"),
        ({"type": "weekly", "day_of_week": "mon", "hour_utc": 9}, "0 9 * * 1"),
        ({"type": "weekly", "day_of_week": "SUN", "hour_utc": 23, "minute_utc": 59}, "59 23 * * 0"),
    ],
)
def test_each_cadence_is_one_cron_expression(cadence, cron):
    assert cron_of(checked(cadence)) == cron


def test_a_weekly_cadence_fires_on_its_day_in_utc():
    cron = cron_of(checked({"type": "weekly", "day_of_week": "wed", "hour_utc": 9, "minute_utc": 0}))
    tick = next_tick(cron, "UTC", datetime(2026, 12, 3, 12, 0, tzinfo=UTC))  # a Thursday
    assert tick == datetime(2026, 12, 9, 9, 0, tzinfo=UTC)  # the next Wednesday


@pytest.mark.parametrize(
    ("cadence", "field"),
    [
        ({"type": "daily"}, "cadence.hour_utc"),
        ({"type": "weekdays", "minute_utc": 3}, "cadence.hour_utc"),
        ({"type": "weekly", "hour_utc": 9}, "cadence.day_of_week"),
        ({"type": "weekly", "hour_utc": 9, "day_of_week": "someday"}, "cadence.day_of_week"),
        ({"type": "manual", "hour_utc": 9}, "cadence.hour_utc"),
        ({"type": "manual", "day_of_week": "mon"}, "cadence.day_of_week"),
        ({"type": "daily", "hour_utc": 24}, "cadence.hour_utc"),
        ({"type": "daily", "hour_utc": 9, "minute_utc": 60}, "cadence.minute_utc"),
        ({"type": "daily", "hour_utc": True}, "cadence.hour_utc"),
        ({"type": "daily", "hour_utc": "9"}, "cadence.hour_utc"),
        ({"type": "hourly", "hour_utc": 3}, "cadence.hour_utc"),
        ({"type": "daily", "hour_utc": 9, "day_of_week": "mon"}, "cadence.day_of_week"),
        ({"type": "monthly", "hour_utc": 9}, "cadence.type"),
        ({"hour_utc": 9}, "cadence.type"),
        ({"type": "daily", "hour_utc": 9, "tz": "UTC"}, "cadence.tz"),
        ("daily", "cadence"),
    ],
)
def test_each_rule_names_its_field(cadence, field):
    with pytest.raises(RoutineError) as caught:
        checked(cadence)
    assert caught.value.field == field
