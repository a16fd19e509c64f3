"""Routines: a task run on a cron schedule in a time zone, with fixed init_params.

schedule.py  the cron arithmetic (cronsim, zoneinfo)
service.py   create, change, pause, resume, delete, ask for a run now (API and CLI)
scheduler.py the poller inside `pier serve` that claims due ticks and fires them
"""

from pier.routines.schedule import RoutineError, cron_expression, next_tick, time_zone
from pier.routines.service import Routines

__all__ = ["RoutineError", "Routines", "cron_expression", "next_tick", "time_zone"]
