"""The beat schedule held in ZooKeeper (``beat_schedule(app)``) on docs/integrations/celery.md.

``edit_schedule()`` changes the schedule of the page's app (``celery_page.py``)
as the page shows; the test suite runs it against a real ZooKeeper.
"""

from __future__ import annotations

from celery_page import app


def edit_schedule() -> list[str]:
    """The page's edits, in order; the names of the entries left."""
    # --8<-- [start:beat-schedule]
    # given: app (your Celery app, as set up above)
    from celery.schedules import crontab

    from zk_recipes_celery import beat_schedule

    schedule = beat_schedule(app)  # this app's schedule
    schedule.add("report", "proj.report", 300, kwargs={"region": "eu"})
    schedule.add("nightly", "proj.cleanup", crontab(minute=0, hour=3))
    schedule.disable("report")  # kept, with its last run; not sent
    schedule.enable("report")
    schedule.remove("nightly")
    names = [entry.name for entry in schedule.entries()]  # ["report"]
    # --8<-- [end:beat-schedule]
    return names
