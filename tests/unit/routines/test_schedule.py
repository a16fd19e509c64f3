"""The schedule arithmetic: ticks strictly after a time, read in the routine's
zone, across DST changes, and a missed stretch collapsing to one tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from pier.routines import RoutineError, cron_expression, next_tick, time_zone


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def test_next_tick_is_strictly_after():
    assert next_tick("*/5 * * * *", "UTC", utc(2026, 1, 1, 0, 5)) == utc(2026, 1, 1, 0, 10)
    assert next_tick("*/5 * * * *", "UTC", utc(2026, 1, 1, 0, 4, 59)) == utc(2026, 1, 1, 0, 5)


def test_the_expression_is_read_in_the_routine_zone():
    # 09:00 in New York is 14:00 UTC in winter and 13:00 UTC in summer.
    assert next_tick("0 9 * * *", "America/New_York", utc(2026, 1, 10, 0, 0)) == utc(2026, 1, 10, 14, 0)
    assert next_tick("0 9 * * *", "America/New_York", utc(2026, 7, 10, 0, 0)) == utc(2026, 7, 10, 13, 0)


def test_a_time_skipped_when_clocks_go_forward_fires_after_the_gap():
    # Europe/Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 never happens.
    tick = next_tick("30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 12, 0))
    assert tick == utc(2026, 3, 29, 1, 0)  # 03:00 CEST, the first minute after the gap
    assert next_tick("30 2 * * *", "Europe/Berlin", tick) == utc(2026, 3, 30, 0, 30)  # 02:30 CEST


def test_a_time_that_happens_twice_when_clocks_go_back_fires_once():
    # Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
    first = next_tick("30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 12, 0))
    assert first == utc(2026, 10, 25, 0, 30)  # 02:30 CEST
    assert next_tick("30 2 * * *", "Europe/Berlin", first) == utc(2026, 10, 26, 1, 30)  # next day, CET


def test_hourly_ticks_keep_their_spacing_across_dst():
    after = utc(2026, 10, 24, 23, 30)
    ticks = []
    for _ in range(5):
        after = next_tick("0 * * * *", "Europe/Berlin", after)
        ticks.append(after)
    assert [b - a for a, b in pairwise(ticks)] == [timedelta(hours=1)] * 4


def test_missed_ticks_collapse_to_one():
    """A server down for three hours of a per-minute routine: after firing once
    at `now`, the next tick is the next minute, not the first one it missed."""
    now = utc(2026, 5, 1, 15, 0, 20)
    assert next_tick("* * * * *", "UTC", now) == utc(2026, 5, 1, 15, 1)


def test_aliases_and_spacing_are_accepted():
    assert cron_expression("@daily") == "0 0 * * *"
    assert cron_expression("  0  9 * *   MON-FRI ") == "0 9 * * MON-FRI"
    assert next_tick("@hourly", "UTC", utc(2026, 1, 1, 0, 30)) == utc(2026, 1, 1, 1, 0)


@pytest.mark.parametrize(
    "expr",
    ["61 * * * *", "* * * *", "0 0 30 2 *", "every day", "0 0 * * * *", "", "0 0 1 1 " + "1," * 200 + "1"],
)
def test_a_bad_cron_expression_names_the_field(expr):
    with pytest.raises(RoutineError) as info:
        cron_expression(expr)
    assert info.value.field == "cron_expression"
    assert "five fields" in info.value.message or "at most 255" in info.value.message


@pytest.mark.parametrize("zone", ["Mars/Olympus", "europe/berlin", "Europe", "", "/etc/localtime", "../UTC"])
def test_an_unknown_time_zone_names_the_field(zone):
    with pytest.raises(RoutineError) as info:
        time_zone(zone)
    assert info.value.field == "timezone"
    assert "IANA" in info.value.message


def test_known_zones():
    assert str(time_zone("Europe/Berlin")) == "Europe/Berlin"
    assert str(time_zone("UTC")) == "UTC"
