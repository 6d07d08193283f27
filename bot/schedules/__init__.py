"""Reminders, repeating schedules and check-ins: what Tusk runs in a chat at a time, by itself.

    rules.py     a repeat rule ("every weekday at 08:00", "cron 0 8 * * 1-5") -> APScheduler trigger, DST-safe
    model.py     `Schedule` and `Run`, and their records in reminders.json (schema, migrations)
    store.py     the `ScheduleStore` seam and its file backend (reminders.json)
    timing.py    which run a due schedule starts now, and what it passes over (at most one catch-up)
    service.py   `Schedules`: held in memory, claimed and run when due, paused, resumed, cancelled
    runs.py      a run as a turn of its chat (on the bus), and the outcome its turn reports back
    checkins.py  check-ins on the dated open items of chats that opted in
    show.py      schedules and runs in words (/reminders, the tools, the console, `tusk doctor`)
    health.py    `tusk doctor`'s check: schedules whose last run failed

The tools are in bot/tools/reminders.py, the /reminders and /checkins commands in bot/commands/reminders.py.
"""
