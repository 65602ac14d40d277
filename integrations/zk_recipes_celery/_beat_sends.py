"""The leader's sends, recorded in ZooKeeper so that the next leader keeps their phase.

``LeaderScheduler`` (any scheduler behind ``LeaderGate``) keeps its schedule
in each beat: a PersistentScheduler's shelve file, whose ``last_run_at`` a
standby advances at its own phase (when that beat started). An interval
entry of a new leader would run at the new leader's phase: anywhere from
just after the old leader's last send (a second run inside one period) to
almost two periods later. So:

- the leader records each send before it sends it, in ZkScheduler's run
  record (``<prefix>/schedule/<beat name>/runs/<entry>``: ``last_run_at``,
  ``total_run_count``; one write per send; a write that fails is logged and
  the entry sent anyway);
- a beat that becomes the leader (a new term of its election seat) reads
  the records and sets each entry's ``last_run_at`` from its record before
  its next tick: the entry is due one period after the previous leader's
  last send (at once, once, if that is past). An entry never recorded keeps
  this beat's own ``last_run_at``;
- a beat that does not lead ticks at least every ``TAKEOVER_POLL`` seconds,
  so that it notices it leads within that (Celery's loop sleeps until the
  next due entry otherwise, up to ``beat_max_loop_interval``).

A leader killed between its record and its send loses that send (at most
once, as ZkScheduler). Crontab entries are aligned by the clock anyway: the
record changes nothing for them.
"""

from __future__ import annotations

import datetime
import logging
import time
import urllib.parse
from typing import Any

from zk_recipes import NodeExistsError, NoNodeError, ZkRecipesError
from zk_recipes.frameworks import BeatEntry, BeatSchedule, LastRun, ScheduleError
from zk_recipes_celery._lifecycle import app_state

log = logging.getLogger("zk_recipes.celery.beat")

#: The longest a beat that does not lead sleeps between two ticks (seconds).
TAKEOVER_POLL = 1.0


def run_node(name: str) -> str:
    """The run record's node name for a beat entry name (quoted when it is not a node name)."""
    try:
        BeatEntry(name, "t", {"every": 1})
    except ScheduleError:
        return urllib.parse.quote(name, safe="")
    return name


def _store(scheduler: Any) -> BeatSchedule:
    state = app_state(scheduler.app)
    config = state.config
    return BeatSchedule(state.process_client.get(), config.prefix, config.beat_name)


def record_send(scheduler: Any, entry: Any) -> None:
    """Record that the leader sends ``entry`` now (before it does)."""
    reserved = scheduler.schedule.get(entry.name)
    count = getattr(reserved, "total_run_count", entry.total_run_count + 1)
    data = LastRun(time.time(), int(count)).to_bytes()
    try:
        store = _store(scheduler)
        path = f"{store.runs_path}/{run_node(entry.name)}"
        try:
            store.client.set(path, data)
        except NoNodeError:
            try:
                store.client.create(path, data, parents=True)
            except NodeExistsError:
                store.client.set(path, data)
    except ZkRecipesError as exc:
        log.warning(
            "beat: the send of %s is not recorded (%s): a beat taking over next counts its "
            "period from an earlier send",
            entry.name,
            exc,
        )


def take_over(scheduler: Any) -> None:
    """This beat leads now: count each entry from the previous leader's last recorded send."""
    try:
        runs = _store(scheduler).last_runs()
    except ZkRecipesError as exc:
        scheduler._zk_term = None  # try again at the next tick
        log.warning("beat: the previous leader's sends could not be read (%s)", exc)
        return
    moved = []
    for name, entry in list(scheduler.schedule.items()):
        found = runs.get(run_node(name))
        if found is None:
            continue
        at = datetime.datetime.fromtimestamp(found[0].last_run_at, datetime.timezone.utc)
        if entry.last_run_at != at:
            entry.last_run_at = at
            moved.append(name)
    if moved:
        scheduler._heap = None  # Celery rebuilds it from the entries at this tick
    log.info(
        "beat: leading now; %d entr%s count from the previous leader's last send: %s",
        len(moved),
        "y" if len(moved) == 1 else "ies",
        ", ".join(moved) or "-",
    )
